"""Chapter 9's recorded experiment: the three-families benchmark's harness runs (--quick) and writes nothing, and
its recorded result has the seeds, steps and models the chapter reads."""

import pytest
from nbtools import quick_benchmark

from book.results import left_plateau, provenance, read_rows


def test_three_families_quick_run_trains_every_family_and_both_translators():
    stdout, last = quick_benchmark("three_families.py")
    assert set(last) == {"guess", "t5_leaves", "fill_last", "encdec_exact", "gpt_exact"}
    assert 0 < float(last["guess"]) < 0.5 and len(last["t5_leaves"].split(",")) == 2
    assert all(0 <= float(kv.split(":")[1]) <= 1 for kv in last["fill_last"].split(","))
    assert "decoder-only    seed" in stdout and "wrote" not in stdout


def test_recorded_three_families_has_three_seeds_equal_tokens_and_t5_leaves_its_plateau():
    rows, prov = read_rows("three_families"), provenance("three_families")
    seeds, stop, end = prov["seeds"], prov["args"]["stop"], prov["args"]["steps"]
    assert len(seeds) >= 3 and stop < end
    curves = {}
    for r in rows:
        curves.setdefault((r["family"], int(r["seed"])), {})[int(r["step"])] = float(r["fill"])
    assert set(curves) == {(f, s) for f in ("BERT", "GPT", "T5") for s in seeds}
    for (family, seed), curve in curves.items():      # measured at the same steps; BERT and GPT up to --stop
        assert max(curve) == (end if family == "T5" else stop)
        assert [s for s in curve if s <= stop] == [s for s in curves[("T5", seed)] if s <= stop]
    guess = prov["guess"]
    assert all(curves[("T5", s)][500] < guess + 0.05 for s in seeds)          # the chapter's budget: the plateau
    assert sum(max(curves[("T5", s)].values()) > guess + 0.05 for s in seeds) >= 2   # later, most seeds past it
    tr = read_rows("three_families_translation")
    assert {(r["model"], int(r["seed"])) for r in tr} == {(m, s) for m in ("encoder-decoder", "decoder-only")
                                                           for s in seeds}
    params = {r["model"]: int(r["params"]) for r in tr}
    assert abs(params["decoder-only"] / params["encoder-decoder"] - 1) <= 0.05


def test_left_plateau_needs_two_evaluations_in_a_row_above_the_margin():
    curve = [(250, 0.14), (500, 0.20), (750, 0.15), (1000, 0.20), (1250, 0.21), (1500, 0.30)]
    assert left_plateau(curve, 0.14) == 1000                  # 500 alone is one noisy evaluation
    assert left_plateau(curve, 0.14, consecutive=1) == 500
    assert left_plateau(curve, 0.14, margin=0.2) is None
    assert left_plateau([], 0.14) is None
    with pytest.raises(ValueError, match="step order"):
        left_plateau([(500, 0.3), (250, 0.3)], 0.14)
    with pytest.raises(ValueError, match="consecutive"):
        left_plateau(curve, 0.14, consecutive=0)
