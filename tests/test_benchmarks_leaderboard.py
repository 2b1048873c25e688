"""The multi-budget leaderboard's harness runs (--quick): every model of the book trains at two budgets with two
seeds, the count models are scored, the quoted-passage axis is measured, and nothing is written."""
from nbtools import quick_benchmark
import numpy as np
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_budget_leaderboard_quick_run_covers_every_model_and_writes_nothing():
    out, last = quick_benchmark("budget_leaderboard.py")
    assert list(last) == ["LSTM", "block_LM", "GPT", "RoPE_GPT", "modern_GPT", "kn", "quote_gpt_second"]
    assert all(0 < float(v) < 10 for v in last.values())
    assert 2.0 < float(last["kn"]) < 2.4          # the strongest count model, counted and scored for real
    assert out.count("quote:") == 5                # two seeds of the LSTM and of the GPT, and the count model
    assert "steps per CPU second" in out and "wrote" not in out


def test_scaling_crossing_quick_run_fits_predicts_and_runs_long_and_writes_nothing():
    stdout, last = quick_benchmark("scaling_crossing.py")
    assert set(last) == {"modern_GPT@0.5", "LSTM@0.5"} and all(2 < float(v) < 7 for v in last.values())
    assert "passes Kneser-Ney" in stdout and "lead beyond the spread" in stdout and "wrote" not in stdout


def test_scaling_fit_recovers_a_known_curve_and_its_crossing():
    import sys
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from scaling_crossing import crossing, fit_curve
    c = np.geomspace(15, 480, 6)
    L_inf, A, alpha = fit_curve(c, 2.0 + 3.0 * c ** -0.5)
    assert abs(L_inf - 2.0) < 0.02 and abs(alpha - 0.5) < 0.03
    assert abs(crossing((2.0, 3.0, 0.5), 2.1) - 900) < 1e-6       # 3 / sqrt(900) = 0.1
    assert crossing((2.2, 3.0, 0.5), 2.1) == float("inf")        # a floor above the line: never


def test_recorded_scaling_prediction_predates_any_long_run_and_reads_back():
    from book import plots
    from book.chapters import ch10
    from book.results import provenance, read_rows
    fit, pred = provenance("scaling_fit"), provenance("scaling_prediction")
    assert len(fit["seeds"]) >= 3 and fit["date"] < pred["date"] and not pred["git_dirty"]
    budgets = {(r["model"], float(r["budget_s"])) for r in read_rows("scaling_fit")}
    assert {b for _, b in budgets} == set(fit["args"]["fit_budgets"])
    S = ch10.scaling_record()
    assert all(len(v) >= 3 for m in S["points"] for v in S["points"][m].values())
    assert all(len(S["points"][m]) == 6 for m in S["points"])   # 3 budgets of the leaderboard, 3 of the fit
    if S["long"] is not None:                                                # the long runs came after the prediction
        assert all(p["date"] > pred["date"] and len(p["seeds"]) >= 3 for p in S["long_prov"])
    for m in ch10.SCALING_MODELS:
        L, A, alpha = S["fits"]["cpu_s"][m]
        est, lo, hi = S["pred"][("L_inf", m, "cpu_s")]
        assert lo <= L <= hi and A > 0 and alpha > 0
    fig = ch10.check_and_glue_scaling(S, plots)
    assert "predicted crossing" in plots.alt_text(fig) or "Kneser-Ney" in plots.alt_text(fig)
