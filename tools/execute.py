#!/usr/bin/env python3
"""Execute chapter notebooks in place, from a fresh kernel, the way they are committed.

    python tools/execute.py                      # every chapters/*.ipynb
    python tools/execute.py chapters/01_next_token.ipynb
    python tools/execute.py --no-write ...       # run and time only (e.g. on a GPU), keep files
    python tools/execute.py --render-only ...    # no run: render the prose from the stored glue values
    python tools/execute.py --templates ...      # no run: put the MyST templates back into the cells, to edit
    python tools/execute.py --record-only ...    # no run: record the stored glue values (book/results/glue)

Stores outputs and ipywidgets state, strips volatile metadata (timestamps), renders the prose (glued
values written into the markdown, the MyST kept as each cell's template, see tools/render.py), records
each chapter's wall time in chapters/_generated/runtimes.json and the tables runtimes.md and
leaderboard.md there, that the intro and recap pages include, and each chapter's glued values in
book/results/glue/<chapter>.json, where later chapters read them (book.data.recorded_glue).
Chapters 4, 7 and 8 also export a trained model for the website's live sections (book.export): when the notebooks
are written, into a temporary folder ($BOOK_LIVE_DIR) whose files move into book/results/live/ only once the notebook
ran through and was written, so a run that fails later leaves the committed pair as it was; with --no-write it exports
to a temporary folder, or to $BOOK_LIVE_DIR if set.

Every file is written atomically (book.files: beside the target, then renamed over it): a write that fails leaves
the committed file as it was, never truncated. runtimes.json and the tables are updated after each notebook that
ran through, so a later notebook's failure does not leave them behind the notebooks already written.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
import render  # noqa: E402  (tools/render.py, next to this file)

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from book.files import atomic_write, write_together  # noqa: E402  (this repository's package)

CHAPTERS = ROOT / "chapters"
GENERATED = CHAPTERS / "_generated"
RUNTIMES = GENERATED / "runtimes.json"
GLUE_RECORDS = ROOT / "book" / "results" / "glue"   # book.data.GLUE_DIR (tests/test_execute.py ties them)
LIVE_RECORDS = ROOT / "book" / "results" / "live"   # book.export.LIVE_DIR: the committed export
LEADERBOARD_MIME = "application/vnd.book.leaderboard+json"


def strip_volatile(nb) -> None:
    """Drop what changes on every run but carries no content: timestamps and per-run ids."""
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            for out in cell.get("outputs", []):
                out.get("metadata", {}).pop("execution", None)
    nb.metadata.pop("papermill", None)
    nb.metadata.get("language_info", {}).pop("version", None)


def execute(path: Path, timeout: int = 900) -> tuple:
    """Run one notebook top to bottom in a fresh kernel and render its prose; return (notebook, seconds)."""
    nb = nbformat.read(path, as_version=4)
    rendered_with = render.glue_values(nb)
    render.check_rendered(nb, rendered_with)   # refused before the run, not after minutes of it
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=False,
                            store_widget_state=True, resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    strip_volatile(nb)
    render.render_notebook(nb, rendered_with)
    return nb, seconds


def rewrite(path: Path, change) -> bool:
    """Apply `change` to the stored notebook at `path` (no run); write and return True if it changed."""
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    change(nb)
    if nbformat.writes(nb) == before:
        return False
    write_notebook(nb, path)
    return True


def write_notebook(nb, path: Path) -> None:
    """nbformat.write(nb, path), atomically: the same bytes, written beside the notebook and renamed over it."""
    text = nbformat.writes(nb)
    atomic_write(path, text if text.endswith("\n") else text + "\n")


def record_glue(path: Path, nb) -> Path:
    """Write the notebook's glued values (their text/plain) to book/results/glue/<chapter>.json; return that path."""
    values = {name: bundle["text/plain"] for name, bundle in render.glue_values(nb).items() if "text/plain" in bundle}
    target = GLUE_RECORDS / f"{path.stem}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    record = {"chapter": path.stem, "source": "tools/execute.py, from the glue outputs of the committed notebook",
              "values": values}
    atomic_write(target, json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return target


def leaderboard_rows(nb) -> list:
    rows = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if LEADERBOARD_MIME in out.get("data", {}):
                rows.append(out["data"][LEADERBOARD_MIME])
    return rows


def write_tables(runtimes: dict) -> None:
    """chapters/_runtimes.md and chapters/_leaderboard.md from the recorded runs."""
    lines = ["| chapter | CPU run time (s) | GPU run time (s) | notebook size (MB) |", "|---|---|---|---|"]
    rows = []
    for name in sorted(runtimes):
        r = runtimes[name]
        size = (CHAPTERS / f"{name}.ipynb").stat().st_size / 1e6 if (CHAPTERS / f"{name}.ipynb").exists() else 0
        gpu = f"{r['cuda_s']:.0f}" if r.get("cuda_s") else "not measured yet"
        cpu = f"{r['cpu_s']:.0f}" if r.get("cpu_s") else "not measured yet"
        lines.append(f"| {name} | {cpu} | {gpu} | {size:.2f} |")
        rows += r.get("leaderboard", [])
    atomic_write(GENERATED / "runtimes.md", "\n".join(lines) + "\n")
    lb = ["| chapter | model | val bits/char | parameters | train time (s, CPU) |", "|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: -r["val_bpc"]):
        lb.append(f"| {r['chapter']} | {r['name']} | {r['val_bpc']:.3f} | {r['params']:,} | {r['train_s']:.1f} |")
    atomic_write(GENERATED / "leaderboard.md", "\n".join(lb) + "\n")
    write_budget_table()


def write_budget_table() -> None:
    """chapters/_generated/budget_leaderboard.md from the recorded multi-budget leaderboard (book/results), and
    scaling_leaderboard.md from Chapter 10's scaling study (its fit and long runs), once the long runs exist."""
    from book.results import budget_table, read_rows, scaling_rows

    atomic_write(GENERATED / "budget_leaderboard.md", budget_table(read_rows("budget_leaderboard")))
    if scaling_rows():
        atomic_write(GENERATED / "scaling_leaderboard.md", budget_table(scaling_rows()))


def write_runtimes(runtimes: dict) -> None:
    """chapters/_generated/runtimes.json and the tables made from it (write_tables)."""
    GENERATED.mkdir(exist_ok=True)
    atomic_write(RUNTIMES, json.dumps(runtimes, indent=1, sort_keys=True) + "\n")
    write_tables(runtimes)


def publish_live(staged: Path) -> list:
    """Move what a chapter exported into the temporary folder `staged` into book/results/live/, all files together
    (book.files.write_together: every old file stays as it was unless all new ones were written); return them."""
    files = {LIVE_RECORDS / f.name: f.read_bytes() for f in sorted(Path(staged).iterdir()) if f.is_file()}
    if not files:
        return []
    LIVE_RECORDS.mkdir(parents=True, exist_ok=True)
    return write_together(files)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: every chapters/*.ipynb")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--no-write", action="store_true", help="run and time only; keep the files unchanged")
    mode.add_argument("--render-only", action="store_true",
                      help="no run: render the prose from the glue values stored in the outputs")
    mode.add_argument("--templates", action="store_true",
                      help="no run: write each markdown cell's MyST template back as its text, for editing")
    mode.add_argument("--record-only", action="store_true",
                      help="no run: record the glue values stored in the outputs in book/results/glue")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = ap.parse_args(argv)
    paths = args.notebooks or sorted(CHAPTERS.glob("[0-9][0-9]_*.ipynb"))
    if args.record_only:
        for path in paths:
            print(f"{path}: recorded in {record_glue(path, nbformat.read(path, as_version=4))}", flush=True)
        return 0
    if args.render_only or args.templates:
        change = render.restore_templates if args.templates else render.render_notebook
        status = 0
        for path in paths:
            try:
                print(f"{path}: {'rewritten' if rewrite(path, change) else 'unchanged'}", flush=True)
            except render.RenderError as err:
                print(f"{path}: {err}", file=sys.stderr)
                status = 1
        return status
    partial = {k: os.environ[k] for k in ("BOOK_MAX_STEPS", "BOOK_SCALE", "BOOK_THREADS", "ATEN_CPU_CAPABILITY")
               if os.environ.get(k)}
    if partial and not args.no_write:
        ap.error(f"{partial} is set: the committed notebooks are full runs with the defaults; "
                 "unset it, or add --no-write to only run and time")
    shared = ROOT.parent / "shared" / "data"
    if "BOOK_DATA_DIR" not in os.environ and shared.is_dir():
        os.environ["BOOK_DATA_DIR"] = str(shared)
    import torch
    device = "cuda" if torch.cuda.is_available() and os.environ.get("BOOK_DEVICE", "cuda") == "cuda" else "cpu"
    runtimes = json.loads(RUNTIMES.read_text()) if RUNTIMES.exists() else {}
    for path in paths:
        path = path.resolve()
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"executing {shown} on {device} ...", flush=True)
        if args.no_write:
            nb, seconds = execute(path, args.timeout)
            print(f"  {seconds:.1f} s", flush=True)
            continue
        # chapter 7 exports its GPT for the website's live section (book.export.live_dir) into a folder of its own,
        # moved into book/results/live/ only once the notebook ran through and was written
        staged = Path(tempfile.mkdtemp(prefix="book-live-"))
        before = os.environ.get("BOOK_LIVE_DIR")
        os.environ["BOOK_LIVE_DIR"] = str(staged)
        try:
            nb, seconds = execute(path, args.timeout)
            print(f"  {seconds:.1f} s", flush=True)
            write_notebook(nb, path)
            record_glue(path, nb)
            for published in publish_live(staged):
                print(f"  exported {published.relative_to(ROOT) if published.is_relative_to(ROOT) else published}")
        finally:
            if before is None:
                os.environ.pop("BOOK_LIVE_DIR", None)
            else:
                os.environ["BOOK_LIVE_DIR"] = before
            shutil.rmtree(staged, ignore_errors=True)
        entry = runtimes.setdefault(path.stem, {})
        entry[f"{device}_s"] = round(seconds, 1)
        entry["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}"
        entry["leaderboard"] = leaderboard_rows(nb)
        write_runtimes(runtimes)   # after each notebook: a later one's failure leaves these up to date
    return 0


if __name__ == "__main__":
    sys.exit(main())
