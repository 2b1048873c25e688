"""book.results.ladder_best and range_verdict: how chapter 10 reads its rate-swept, seeded ladder."""
import pytest

from book.results import ladder_best
from book.chapters.ch10 import range_verdict


def _rows(rung, rate, steps, reached=(True, True, True), last=(1.88, 1.88, 1.88)):
    return [dict(rung=rung, rate=str(rate), seed=str(1337 + i), reached=str(ok), steps=str(s), last_val=str(v))
            for i, (s, ok, v) in enumerate(zip(steps, reached, last))]


def test_ladder_best_prefers_seeds_at_the_target_then_fewer_steps_then_lower_loss():
    rows = (_rows("a", 0.004, [500, 520, 540]) + _rows("a", 0.008, [400, 420, 600], (True, True, False),
                                                         (1.88, 1.88, 1.95))
            + _rows("a", 0.016, [450, 460, 470])
            + _rows("b", 0.004, [600] * 3, (False,) * 3, (1.95, 1.96, 1.97))
            + _rows("b", 0.008, [600] * 3, (False,) * 3, (1.91, 1.92, 1.93))
            + _rows("b", 0.016, [150] * 3, (False,) * 3, ("nan",) * 3))
    best = ladder_best(rows)
    assert list(best) == ["a", "b"]
    assert best["a"]["rate"] == 0.016 and best["a"]["steps"] == [450, 460, 470] and best["a"]["edge"]
    assert best["a"]["by_rate"][0.008] == (2, 410, pytest.approx((1.88 * 2 + 1.95) / 3))
    assert best["b"]["rate"] == 0.008 and best["b"]["reached"] == 0 and best["b"]["steps"] == [None] * 3
    assert not best["b"]["edge"]                     # the middle rate: a sweep that brackets the best
    with pytest.raises(ValueError, match="missing"):
        ladder_best([dict(rung="a", rate="1")])
    with pytest.raises(ValueError, match="reached must be True or False"):
        ladder_best(_rows("a", 0.004, [1, 2, 3], ("yes",) * 3))


def test_range_verdict_calls_a_difference_only_beyond_the_spread():
    assert range_verdict([200, 210, 220], [300, 310, 320]) == "pays"
    assert range_verdict([300, 310, 320], [200, 210, 220]) == "costs"
    assert range_verdict([200, 310, 220], [300, 210, 320]) == "within the spread"
    assert range_verdict([200, 210, 220], [300, None, 320]) == "pays"       # only the new one always gets there
    assert range_verdict([200, None, 220], [300, 310, 320]) == "costs"
    assert range_verdict([None, 200, 220], [300, None, 320]) == "within the spread"
    with pytest.raises(ValueError, match="at least one seed"):
        range_verdict([], [1])


def test_the_bracketing_glue_counts_the_added_rates_and_the_edges_left():
    from book.chapters.ch10 import glue_bracketing

    rows = [dict(rung="a", rate=r) for r in ("0.004", "0.008", "0.016", "0.002", "0.002", "0.001")]
    from book.utils import GLUED

    assert glue_bracketing(rows, {"a": {"edge": False}, "b": {"edge": True}}) == 1
    assert GLUED["ch10_lad_bracket"]["value"] == "AdamW: 2 runs at 0.002, then 1 run at 0.001"
    assert GLUED["ch10_lad_edge_words"]["value"].startswith("In 1 of the 2 configurations the best rate is still")
    assert glue_bracketing(rows[:3], {"a": {"edge": False}}) == 0
    assert GLUED["ch10_lad_bracket"]["value"] == "none was needed"
    assert GLUED["ch10_lad_edge_words"]["value"].startswith("Every rung's best rate now has")


def test_ladder_machines_names_where_each_part_was_recorded():
    from book.chapters.ch10 import ladder_machines

    first = dict(cpu="Intel(R) Xeon(R)", cpu_cores=2, date="2026-12-03T21:49:46+00:00")
    added = dict(cpu="AMD EPYC", cpu_cores=2, date="2026-12-05T14:21:00+00:00", earlier=first)
    again = dict(cpu="AMD EPYC", cpu_cores=2, date="2026-12-05T14:57:00+00:00", earlier=added)
    assert ladder_machines(first) == "Intel Xeon with 2 cores, on 2026-12-03 (its first runs, and the cost per step)"
    assert ladder_machines(again) == ("Intel Xeon with 2 cores, on 2026-12-03 (its first runs, and the cost per step), "
                                      "and AMD EPYC with 2 cores, on 2026-12-05 (the runs it added)")
