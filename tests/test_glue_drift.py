"""The glue-drift check (conftest.py runs it on every nbval cell): it must catch drift and allow declared noise."""
import pytest

from nbtools import glue_drift, glue_drift_report


def out(name, text, spec):
    meta = {"scrapbook": {"name": name, "mime_prefix": "application/papermill.record/"}}
    if spec is not None:
        meta["book_tolerance"] = spec
    return {"output_type": "display_data", "metadata": meta,
            "data": {"application/papermill.record/text/plain": text}}


@pytest.mark.parametrize("committed, fresh, spec", [
    ("'2.574'", "'2.574'", {}),
    ("'2.485'", "'2.512'", {"tol": 0.05}),
    ("'92%'", "'89%'", {"tol": 5}),
    ("'1,380'", "'1,402'", {"rel": 0.02}),
    ("'7.3'", "'3.1'", {"factor": 3}),
    ("'layer 2, head 3'", "'layer 1, head 0'", {"any": True}),
])
def test_values_within_their_tolerance_pass(committed, fresh, spec):
    assert glue_drift("x", committed, fresh, spec) is None


@pytest.mark.parametrize("committed, fresh, spec, why", [
    ("'2.574'", "'2.575'", {}, "exact value expected"),
    ("'2.485'", "'2.6'", {"tol": 0.05}, "outside"),
    ("'1,380'", "'1,500'", {"rel": 0.02}, "outside"),
    ("'7.3'", "'2.0'", {"factor": 3}, "outside"),
    ("'7.3 s'", "'7.3 ms'", {"factor": 3}, "text around the numbers differs"),
    ("'2.5'", "'2.5'", None, "without a declared tolerance"),
])
def test_drift_is_reported(committed, fresh, spec, why):
    assert why in glue_drift("x", committed, fresh, spec)


def test_report_names_chapter_glue_and_both_values():
    committed = [out("ch2_lstm_bpc", "'2.485'", {"tol": 0.03}), out("ch2_gone", "'1'", {})]
    fresh = [out("ch2_lstm_bpc", "'2.601'", {"tol": 0.03}), out("ch2_new", "'1'", {}),
             {"output_type": "stream", "name": "stdout", "text": "hello"}]
    lines = glue_drift_report("02_rnn_limits", committed, fresh)
    assert any("02_rnn_limits" in l and "ch2_lstm_bpc" in l and "2.485" in l and "2.601" in l for l in lines)
    assert any("ch2_gone" in l and "not glued" in l for l in lines)
    assert any("ch2_new" in l and "new in the fresh run" in l for l in lines)
    assert glue_drift_report("02", committed[:1], committed[:1]) == []


# ---- timings: shown, never compared (CONTRIBUTING.md, "Timings") -------------------------------
def test_a_timing_glue_is_never_compared():
    assert glue_drift("x", "'2.3'", "'8.7'", {"timing": True}) is None
    assert glue_drift("x", "'2.3 ms'", "'1.1 s'", {"timing": True}) is None
    committed = [out("ch7_kv_s", "'2.3'", {"factor": 3.0})]        # committed before it was declared a timing
    assert glue_drift_report("07", committed, [out("ch7_kv_s", "'8.7'", {"timing": True})]) == []
    assert glue_drift_report("07", committed, [out("ch7_kv_s", "'8.7'", {"factor": 3.0})])   # still caught
    assert "not glued" in glue_drift_report("07", [out("ch7_kv_s", "'2.3'", {"timing": True})], [])[0]


def test_glue_declares_a_timing_and_refuses_a_tolerance_beside_it():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from book import glue

    InteractiveShell.instance()
    with capture_output() as cap:
        glue("ch0_step_ms", "12", timing=True)
    assert cap.outputs[0].metadata["book_tolerance"] == {"timing": True}
    with pytest.raises(ValueError, match="timing=True alone"):
        glue("ch0_step_ms", "12", timing=True, factor=3)
    with pytest.raises(ValueError, match="timing must be True or False"):
        glue("ch0_step_ms", "12", timing="yes")


def test_the_rendered_prose_shows_a_timing_glue():
    import nbformat

    from nbtools import ROOT  # noqa: F401  (tools/ on the path)
    import render

    cell = nbformat.from_dict(out("ch0_step_ms", "'12'", {"timing": True}))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[cell])])
    assert render.render_glue("took {glue:text}`ch0_step_ms` ms", render.glue_values(nb)) == "took 12 ms"


@pytest.mark.parametrize("source", [
    'claim(attn_doubling > 2.8, f"doubling T should about quadruple attention\'s time: x{attn_doubling:.1f}")',
    'claim(t["s"] < 120, "seconds, not minutes")',
    "assert loop_s[-1] > 2 * loop_s[0]",
    'claim(reuse > 1.05, f"reusing the encoder\'s memory saves time: {reuse:.2f}x")',
    "claim(speedup >= 5,\n      'one pass is cheaper')",
    'glue("ch4_half_time", f"{half_s / full_s:.2f}", factor=2)',
    'glue("ch5_train_s", f"{t_all[\'s\']:.0f}", factor=4)',
])
def test_a_check_on_seconds_is_found(source):
    from nbtools import timing_checks

    assert timing_checks("x = 1\n" + source) == [source.splitlines()[0]]


@pytest.mark.parametrize("source", [
    'claim(flops[-1] == 4 * flops[-2], f"doubling T quadruples the FLOPs (time on this machine x{r:.1f})")',
    "assert positions[256][0] > 100 * positions[256][1]",
    'glue("ch4_half_time", f"{half_s / full_s:.2f}", timing=True)',
    'glue("ch7_bench_course_s", f"{float(last[\'course_s\']):.0f}")',      # a recorded number, exact
    "assert context.shape == (B, S)",
    "assert wsd == [lr_at(s) for s in range(steps)]",
    "assert hist.train_seconds < chapter_s   # holds on any machine: the timed part of the whole",
    "%matplotlib inline\nclaim(acc > 0.9, f'accuracy {acc}')",
])
def test_counts_and_declared_timings_pass(source):
    from nbtools import timing_checks

    assert timing_checks(source) == []


def test_a_tolerance_from_a_spread_is_the_committed_runs_never_one_widened_by_the_fresh_value():
    """The fresh run counts itself as a seed when it glues: an outlier would widen its own tolerance."""
    spread = {"source": "book/results/glue_spread.csv", "seeds": 4, "margin": 2.0}
    committed = [out("ch2_x", "'90%'", {"tol": 10.0, "spread": {**spread, "width": 5.0}})]
    outlier = [out("ch2_x", "'40%'", {"tol": 100.0, "spread": {**spread, "width": 50.0}})]
    near = [out("ch2_x", "'82%'", {"tol": 24.0, "spread": {**spread, "width": 12.0}})]
    assert "outside" in glue_drift_report("02", committed, outlier)[0]
    assert glue_drift_report("02", committed, near) == []
