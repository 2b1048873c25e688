"""Chapter 8's diagram: the encoder-decoder, with the memory computed once, one arrow from it into every decoder
layer's cross-attention, and each attention labelled with its mask."""
import pytest
from matplotlib.patches import FancyArrowPatch

from book.diagrams import Diagram, UNIT_INCH
from book.chapters.ch08 import MAX_DRAWN_LAYERS, MEMORY_ARROW
from book.chapters.ch08 import draw_encoder_decoder
from book.plots import PIXEL_RATIO, SCREEN_DPI, to_png


def _texts(fig):
    return [t.get_text() for t in fig.axes[0].texts]


@pytest.mark.parametrize("n_layers", [1, 2, 3])
def test_every_layer_and_every_attention_is_labelled_with_its_mask(n_layers):
    texts = _texts(draw_encoder_decoder(n_layers))
    for i in range(1, n_layers + 1):
        assert f"encoder layer {i}" in texts and f"decoder layer {i}" in texts
    assert f"encoder layer {n_layers + 1}" not in texts
    enc_self = [t for t in texts if t.startswith("self-attention")]
    dec_self = [t for t in texts if t.startswith("causal self-attention")]
    cross = [t for t in texts if t.startswith("cross-attention")]
    assert len(enc_self) == len(dec_self) == len(cross) == n_layers
    assert all(t.endswith("mask: source padding") for t in enc_self + cross)
    assert all("mask: causal" in t and "target padding" in t for t in dec_self)
    assert all("Q: decoder" in t and "K and V: M" in t for t in cross)
    joined = " | ".join(texts)
    for part in ("memory M", "computed once", "source words", "target so far", "sinusoidal positions",
                 "final LayerNorm", "softmax", "next word", "N = 6", "LN(x + f(x))"):
        assert part in joined, part


@pytest.mark.parametrize("n_layers", [1, 2, 4])
def test_one_memory_arrow_into_each_decoder_layers_cross_attention(n_layers):
    fig = draw_encoder_decoder(n_layers)
    ax = fig.axes[0]
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch) and p.get_gid() == MEMORY_ARROW]
    assert len(arrows) == n_layers
    cross_y = sorted(t.get_position()[1] for t in ax.texts if t.get_text().startswith("cross-attention"))
    memory = next(t for t in ax.texts if t.get_text().startswith("memory M"))
    ends = sorted(a._posA_posB[1] for a in arrows)
    starts = {a._posA_posB[0][0] for a in arrows}
    assert [y for _, y in ends] == pytest.approx(cross_y)                # each ends at one cross-attention box
    assert len(starts) == 1 and starts.pop() > memory.get_position()[0]  # all leave the one memory box
    assert all(a.get_edgecolor() == arrows[0].get_edgecolor() for a in arrows)


def test_encoder_decoder_png_is_at_the_books_resolution():
    fig = draw_encoder_decoder()
    png = to_png(fig)
    width = int.from_bytes(png[16:20], "big")
    assert png[:4] == b"\x89PNG" and abs(width - 15.2 * UNIT_INCH * SCREEN_DPI * PIXEL_RATIO) <= 1


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "2", None, MAX_DRAWN_LAYERS + 1])
def test_bad_layer_counts_are_rejected(bad):
    with pytest.raises(ValueError, match="n_layers must be"):
        draw_encoder_decoder(bad)


def test_diagram_arrow_returns_its_patch():
    d = Diagram(3, 2)
    patch = d.arrow((0.5, 1), (2.5, 1))
    assert isinstance(patch, FancyArrowPatch) and patch in d.ax.patches
