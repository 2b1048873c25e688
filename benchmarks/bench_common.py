"""What the benchmarks share: the corpus as tensors, the usual options, and recording a result with its provenance.

Every recorded benchmark ends its main() with `record(...)` (skipped with --quick): it writes the table
book/results/<name>.csv and the provenance <name>.json beside it (book.results reads both; tests/test_recorded.py
fails when the script changes after the result was recorded).
"""
from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from book.data import load_shakespeare, shakespeare_split  # noqa: E402
from book.files import atomic_write  # noqa: E402
from book.results import RESULTS_DIR, sha256_of  # noqa: E402
from book.timing import cpu_model  # noqa: E402,F401  (the provenance names the machine; benchmarks import it here)
from book.tokenizers import CharTokenizer  # noqa: E402


def char_corpus():
    """(train ids, validation ids, tokenizer): the book's corpus and split, character-level (BOOK_DATA_DIR)."""
    text = load_shakespeare()
    train_text, val_text = shakespeare_split(text)
    tok = CharTokenizer.from_text(text)
    return torch.tensor(tok.encode(train_text)), torch.tensor(tok.encode(val_text)), tok


def parser(doc: str, out: Path, eval_batches: int = 8) -> argparse.ArgumentParser:
    """The options every recorded benchmark takes: --eval-batches --threads --seed --out --quick."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--eval-batches", type=int, default=eval_batches, help="validation windows / 64 per evaluation")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: robust on a shared machine)")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--out", type=Path, default=out, help="the results table (CSV) to write")
    p.add_argument("--quick", action="store_true", help="tiny runs to test the harness; writes nothing")
    return p


def write_rows(path: Path, fields, rows) -> None:
    """The table as CSV, written atomically (book.files): a failure midway leaves the previous table as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fields)
    w.writeheader()
    w.writerows(rows)
    atomic_write(path, text.getvalue())
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def _git_commit():
    """HEAD's commit and whether the tree had uncommitted changes; (None, None) without git."""
    try:
        run = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, timeout=10)
        head = run("rev-parse", "HEAD")
        if head.returncode != 0:
            return None, None
        return head.stdout.strip(), bool(run("status", "--porcelain", "--untracked-files=no").stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None


def _jsonable(v):
    return str(v) if isinstance(v, Path) else v


def record(name: str, rows, fields, args: argparse.Namespace, seeds, started: float, script: str,
           argv=None, extra=None, texts=None) -> Path:
    """Write book/results/<name>.csv (or args.out) and the provenance <name>.json beside it; return the json's path.

    `rows`: a list of dicts, or {file name: (fields, rows)} for several tables (the first is the main one);
    `started`: time.perf_counter() at the start of main(); `script`: the benchmark's __file__; `argv`: its command
    line (default sys.argv[1:]); `extra`: more facts to keep (e.g. the GPU's name); `texts`: {file name: text} of
    plain-text outputs written beside the tables (e.g. the printed log a chapter parses), guarded like them.
    """
    tables = rows if isinstance(rows, dict) else {f"{name}.csv": (fields, rows)}
    out = Path(getattr(args, "out", None) or RESULTS_DIR / f"{name}.csv")
    paths = [out] + [out.with_name(f) for f in list(tables)[1:]]
    commit, dirty = _git_commit()          # before writing: the tables this run overwrites do not make it dirty
    for path, (fs, rs) in zip(paths, tables.values()):
        write_rows(path, fs, rs)
    for fname, text in (texts or {}).items():
        paths.append(out.with_name(fname))
        atomic_write(paths[-1], text)
        print(f"wrote {paths[-1].relative_to(ROOT) if paths[-1].is_relative_to(ROOT) else paths[-1]}")
    script = Path(script).resolve()
    prov = {
        "name": name,
        "script": script.relative_to(ROOT).as_posix() if script.is_relative_to(ROOT) else str(script),
        "script_sha256": sha256_of(script),
        "argv": [str(a) for a in (sys.argv[1:] if argv is None else argv)],
        "args": {k: _jsonable(v) for k, v in sorted(vars(args).items())},
        "git_commit": commit, "git_dirty": dirty,
        "torch": torch.__version__, "python": platform.python_version(),
        "cpu": cpu_model(), "cpu_cores": os.cpu_count(), "threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "seeds": list(seeds),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "wall_s": round(time.perf_counter() - started, 1),
        "outputs": {p.name: sha256_of(p) for p in paths},
        **(extra or {}),
    }
    path = out.with_suffix(".json")
    atomic_write(path, json.dumps(prov, indent=1) + "\n")
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return path
