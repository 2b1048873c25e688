"""The benchmarks behind chapter 7: their harnesses run, and the recorded output that the chapter reads ships
with the package and says what the chapter says it does."""
import csv
import re
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_lstm_vs_gpt_quick_run_gives_both_equal_seconds():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "lstm_vs_gpt.py"), "--quick"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    fields = dict(kv.split("=") for kv in out.stdout.strip().splitlines()[-1].split())
    assert set(fields) == {"seconds", "gpt_bpc", "lstm_bpc", "gpt_steps", "lstm_steps"}
    assert int(fields["gpt_steps"]) == 6 and int(fields["lstm_steps"]) >= 1
    assert 0 < float(fields["gpt_bpc"]) < 8 and 0 < float(fields["lstm_bpc"]) < 8      # log2(65) = 6.0 at chance
    clocks = re.findall(r"\| LSTM step +\d+ val [\d.]+ \(LSTM clock ([\d.]+) s\)", out.stdout)
    starts = re.findall(r"^ +([\d.]+) s \|", out.stdout, flags=re.M)
    assert clocks and len(clocks) == len(starts)
    for lstm_clock, gpt_clock in zip(clocks, starts):          # the LSTM trains until it has caught up
        assert float(lstm_clock) >= float(gpt_clock) - 0.05


def test_recorded_lstm_vs_gpt_is_package_data_with_equal_seconds():
    with files("book").joinpath("results/lstm_vs_gpt.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["seconds", "gpt_steps", "gpt_bpc", "lstm_steps", "lstm_bpc"]
    secs = [float(r["seconds"]) for r in rows]
    assert secs == sorted(secs) and len(rows) >= 20
    assert int(rows[-1]["gpt_steps"]) == 1500                  # chapter 7's GPT recipe and schedule on the CPU


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
    assert "book/results/lstm_vs_gpt.csv" in names and "book/results/gpt_time_to_loss.txt" in names


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
    assert int(fields["rungs"]) == len(rungs) - 1
    # the seconds are printed to 0.01 s, and a quick run's are tiny: the ratio must lie within their rounding
    ratio, last, first = (float(fields[k]) for k in ("last_ratio", "last_s", "first_s"))
    assert (last - 0.005) / (first + 0.005) - 5e-4 <= ratio <= (last + 0.005) / max(first - 0.005, 1e-9) + 5e-4


