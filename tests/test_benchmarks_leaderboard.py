"""The multi-budget leaderboard's harness runs (--quick): every model of the book trains at two budgets with two
seeds, the count models are scored, the quoted-passage axis is measured, and nothing is written."""
import pytest
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
        out = ch10.check_and_glue_scaling_long(S)
        assert out["answer"] in ch10.SCALING_CHOICES
        gap = ch10.check_and_glue_scaling_gap(S)          # the retrained runs reproduce the recorded ones (claimed)
        assert gap["overfit"] == out["worse"] == (out["answer"] == ch10.SCALING_CHOICES[2])
    for m in ch10.SCALING_MODELS:
        L, A, alpha = S["fits"]["cpu_s"][m]
        est, lo, hi = S["pred"][("L_inf", m, "cpu_s")]
        assert lo <= L <= hi and A > 0 and alpha > 0
    gpu = ch10.gpu_recipe_on_the_fit(S, 65)          # nanoGPT's GPU recipe: 6 x 384, 5,000 steps of 64 x 256
    assert 1e15 < gpu["flops"] < 1e16 and gpu["reported"] < gpu["fit"] < S["pred"][("L_inf", ch10.SCALING_MODELS[0],
                                                                                     "cpu_s")][2] + 0.01
    fig = ch10.check_and_glue_scaling(S, plots)
    assert "predicted crossing" in plots.alt_text(fig) or "Kneser-Ney" in plots.alt_text(fig)


def _scaling_S(long_gpt, long_lstm):
    """A made-up scaling record: the fits of the recorded prediction's shape, short points, and given long runs."""
    gpt, lstm = "modern GPT (ch. 10)", "LSTM (ch. 2)"
    fits = {"cpu_s": {gpt: (2.155, 2.94, 0.586), lstm: (2.258, 1.878, 0.708)}}
    pred = {("passes Kneser-Ney", gpt, "cpu_s"): (1427.0, 980.0, 3936.0)}
    points = {gpt: {480.0: [2.24, 2.245, 2.25]}, lstm: {480.0: [2.28, 2.283, 2.286]}}
    return dict(fits=fits, kn=2.1965, spread=0.0287, pred=pred, points=points,
                long={gpt: long_gpt, lstm: long_lstm}, long_cpu_s=6 * 1440.0, fit_cpu_s=3600.0)


def test_the_long_runs_are_scored_in_sentences_built_from_their_numbers():
    from book.chapters import ch10
    gpt = "modern GPT (ch. 10)"
    S = _scaling_S({1440.0: [2.19, 2.192, 2.194]}, {1440.0: [2.265, 2.27, 2.272]})
    out = ch10.check_and_glue_scaling_long(S)
    assert out["answer"] == ch10.SCALING_CHOICES[0] and out["crossing"] == (480.0, 1440.0) and not out["worse"]
    assert abs(out["miss"][(gpt, 1440.0)] - (2.192 - (2.155 + 2.94 * 1440 ** -0.586))) < 1e-9
    # closer than the 8-minute runs, still above the line: the second choice, no crossing
    S = _scaling_S({1440.0: [2.20, 2.201, 2.202]}, {1440.0: [2.265, 2.27, 2.272]})
    out = ch10.check_and_glue_scaling_long(S)
    assert out["answer"] == ch10.SCALING_CHOICES[1] and out["crossing"] is None
    # worse than the 8-minute runs: the third choice, the prediction failed, the LSTM ahead
    S = _scaling_S({1440.0: [2.34, 2.35, 2.36]}, {1440.0: [2.27, 2.27, 2.28]})
    out = ch10.check_and_glue_scaling_long(S)
    assert out["answer"] == ch10.SCALING_CHOICES[2] and out["worse"]
    assert out["beyond"] is None
    # a run beyond the predicted budget: worse still, on every seed
    S = _scaling_S({1440.0: [2.34, 2.35, 2.36], 2160.0: [2.38, 2.39, 2.40]},
                   {1440.0: [2.27, 2.27, 2.28], 2160.0: [2.27, 2.275, 2.28]})
    out = ch10.check_and_glue_scaling_long(S)
    assert out["answer"] == ch10.SCALING_CHOICES[2] and out["beyond"] == (
        "Trained further, for 36 CPU-minutes, it scores 2.390 (seeds 2.380–2.400): worse still than at 24 minutes on "
        "every seed")
    assert out["lstm"].startswith("The LSTM ends at 2.275 (seeds 2.270–2.280) after 36 minutes (2.273 at 24 "
                                  "minutes; the seeds overlap), above the line")
    S = _scaling_S({1440.0: [2.34, 2.35, 2.36], 2160.0: [2.38, 2.39, 2.40]},
                   {1440.0: [2.27, 2.27, 2.28], 2160.0: [2.29, 2.295, 2.30]})
    assert "(2.273 at 24 minutes; every seed higher)" in ch10.check_and_glue_scaling_long(S)["lstm"]
    assert "after 24 minutes, above" in ch10.check_and_glue_scaling_long(
        _scaling_S({1440.0: [2.34, 2.35, 2.36]}, {1440.0: [2.27, 2.27, 2.28]}))["lstm"]
    S2 = _scaling_S({1440.0: [2.20, 2.201, 2.202], 2160.0: [2.18, 2.185, 2.19]}, {1440.0: [2.27, 2.27, 2.28]})
    assert ch10.check_and_glue_scaling_long(S2)["beyond"].endswith("better than at 24 minutes on every seed, and "
                                                                   "below the 7-gram's 2.196")   # the line crossed
    assert ch10.scaling_question(S) == ("The fit says the modern GPT passes the 7-gram after about 24 CPU-minutes. "
                                        "What do its 24-minute runs show?")
    with pytest.raises(ValueError, match="no long runs recorded"):
        ch10.check_and_glue_scaling_long(dict(S, long=None))
    assert ch10._sci(5.31e15) == "5.3 × 10¹⁵" and ch10._sci(6.1e-3) == "6.1 × 10⁻³"
