"""The linter's set-up: ruff pinned in requirements.txt, run first by tools/test.sh, and pyproject.toml's rules
(notebooks linted, with their own few exceptions)."""
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from nbtools import ROOT



def ruff(filename: str, text: str) -> str:
    """ruff's findings for `text` as if it were the repository's file `filename` (repository config applies)."""
    beside = Path(sys.executable).parent / "ruff"          # the venv's, also when the venv is not activated
    exe = str(beside) if beside.is_file() else shutil.which("ruff")
    if exe is None:
        pytest.skip("ruff is not installed (pip install -r requirements.txt)")
    out = subprocess.run([exe, "check", "--output-format", "concise", "--stdin-filename", filename, "-"],
                         input=text, capture_output=True, text=True, cwd=ROOT)
    return out.stdout


def test_ruff_is_pinned_and_run_before_the_tests():
    assert any(line.startswith("ruff==") for line in (ROOT / "requirements.txt").read_text().splitlines())
    script = (ROOT / "tools" / "test.sh").read_text()
    assert script.index("ruff check") < script.index("--durations=15")


def test_a_module_is_held_to_the_rules():
    found = ruff("book/zz_example.py", "x = 1\nimport os\n" + "y = '" + "a" * 120 + "'\n")
    assert "E402" in found and "F401" in found and "E501" in found


def test_a_notebook_may_import_where_a_section_needs_it_but_not_import_in_vain():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"),
                                         nbformat.v4.new_code_cell("import math\nimport os\nprint(math.pi, x)")])
    found = ruff("chapters/zz_example.ipynb", nbformat.writes(nb))
    assert "E402" not in found and "F401" in found and "`os`" in found
