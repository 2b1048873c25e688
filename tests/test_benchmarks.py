"""The benchmarks behind chapter 7: their harnesses run, and the recorded output that the chapter reads ships
with the package and says what the chapter says it does."""
import re
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_recorded_time_to_loss_has_the_fields_chapter_7_reads():
    text = files("book").joinpath("results/gpt_time_to_loss.txt").read_text()
    last = dict(kv.split("=") for kv in text.strip().splitlines()[-1].split())
    assert {"ratio", "course_s", "baseline_s", "baseline_final_val", "modern_ratio", "modern_s"} <= set(last)
    assert float(last["ratio"]) == pytest.approx(float(last["course_s"]) / float(last["baseline_s"]), abs=2e-3)
    assert re.search(r"^course recipe: time to val [\d.]+: [\d.]+ s \(at step \d+\)", text, flags=re.M)


def test_the_wheel_ships_the_recorded_results(tmp_path):
    """Colab installs the package from the repository: chapter 7's recorded benchmark output must be inside."""
    import zipfile

    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                          "--disable-pip-version-check", "-w", str(tmp_path), str(ROOT)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "book/results/budget_leaderboard.csv" in names and "book/results/gpt_time_to_loss.txt" in names


def test_modern_ladder_adds_one_change_per_rung():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import dataclasses

    from modern_ladder import ladder

    rungs = ladder(600)
    names = [f.name for f in dataclasses.fields(rungs[0]) if f.name != "name"]
    for before, after in zip(rungs[:-2], rungs[1:-1]):          # the ReLU^2 variant (last) is not a rung
        changed = [n for n in names if getattr(before, n) != getattr(after, n)]
        assert changed and ("optimizer" in changed or "schedule" in changed or len(changed) == 1), (after.name, changed)
    assert rungs[-1].activation == "relu2" and rungs[-1].norm == "rms"
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "modern_ladder.py"), "--quick"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    fields = dict(kv.split("=") for kv in out.stdout.strip().splitlines()[-1].split())
    assert int(fields["rungs"]) == len(rungs) - 1 and int(fields["runs"]) == len(rungs)   # --quick: 1 rate, 1 seed
    assert 0 < float(fields["first_steps"]) <= 12 and 0 < float(fields["last_steps"]) <= 12
    assert "cost chapter 7 recipe" in out.stdout and "best rate" in out.stdout
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "modern_ladder.py"), "--bracket", "--quick"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "wrote" not in out.stdout and ("bracketing 0 rungs" in out.stdout or "rate" in out.stdout.splitlines()[-1])




def test_course_ladder_adds_the_course_changes_one_at_a_time_and_its_report_reads_them(tmp_path):
    from nbtools import quick_benchmark

    from book.chapters.ch07 import check_and_glue_course_ladder

    stdout, last = quick_benchmark("course_ladder.py")
    assert len(last) == 5 and "wrote" not in stdout and all("@" in v for v in last.values())
    rungs = ["nanoGPT CPU recipe", "+ lr", "+ 2 layers", "+ batch 32", "+ 600-step"]
    steps = {"nanoGPT CPU recipe": [None] * 3, "+ lr": [900, 950, 1000], "+ 2 layers": [850, 1000, 1100],
             "+ batch 32": [500, 520, 540], "+ 600-step": [450, 480, 500]}
    (tmp_path / "course_ladder.csv").write_text("rung,seed,reached,steps,last_val\n" + "".join(
        f"{r},{s},{v is not None},{v or 2000},1.9\n" for r in rungs for s, v in enumerate(steps[r])))
    (tmp_path / "course_ladder_cost.csv").write_text("rung,ms_per_step\n" + "".join(
        f"{r},{ms}\n" for r, ms in zip(rungs, (60, 62, 33, 85, 85))))
    out = check_and_glue_course_ladder(tmp_path)
    assert out["+ 2 layers"] == ([850, 1000, 1100], 33.0)
    (tmp_path / "course_ladder_cost.csv").write_text("rung,ms_per_step\nnanoGPT CPU recipe,60\n")
    with pytest.raises(AssertionError, match="five rungs"):
        check_and_glue_course_ladder(tmp_path)
