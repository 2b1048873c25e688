"""The multi-budget leaderboard's table: seeds summarised as mean and min-max per budget, sweep rows left out, count
models shown with their counting time, the best model last; and the page the intro and recap include is the table
of the recorded result."""
import pytest

from book.results import budget_summary, budget_table

ROWS = [dict(model="LSTM", chapter=2, phase="final", budget_s="15", val_bpc="2.5"),
        dict(model="LSTM", chapter=2, phase="final", budget_s="15", val_bpc="2.6"),
        dict(model="LSTM", chapter=2, phase="final", budget_s="60", val_bpc="2.4"),
        dict(model="LSTM", chapter=2, phase="sweep", budget_s="60", val_bpc="9.0"),
        dict(model="GPT", chapter=7, phase="final", budget_s="60", val_bpc="2.3"),
        dict(model="GPT", chapter=7, phase="final", budget_s="15", val_bpc="2.7"),
        dict(model="KN", chapter=1, phase="count", budget_s="3.14", val_bpc="2.196")]


def test_summary_keeps_seeds_spread_and_drops_the_sweep():
    s = budget_summary(ROWS)
    assert s["LSTM"]["budgets"] == {15.0: (pytest.approx(2.55), 2.5, 2.6, 2), 60.0: (2.4, 2.4, 2.4, 1)}
    assert s["KN"] == {"chapter": 1, "count": True, "budgets": {3.14: (2.196, 2.196, 2.196, 1)}}
    assert not s["GPT"]["count"]


def test_table_has_a_column_per_budget_and_the_best_last():
    lines = budget_table(ROWS).splitlines()
    assert lines[0] == "| chapter | model | 15 s | 1 min |"
    assert [ln.split(" | ")[1] for ln in lines[2:]] == ["LSTM", "GPT", "KN, counted in 3.1 s"]
    assert "2.550 (2.500–2.600, 2 seeds)" in lines[2] and lines[4].endswith("| 2.196 | 2.196 |")


@pytest.mark.parametrize("rows, match", [
    ([dict(model="A", chapter=1, phase="final", budget_s="1")], "missing \\['val_bpc'\\]"),
    ([dict(model="A", chapter=1, phase="best", budget_s="1", val_bpc="2")], "phase must be"),
    ([dict(model="KN", chapter=1, phase="count", budget_s="1", val_bpc="2")], "no trained model"),
])
def test_bad_rows_say_what_was_expected(rows, match):
    with pytest.raises(ValueError, match=match):
        budget_table(rows)


def test_leaderboard_bpc_reads_the_executors_record(tmp_path):
    import json

    from book.chapters.ch07 import leaderboard_bpc

    record = tmp_path / "runtimes.json"
    lstm = {"name": "char LSTM (128 units)", "val_bpc": 2.486}
    record.write_text(json.dumps({"02_rnn_limits": {"leaderboard": [lstm]}, "03_x": {}}))
    assert leaderboard_bpc("char LSTM", record) == 2.486
    assert leaderboard_bpc("GPT", record) is None
    assert leaderboard_bpc("char LSTM", tmp_path / "absent.json") is None      # Colab: no executor record
    with pytest.raises(ValueError, match="non-empty string"):
        leaderboard_bpc("", record)


def test_the_pages_include_the_table_of_the_recorded_result_and_its_prose_holds():
    """intro.md and recap.md include _generated/budget_leaderboard.md and say, in words, what it shows: the LSTM
    leads at the short budgets, the modern GPT is the best neural model at the largest, none reaches Kneser-Ney."""
    from pathlib import Path

    from book.results import read_rows

    chapters = Path(__file__).resolve().parent.parent / "chapters"
    rows = read_rows("budget_leaderboard")
    assert (chapters / "_generated" / "budget_leaderboard.md").read_text() == budget_table(rows)
    for page in ("intro.md", "recap.md"):
        assert "{include} _generated/budget_leaderboard.md" in (chapters / page).read_text()
    s = budget_summary(rows)
    neural = {m: v["budgets"] for m, v in s.items() if not v["count"]}
    budgets = sorted(next(iter(neural.values())))
    assert len(budgets) >= 3 and all(v[b][3] >= 3 for v in neural.values() for b in budgets)   # >= 3 seeds
    lstm = next(m for m in neural if m.startswith("LSTM"))
    for b in budgets[:2]:
        assert all(neural[lstm][b][2] < v[b][1] for m, v in neural.items() if m != lstm)
    assert min(neural, key=lambda m: neural[m][budgets[-1]][0]).startswith("modern GPT")
    kn = next(v for m, v in s.items() if m.startswith("Kneser-Ney"))
    assert all(v[b][1] > next(iter(kn["budgets"].values()))[0] for v in neural.values() for b in budgets)


def test_the_scaling_table_on_both_pages_is_the_recorded_one():
    """chapters/_generated/scaling_leaderboard.md is budget_table(scaling_rows()): the two models of Chapter 10's
    scaling study at the fit's budgets and the long ones, >= 3 seeds each, with the count models; intro and recap
    include it."""
    from pathlib import Path

    from book.results import scaling_rows

    chapters = Path(__file__).resolve().parent.parent / "chapters"
    rows = scaling_rows()
    assert rows, "the long runs (book/results/scaling_long_*.csv) are not recorded"
    assert (chapters / "_generated" / "scaling_leaderboard.md").read_text() == budget_table(rows)
    for page in ("intro.md", "recap.md"):
        assert "{include} _generated/scaling_leaderboard.md" in (chapters / page).read_text()
    s = budget_summary(rows)
    trained = {m: v["budgets"] for m, v in s.items() if not v["count"]}
    assert sorted(trained) == ["LSTM (ch. 2)", "modern GPT (ch. 10)"]
    assert all(len(v) >= 4 and all(b[3] >= 3 for b in v.values()) for v in trained.values())
    assert max(next(iter(trained.values()))) >= 1440                              # the long runs are in it
    gpt = trained["modern GPT (ch. 10)"]                   # the pages' words: trained longer, the GPT gets worse
    assert gpt[max(gpt)][1] > gpt[480.0][2] and "gets worse" in (chapters / "intro.md").read_text()
