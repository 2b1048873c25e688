"""book.diagrams, chapters 2-3: the encoder-decoder with its one summary vector, and one attention step."""
from book.diagrams import draw_bahdanau_attention, draw_rnn_encoder_decoder
from book.plots import to_png


def _texts(fig):
    return [t.get_text() for t in fig.axes[0].texts]


def _inside(fig):
    """Every text's drawn extent lies inside the figure (nothing clipped at the edges)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    renderer = FigureCanvasAgg(fig).get_renderer()
    w, h = fig.bbox.width, fig.bbox.height
    for t in fig.axes[0].texts + fig.texts:
        bb = t.get_window_extent(renderer)
        assert bb.x0 >= 0 and bb.y0 >= 0 and bb.x1 <= w and bb.y1 <= h, f"{t.get_text()!r} is clipped: {bb}"


def test_encoder_decoder_passes_the_source_through_one_summary():
    fig = draw_rnn_encoder_decoder()
    texts = _texts(fig)
    assert "summary $c$" in texts and texts.count("GRU") == 4
    assert {"$s_1$", "$s_4$", "<bos>", "LIKES"} <= set(texts)
    assert any("fixed size" in t for t in texts)
    _inside(fig)
    assert to_png(fig)[:8] == b"\x89PNG\r\n\x1a\n"


def test_attention_step_scores_every_encoder_state_with_the_previous_decoder_state():
    fig = draw_bahdanau_attention()
    texts = _texts(fig)
    for i in range(1, 5):
        assert {f"$h_{i}$", f"$e_{{t{i}}}$", rf"$\alpha_{{t{i}}}$"} <= set(texts)
    assert {"$s_{t-1}$", "$c_t$", "$y_t$", "$y_{t-1}$"} <= set(texts)
    assert any("softmax" in t for t in texts) and any("tanh" in t for t in texts)
    _inside(fig)
    assert to_png(fig)[:8] == b"\x89PNG\r\n\x1a\n"
