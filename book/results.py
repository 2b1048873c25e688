"""Recorded experiments: the tables the benchmarks write to book/results, and where each came from.

Every recorded benchmark (benchmarks/*.py, without --quick) writes its table `<name>.csv` and, beside it,
`<name>.json`: its provenance (the script and its sha256, the command line, git commit, torch, CPU, threads,
seeds, date, wall seconds, and the sha256 of every file it wrote). A chapter reads a table with `read_rows` and
can say where it came from with `provenance`; `tests/test_recorded.py` fails when the script in the tree is no
longer the one that wrote the table (`stale_reason`), and says which command regenerates it.
"""
from __future__ import annotations

import csv
import hashlib
import json
import shlex
from pathlib import Path
from typing import Dict, List, Optional

__all__ = ["RESULTS_DIR", "read_rows", "provenance", "sha256_of", "regenerate_command", "stale_reason"]

# the recorded tables, shipped with the package (pyproject's package-data: results/*.csv, results/*.json)
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _name(name) -> str:
    if not isinstance(name, str) or not name or "/" in name or "." in name:
        raise ValueError(f"name must be a recorded result's stem such as 'lstm_vs_gpt', got {name!r}")
    return name


def read_rows(name: str, results_dir: Optional[Path] = None) -> List[Dict[str, str]]:
    """The rows of book/results/<name>.csv as dicts of text (convert what you need)."""
    path = Path(results_dir or RESULTS_DIR) / f"{_name(name)}.csv"
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.csv"))
        raise FileNotFoundError(f"no recorded table {path}; recorded: {known}")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def provenance(name: str, results_dir: Optional[Path] = None) -> dict:
    """The provenance book/results/<name>.json a benchmark wrote beside its table (see the module's docstring)."""
    path = Path(results_dir or RESULTS_DIR) / f"{_name(name)}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no provenance {path}: the result was recorded before provenance, or never")
    return json.loads(path.read_text())


def sha256_of(path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def regenerate_command(prov: dict) -> str:
    """The command line that regenerates a recorded result, from the repository's root."""
    return shlex.join(["python", prov["script"], *prov.get("argv", [])])


def stale_reason(prov: dict, root: Path, results_dir: Optional[Path] = None) -> Optional[str]:
    """None if the recorded result still comes from the tree's script and its files are as recorded; else why not,
    with the command that regenerates it. `root` is the repository root that `prov["script"]` is relative to."""
    for key in ("script", "script_sha256", "outputs"):
        if key not in prov:
            raise ValueError(f"provenance must hold {key!r}, got the keys {sorted(prov)}")
    script = Path(root) / prov["script"]
    redo = f"regenerate it with: {regenerate_command(prov)}"
    if not script.is_file():
        return f"{prov['script']} is gone; remove its results or restore the script"
    if sha256_of(script) != prov["script_sha256"]:
        return (f"{', '.join(prov['outputs'])} recorded by another version of {prov['script']} "
                f"(sha256 {prov['script_sha256'][:12]}…, the tree's is {sha256_of(script)[:12]}…); {redo}")
    folder = Path(results_dir or RESULTS_DIR)
    for out, digest in prov["outputs"].items():
        if not (folder / out).is_file() or sha256_of(folder / out) != digest:
            return f"{out} is not the file {prov['script']} wrote (missing or edited by hand); {redo}"
    return None
