"""Test-wide setup: the corpus location for the unit tests and for nbval's notebook kernels, and the
glue-drift check on every notebook cell that nbval runs (see CONTRIBUTING.md, "Notebook checks")."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
_shared = ROOT.parent / "shared" / "data"
if "BOOK_DATA_DIR" not in os.environ and (_shared / "tinyshakespeare.txt").is_file():
    os.environ["BOOK_DATA_DIR"] = str(_shared)   # kernels started by nbval inherit it
os.environ.setdefault("BOOK_DEVICE", "cpu")      # compare against the committed CPU outputs
# idle OpenMP threads sleep instead of spinning: with two notebooks on two cores (xdist) or BOOK_THREADS=2,
# spinning threads steal the cores that the other kernel needs (a step measured 7x slower)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _drift_check_applies() -> bool:
    """Committed numbers come from full CPU runs: compare glue only against a run of the same kind."""
    return (os.environ.get("BOOK_DEVICE") == "cpu" and not os.environ.get("BOOK_MAX_STEPS")
            and os.environ.get("BOOK_SCALE", "cpu") == "cpu")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """After nbval runs a cell, every number it glued must match the committed one within its tolerance."""
    result = yield
    fresh = getattr(item, "test_outputs", None)
    cell = getattr(item, "cell", None)
    if fresh is not None and cell is not None and _drift_check_applies():
        sys.path.insert(0, str(ROOT / "tests"))
        from nbtools import glue_drift_report

        problems = glue_drift_report(Path(str(item.path)).stem, cell.get("outputs", []), fresh)
        if problems:
            raise AssertionError("glued numbers drifted from the committed notebook:\n  " + "\n  ".join(problems))
    return result
