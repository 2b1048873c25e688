"""The multi-budget leaderboard's harness runs (--quick): every model of the book trains at two budgets with two
seeds, the count models are scored, the quoted-passage axis is measured, and nothing is written."""
from nbtools import quick_benchmark


def test_budget_leaderboard_quick_run_covers_every_model_and_writes_nothing():
    out, last = quick_benchmark("budget_leaderboard.py")
    assert list(last) == ["LSTM", "block_LM", "GPT", "RoPE_GPT", "modern_GPT", "kn", "quote_gpt_second"]
    assert all(0 < float(v) < 10 for v in last.values())
    assert 2.0 < float(last["kn"]) < 2.4          # the strongest count model, counted and scored for real
    assert out.count("quote:") == 5                # two seeds of the LSTM and of the GPT, and the count model
    assert "steps per CPU second" in out and "wrote" not in out
