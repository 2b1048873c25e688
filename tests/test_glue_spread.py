"""Every glued number that depends on training or sampling takes its tolerance from its spread across seeds.

A number a trained model produces moves on a machine that rounds differently about as far as it moves between
seeds, so a tolerance chosen by hand breaks CI on the next machine. book.glue(..., spread=, margin=) derives the
tolerance from the spread (recorded by benchmarks/glue_spread.py, or measured over seeds in the chapter); this
test holds every committed notebook to it (CONTRIBUTING.md, "Notebook checks").
"""
import csv

import nbformat
import pytest
from nbtools import chapter_paths, glue_drift, spread_problems

from book.utils import RESULTS_DIR, _check_tolerance, _display_unit, glued_numbers, seed_spread


def recorded_spread() -> dict:
    with open(RESULTS_DIR / "glue_spread.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    out = {}
    for r in rows:
        out.setdefault(r["name"], []).append(r["value"])
    return out


@pytest.mark.parametrize("path", chapter_paths(), ids=lambda p: p.stem)
def test_every_tolerance_of_a_trained_number_comes_from_its_spread(path):
    nb = nbformat.read(path, as_version=4)
    recorded = recorded_spread()
    problems = [p for cell in nb.cells if cell.cell_type == "code"
                for p in spread_problems(path.stem, cell.get("outputs", []), recorded,
                                         "nbval-ignore-output" not in cell.metadata.get("tags", []))]
    assert not problems, "\n".join(problems)


def test_the_recorded_spread_covers_every_chapter():
    names = {r for r in recorded_spread()}
    for path in chapter_paths():
        assert any(n.startswith(path.stem[:2].lstrip("0").join(("ch", "_"))) for n in names), path.stem


def _output(name, text, spec):
    return {"output_type": "display_data", "data": {"application/papermill.record/text/plain": text},
            "metadata": {"scrapbook": {"name": name}, "book_tolerance": spec}}


def test_the_rule_catches_a_hand_picked_or_too_narrow_tolerance():
    recorded = {"x": ["77%", "100%"], "y": ["2.31", "2.35"], "z": ["4", "5"]}
    spread = {"source": "book/results/glue_spread.csv", "seeds": 3, "width": 23.0, "margin": 2.0}
    outputs = [_output("x", "100%", {"tol": 10.0}),                        # no spread declared
               _output("y", "2.33", {"tol": 0.01, "spread": {**spread, "width": 0.04}}),   # narrower than 2 x 0.04
               _output("z", "4", {}),                                       # exact, but moves between seeds
               _output("w", "1.0", {"tol": 0.1, "spread": {**spread, "seeds": 2}})]
    problems = spread_problems("chX", outputs, recorded)
    assert len(problems) == 4, problems
    assert "declares no spread" in problems[0] and "narrower" in problems[1] and "exactly" in problems[2]
    assert "at least 3 seeds" in problems[3]
    ok = [_output("x", "100%", {"tol": 46.0, "spread": spread}), _output("t", "3.1 s", {"timing": True})]
    assert spread_problems("chX", ok, recorded) == []
    assert spread_problems("chX", [_output("z", "4", {})], recorded, compared_exactly=True) == []   # nbval: same


def test_seed_spread_from_a_recorded_table_and_from_measured_values(tmp_path):
    (tmp_path / "glue_spread.csv").write_text("chapter,seed_shift,name,value,errored_cells\n"
                                              "c,1000,a,77%,0\nc,2000,a,90%,0\nc,1000,b,x 1,0\nc,2000,b,y 2,0\n")
    got = seed_spread("a", "100%", "glue_spread", 2, tmp_path)
    assert got["seeds"] == 3 and got["width"] == 23 and "error" not in got
    assert "different shapes" in seed_spread("b", "x 3", "glue_spread", 2, tmp_path)["error"]
    assert "at least 3" in seed_spread("c", "1", "glue_spread", 2, tmp_path)["error"]
    assert seed_spread("m", "0.5", [0.4, 0.5, 0.7], 1.5)["width"] == pytest.approx(0.3)
    assert "no recorded seed spread" in seed_spread("a", "1", "nope", 2, tmp_path)["error"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(spread="glue_spread"), "spread and margin go together"),
    (dict(spread="glue_spread", margin=0.5), "margin must be a number >= 1"),
    (dict(spread=[1.0, 2.0], margin=2), ">= 3 finite values"),
    (dict(spread=[1.0, float("nan"), 2.0], margin=2), ">= 3 finite values"),
    (dict(spread="../etc", margin=2), "name a recorded table"),
    (dict(spread=object(), margin=2), "name a recorded table"),
    (dict(timing=True, spread="glue_spread", margin=2), "never compared"),
    (dict(tol="any", spread="glue_spread", margin=2), "takes no spread"),
])
def test_a_bad_spread_declaration_is_refused_with_a_clear_message(kwargs, message):
    args = {k: kwargs.pop(k, None) for k in ("tol", "rel", "factor")}
    with pytest.raises(ValueError, match=message):
        _check_tolerance(args["tol"], args["rel"], args["factor"], kwargs.pop("timing", False), **kwargs)


def test_the_display_unit_and_numbers():
    assert _display_unit("2.31 bits") == pytest.approx(0.01) and _display_unit("87%") == 1
    assert _display_unit("1,024 and 0.5") == 1 and _display_unit("no number") == 0
    assert glued_numbers("77%–100%") == ("#%–#%", [77.0, 100.0])


def test_the_spread_harness_runs_with_shifted_seeds():
    """--quick: a small notebook twice, every seed shifted (a generator's draw differs between shifts)."""
    from nbtools import quick_benchmark

    stdout, fields = quick_benchmark("glue_spread.py")
    assert fields == {"chapters": "1", "runs": "2", "glues": "2", "errored_cells": "0", "failed_runs": "0"}, stdout


def test_other_seeds_quotes_what_the_recorded_runs_glued(tmp_path, monkeypatch):
    import book.utils as utils

    (tmp_path / "glue_spread.csv").write_text("chapter,seed_shift,name,value,errored_cells\n"
                                              "c,1000,a,'14%',0\nc,2000,a,'9%',0\nc,3000,a,'11%',0\nc,1000,b,3,0\n")
    monkeypatch.setattr(utils, "RESULTS_DIR", tmp_path)
    assert utils.other_seeds("a") == "14%, 9% and 11%" and utils.other_seeds("b") == "3"
    with pytest.raises(ValueError, match="no recorded runs with other seeds for 'zz'"):
        utils.other_seeds("zz")


def test_a_range_and_a_number_shown_once_have_one_shape():
    """value_range shows '4.87' where every seed gave 4.87: the drift and spread checks compare it with '4.86–4.87'
    end by end (glued_spans), so collapsing an equal-ended range never breaks them."""
    from book.results import value_range
    from book.utils import glued_spans

    assert glued_spans("4.87") == glued_spans("4.87–4.87") == ("#", [(4.87, 4.87)])
    assert glued_spans("0.99 (0.98–1.00)") == ("# (#)", [(0.99, 0.99), (0.98, 1.0)])
    assert glued_spans("9% to 14% of them") == ("#% of them", [(9.0, 14.0)])
    assert value_range(0.114, 0.116, "{:.0%}", " to ") == "11% to 12%"
    assert value_range(0.1141, 0.1149, "{:.0%}") == "11%"
    spec = {"tol": 0.02}
    assert glue_drift("x", "4.87", "4.86–4.88", spec) is None
    assert glue_drift("x", "4.87", "4.80–4.88", spec) is not None
