"""The benchmarks behind chapter 4 (the sqrt(d_k) scale in training; recall by model): their harnesses run, and
the recorded tables the chapter reads have the fields, settings and seeds it says they have."""
import pytest
from nbtools import quick_benchmark

from book.results import provenance, read_rows


def test_attention_scale_quick_run_trains_both_settings():
    stdout, last = quick_benchmark("attention_scale.py")
    assert set(last) == {"scaled_lr", "scaled_loss", "unscaled_lr", "unscaled_loss", "scaled_first", "unscaled_first"}
    assert "  scaled   lr" in stdout and "  unscaled lr" in stdout
    for key in ("scaled_loss", "unscaled_loss"):
        assert 0 < float(last[key]) < 6                                  # ln(65) = 4.2 at chance


def test_recall_models_quick_run_trains_every_model():
    stdout, last = quick_benchmark("recall_models.py")
    assert set(last) == {f"{m}_{f}" for m in ("rnn", "lstm", "attention") for f in ("lr", "far")}
    assert all(0 <= float(last[f"{m}_far"]) <= 1 for m in ("rnn", "lstm", "attention"))


@pytest.mark.parametrize("name, settings", [("attention_scale", {"scaled"}), ("recall_models", {"model"})])
def test_recorded_chapter_4_results_have_three_seeds_for_every_setting_and_rate(name, settings):
    rows = read_rows(name)
    prov = provenance(name)
    assert len(prov["seeds"]) >= 3
    keys = settings | {"lr"}
    groups = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in sorted(keys)), set()).add(r["seed"])
    assert len(groups) >= 6 and all(len(seeds) >= 3 for seeds in groups.values())


def test_recorded_recall_has_every_model_at_every_distance():
    rows = read_rows("recall_models")
    assert {r["model"] for r in rows} == {"rnn", "lstm", "attention"}
    assert {int(r["k"]) for r in rows} == {0, 1, 2, 4, 8, 16, 32, 64, 128, 256}       # k = 0: validation
    assert provenance("recall_models")["args"]["steps"] == 800
