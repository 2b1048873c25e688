"""Chapter 10's helpers (book/chapters/ch10.py): the race read at equal seconds, the ladder's seed ranges and
verdicts, the needle finder with a window, the INT8 cache comparison."""
from __future__ import annotations

import pytest
import torch

from book.chapters import ch10


def test_curve_at_interpolates_steps_and_loss_and_clamps_at_the_ends():
    curve = [(20, 1.0, 3.0), (40, 3.0, 2.0), (60, 4.0, 1.5)]
    assert ch10.curve_at(curve, 2.0) == pytest.approx((30.0, 2.5))
    assert ch10.curve_at(curve, 4.0) == (60.0, 1.5)                 # the end of the run: exactly its last point
    assert ch10.curve_at(curve, 9.0) == (60.0, 1.5) and ch10.curve_at(curve, 0.5) == (20.0, 3.0)
    with pytest.raises(ValueError, match="at least one"):
        ch10.curve_at([], 1.0)


def test_seed_range_and_ladder_seconds_count_the_seeds_that_never_reached():
    assert ch10.seed_range([500, 540, 560]) == "533 (500–560)"
    assert ch10.seed_range([400, None, 380]) == "2 of 3 seeds"
    assert ch10.ladder_seconds({"steps": [100, None]}, 50.0) == [5.0, None]


def test_ladder_verdicts_judge_each_rung_against_the_one_before():
    best = {"chapter 7 recipe": {"steps": [500, 520, 540]}, "+ A": {"steps": [300, 310, 320]},
            "+ SwiGLU (8C/3 hidden)": {"steps": [None, 600, None]}, ch10.VARIANT: {"steps": [400, 410, 420]}}
    cost = {"chapter 7 recipe": 40.0, "+ A": 80.0, "+ SwiGLU (8C/3 hidden)": 50.0, ch10.VARIANT: 50.0}
    v = ch10.ladder_verdicts(best, cost)
    assert v["+ A"] == ("pays", "costs")                               # fewer steps, each twice the cost
    assert v["+ SwiGLU (8C/3 hidden)"] == ("costs", "costs")           # it lost seeds the rung before kept
    assert v[ch10.VARIANT] == ("pays", "pays")                         # against SwiGLU's rung, not the one above
    assert "chapter 7 recipe" not in v


def test_a_window_changes_no_parameter_and_a_far_needle_is_a_guess():
    finder = ch10.train_needle_finder(seq_len=16, steps=2)
    probe = ch10.with_window(finder, 4)
    assert probe.config.window == 4 and all(torch.equal(a, b) for a, b in
                                            zip(finder.state_dict().values(), probe.state_dict().values()))
    assert 0.0 <= ch10.needle_accuracy(probe, 12, 16, n=64) <= 1.0


def test_cache_comparison_reports_both_caches_against_the_full_pass():
    from book.gpt import GPT, GPTConfig
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, context_len=8, d_model=16, n_heads=2, n_layers=1)).eval()
    out = ch10.cache_comparison(model, torch.randint(0, 11, (1, 8)), to_bits=lambda nats: nats / 0.6931)
    assert out["float32"]["err"] < 1e-4 and out["int8"]["bytes"] < out["float32"]["bytes"]
    assert 0.0 <= out["int8"]["agree"] <= 1.0 and out["float32"]["bits"] > 0
