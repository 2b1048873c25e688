"""Chapter 5's recorded experiment: the copy-back benchmark's harness runs (--quick), and its result is package
data with the rows the chapter reads."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_copy_back_quick_run_trains_every_scheme_and_writes_nothing():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "copy_back.py"), "--quick"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert [kv.split("=")[0] for kv in last.split()] == ["sinusoidal", "learned", "rope", "alibi"]
    assert all(0.0 <= float(kv.split("=")[1]) <= 1.0 for kv in last.split())
    assert "wrote" not in out.stdout
