"""The benchmarks behind chapter 4 (the sqrt(d_k) scale in training; recall by model): their harnesses run, and
the recorded tables the chapter reads have the fields, settings and seeds it says they have."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _quick(script):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout, dict(kv.split("=") for kv in out.stdout.strip().splitlines()[-1].split())


def test_attention_scale_quick_run_trains_both_settings():
    stdout, last = _quick("attention_scale.py")
    assert set(last) == {"scaled_lr", "scaled_loss", "unscaled_lr", "unscaled_loss", "scaled_first", "unscaled_first"}
    assert "  scaled   lr" in stdout and "  unscaled lr" in stdout
    for key in ("scaled_loss", "unscaled_loss"):
        assert 0 < float(last[key]) < 6                                  # ln(65) = 4.2 at chance


def test_recall_models_quick_run_trains_every_model():
    stdout, last = _quick("recall_models.py")
    assert set(last) == {f"{m}_{f}" for m in ("rnn", "lstm", "attention") for f in ("lr", "far")}
    assert all(0 <= float(last[f"{m}_far"]) <= 1 for m in ("rnn", "lstm", "attention"))

