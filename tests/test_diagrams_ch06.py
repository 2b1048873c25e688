"""Chapter 6's diagrams draw and carry their labels."""
from book.chapters.ch06 import draw_head_split, draw_post_pre_norm
from book.plots import to_png


def _texts(fig):
    return {t.get_text() for t in fig.axes[0].texts}


def test_head_split_shows_split_heads_concat_and_w_o():
    fig = draw_head_split()
    texts = _texts(fig)
    assert {"Q", "K", "V", "concat", "x\n(T, C)", "out\n(T, C)", "$W_O$\nC → C"} <= texts
    assert any(t.startswith("head 1") for t in texts) and any(t.startswith("head H") for t in texts)
    assert to_png(fig)[:4] == b"\x89PNG"


def test_post_and_pre_norm_side_by_side():
    fig = draw_post_pre_norm()
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "x ← LN(x + f(x))" in texts and "x ← x + f(LN(x))" in texts
    assert texts.count("LayerNorm") == 4 and texts.count("FFN") == 2 and texts.count("+") == 4
    assert to_png(fig)[:4] == b"\x89PNG"
