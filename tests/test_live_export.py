"""The committed export of chapter 7's GPT (book/results/live/ch07_gpt.onnx), which the website's live section runs,
is the chapter's model: its recorded validation loss is the chapter's, its weights score that loss again, and the
current model code (book.gpt) computes the file's numbers. Re-export: `python tools/execute.py
chapters/07_training_gpt.ipynb` (executing the chapter writes the file)."""
import dataclasses
import math

import pytest
import torch

from book.data import recorded_glue
from book.export import LIVE_DIR, MAX_BYTES, load_exported, onnx_parity

pytest.importorskip("onnxruntime", reason="the parity check needs onnxruntime (requirements.txt)")

ONNX = LIVE_DIR / "ch07_gpt.onnx"
RERUN = "re-export: python tools/execute.py chapters/07_training_gpt.ipynb"


@pytest.fixture(scope="module")
def exported():
    assert ONNX.is_file(), f"{ONNX} is missing; {RERUN}"
    return load_exported(ONNX)


def test_small_enough_for_a_page():
    size = ONNX.stat().st_size + ONNX.with_suffix(".json").stat().st_size
    assert size <= MAX_BYTES, f"{size:,} bytes"


def test_recorded_loss_is_the_chapters(exported):
    _, meta = exported
    glue, prov = recorded_glue("07_training_gpt"), meta["provenance"]
    assert prov["chapter"] == "07_training_gpt"
    assert prov["val_bits_per_char"] == glue["ch7_gpt_bpc"], (
        f"the export says {prov['val_bits_per_char']} bits/char, the chapter {glue['ch7_gpt_bpc']}: {RERUN}")
    assert prov["val_nats"] == glue["ch7_gpt_nats"], RERUN
    assert f"{prov['steps_done']:,}" == glue["ch7_steps"], RERUN


def test_recipe_and_config_are_the_chapters(exported):
    from book.train import COURSE_CPU

    model, meta = exported
    recipe = dataclasses.replace(COURSE_CPU, steps=1500)      # chapter 7's CPU run
    assert meta["provenance"]["recipe"] == dataclasses.asdict(recipe), RERUN
    assert meta["config"] == dataclasses.asdict(recipe.config(len(meta["vocab"]))), RERUN
    assert meta["provenance"]["commit"] is None or len(meta["provenance"]["commit"]) == 40


def test_current_model_code_computes_the_files_numbers(exported):
    """Any change to book.gpt's forward (or to the weights' names) shows here: then export again."""
    _, meta = exported
    errors = onnx_parity(ONNX, ["ROMEO:\nBut soft, what light ", "First Citizen:\nBefore we proceed any further",
                                "a" * 80])
    assert errors["logits"] < 1e-4 and errors["attention"] < 1e-5, f"{errors}; {RERUN}"


@pytest.mark.slow
def test_the_weights_score_the_recorded_loss(exported):
    """The file's weights, on the chapter's validation windows (evaluate_lm's fixed seed), give its loss."""
    from book.data import load_shakespeare, shakespeare_split
    from book.tokenizers import CharTokenizer
    from book.train import evaluate_lm, nats_to_bits

    model, meta = exported
    text = load_shakespeare()
    tok = CharTokenizer.from_text(text)
    assert tok.itos == meta["vocab"]
    val = torch.tensor(tok.encode(shakespeare_split(text)[1]))
    nats = evaluate_lm(model, val, 64, meta["config"]["context_len"], 40)
    assert math.isclose(nats, float(meta["provenance"]["val_nats"]), abs_tol=1.5e-3), nats
    assert f"{nats_to_bits(nats):.3f}" == meta["provenance"]["val_bits_per_char"] or \
        abs(nats_to_bits(nats) - float(meta["provenance"]["val_bits_per_char"])) < 2e-3
