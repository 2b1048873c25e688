"""Chapters 4 and 8's typed-input sections in a kernel (ipywidgets) and their exports, on small untrained models.

The website's versions are tested in tests/test_live_sections.py; here: the widgets redraw on typing, bad input
gets a clear message, and an export holds its example and refuses a second model's weights.
"""
from __future__ import annotations

import pytest
import torch

from book.attention import OneLayerAttention
from book.chapters.ch04 import MAX_LINE, export_read_twice, live_read_twice, load_read_twice, read_twice
from book.chapters.ch08 import export_translator, live_translator, load_translator, translate_words
from book.tasks import ToyTranslation
from book.tokenizers import CharTokenizer
from book.transformer import Transformer, TransformerConfig

TEXT = "abcdefghij klmnopqrstuvwxyz,.!?\nABCDEFGHIJKLMNOPQRSTUVWXYZ:;'-"


@pytest.fixture(scope="module")
def layer():
    torch.manual_seed(0)
    tok = CharTokenizer.from_text(TEXT)
    return OneLayerAttention(tok.vocab_size, d=8), tok


@pytest.fixture(scope="module")
def translator():
    torch.manual_seed(0)
    task = ToyTranslation()
    cfg = TransformerConfig(len(task.src_vocab), len(task.tgt_vocab), context_len=48, d_model=16, n_heads=2,
                            n_layers=1, d_ff=32)
    return Transformer(cfg), task


def test_read_twice_reads_the_known_characters(layer):
    model, tok = layer
    got = read_twice(model, tok, "ab§c")                       # § is not in the vocabulary: skipped
    assert got["text"] == "abc" and len(got["predicted"]) == 3 and got["weights"].shape == (3, 3)
    assert len(read_twice(model, tok, "x" * 200)["text"]) == MAX_LINE
    with pytest.raises(ValueError, match="line must hold at least one character"):
        read_twice(model, tok, "§§")
    with pytest.raises(TypeError, match="line must be a str"):
        read_twice(model, tok, 42)


def test_the_read_twice_widget_redraws_on_typing(layer):
    model, tok = layer
    w = live_read_twice(model, tok, "abcabc")
    box, out, picture = w.children
    assert "abcabc" in out.value and "of 6 characters right" in out.value and picture.value.startswith("<img alt=")
    box.value = "hello"
    assert "of 5 characters right" in out.value
    box.value = "§"
    assert out.value == "Type a line." and picture.value == ""


def test_translate_words_skips_unknown_words_and_stops(translator):
    model, task = translator
    got = translate_words(model, task, "Big cat SEES zebra dog")
    assert got["source"] == ["big", "cat", "sees", "dog"] and got["skipped"] == ["zebra"]
    assert 1 <= len(got["output"]) <= 4 + 5
    L, H, T, S = got["cross"].shape
    assert (L, H, T, S) == (1, 2, len(got["output"]), 4)
    with pytest.raises(ValueError, match="at least one word of the toy language"):
        translate_words(model, task, "zebra")
    with pytest.raises(ValueError, match="at most 48"):
        translate_words(model, task, "cat " * 49)


def test_the_translator_widget_redraws(translator):
    model, task = translator
    w = live_translator(model, task, "cat sees dog")
    box, out, selectors, picture = w.children
    assert "source:      cat sees dog" in out.value and picture.value.startswith("<img alt=")
    first = picture.value
    selectors.children[1].value = 1                              # head 2
    assert picture.value != first
    box.value = "zebra"
    assert "Type a sentence of the toy language" in out.value and picture.value == ""


def test_exports_hold_their_example_and_their_weights(layer, translator, tmp_path):
    model, tok = layer
    meta = export_read_twice(model, tok, tmp_path / "r.onnx", example="abcab", provenance={"test": True})
    assert meta["example"]["text"] == "abcab" and len(meta["example"]["weights"]) == 25
    assert max(meta["parity"].values()) < 1e-4
    back, _ = load_read_twice(tmp_path / "r.onnx")
    assert all(torch.equal(back.state_dict()[k], v) for k, v in model.state_dict().items())
    tf, task = translator
    meta = export_translator(tf, task, tmp_path / "t.onnx", example="cat sees dog", provenance={})
    want = translate_words(tf, task, "cat sees dog")
    assert meta["example"]["output"] == want["output"]
    back, _ = load_translator(tmp_path / "t.onnx")
    assert all(torch.equal(back.state_dict()[k], v) for k, v in tf.state_dict().items())
    with pytest.raises(ValueError, match="format"):
        load_translator(tmp_path / "r.onnx")
