"""tools/busy_core.sh: the notebook checks under a busy core; the busy loop is stopped however the run ends."""
import os
import subprocess
import sys

import nbformat
import pytest

from nbtools import ROOT


def run_busy_core(*args, env=None):
    env = {**os.environ, "BOOK_PYTHON": sys.executable, **(env or {})}
    return subprocess.run(["bash", str(ROOT / "tools" / "busy_core.sh"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def busy_pid(out: str) -> int:
    line = next(l for l in out.splitlines() if "busy loop pid" in l)
    return int(line.split("busy loop pid ")[1].split()[0].rstrip(";"))


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow
def test_runs_nbval_beside_a_busy_loop_and_stops_it(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "print(6 * 7)", execution_count=1, outputs=[nbformat.v4.new_output("stream", name="stdout", text="42\n")])])
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, str(path))
    done = run_busy_core(str(path), "--", "-c", str(ROOT / "pyproject.toml"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout and "busy loop" in done.stdout and "stopped" in done.stdout
    assert gone(busy_pid(done.stdout))


def test_a_failing_run_still_stops_the_busy_loop(tmp_path):
    done = run_busy_core(str(tmp_path / "missing.ipynb"))
    assert done.returncode != 0
    assert "stopped" in done.stdout and gone(busy_pid(done.stdout))
