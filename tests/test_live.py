"""book.live: the kernel's live GPT (ipywidgets), and book.widgets.bars_html, which draws its bars."""
import pytest
import torch

from book.generate import generate, next_token_probs
from book.gpt import GPT, GPTConfig
from book.live import LiveGPT, live_gpt
from book.tokenizers import CharTokenizer
from book.widgets import bars_html

TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?"


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    tok = CharTokenizer.from_text(TEXT)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, context_len=16, d_model=24, n_heads=3, n_layers=2))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return model.eval(), tok


def test_typing_updates_bars_and_heatmap(tiny):
    model, tok = tiny
    w = live_gpt(model, tok, "ROMEO:")
    assert isinstance(w, LiveGPT) and repr(w) == "<live GPT: text box, bars, write button, attention heatmap>"
    bars, png = w.bars.value, w.heatmap.value
    assert bars.count("<code") == 12 and png.startswith('<img alt="') and "data:image/png;base64,iVBOR" in png
    assert "attention of layer 1, head 1 over 6 characters" in png and "&#x27;:&#x27; puts" in png   # its alt
    w.text.value = "But soft"
    assert w.bars.value != bars and w.heatmap.value != png
    with torch.no_grad():
        logits = model(torch.tensor([tok.encode("But soft")]))[0, -1]
    assert torch.allclose(w.probs(), next_token_probs(logits, temperature=0.8))


def test_greedy_write_equals_generate(tiny):
    model, tok = tiny
    w = live_gpt(model, tok, "ROMEO:", n_chars=20)
    w.temperature.value = 0.0
    w.button.click()
    ids = torch.tensor([tok.encode("ROMEO:")])
    want = tok.decode(generate(model, ids, 20, temperature=0)[0, 6:].tolist())
    assert w.text.value == "ROMEO:" + want


def test_sliders_change_bars_and_writing(tiny):
    model, tok = tiny
    w = live_gpt(model, tok, "ROMEO:", n_chars=30)
    w.temperature.value = 0.0
    greedy_bars = w.bars.value
    greedy = w.write()
    w.text.value = "ROMEO:"
    w.temperature.value = 2.0
    assert w.bars.value != greedy_bars
    assert w.write() != greedy
    w.top_k.value = 1
    assert w.probs().max() == 1.0


def test_layer_and_head_redraw_the_heatmap(tiny):
    model, tok = tiny
    w = live_gpt(model, tok, "But soft")
    shots = {w.heatmap.value}
    w.head.value = 2
    shots.add(w.heatmap.value)
    w.layer.value = 1
    shots.add(w.heatmap.value)
    assert len(shots) == 3


def test_unknown_characters_and_empty_text(tiny):
    model, tok = tiny
    w = live_gpt(model, tok, "ROMEO: 123")
    assert "skipped" in w.note.value and "1 2 3" in w.note.value
    w.text.value = ""
    assert w.bars.value == "Type something." and w.heatmap.value == ""
    assert w.write() == "" and "known character" in w.note.value


def test_bad_arguments(tiny):
    model, tok = tiny
    with pytest.raises(TypeError, match="book.gpt.GPT"):
        live_gpt(object(), tok)
    with pytest.raises(ValueError, match="vocab_size"):
        live_gpt(model, CharTokenizer.from_text("ab"))
    with pytest.raises(TypeError, match="prompt must be a str"):
        live_gpt(model, tok, 3)
    with pytest.raises(ValueError, match="n_chars"):
        live_gpt(model, tok, n_chars=0)
    with pytest.raises(TypeError, match="seed must be an int"):
        live_gpt(model, tok, seed=1.5)


def test_bars_html():
    out = bars_html(["a", "<"], [0.25, 0.75], outline=[0.5, 0.5])
    assert out.count("<div") == 2 and "&lt;" in out and "75.0%" in out and "width:50.0%" in out
    assert "border" not in bars_html(["a"], [1.0])
    with pytest.raises(ValueError, match="one entry each"):
        bars_html(["a"], [0.1, 0.2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bars_html(["a"], [1.5])
