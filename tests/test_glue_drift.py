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
