"""book.diagrams, chapters 2-3: the encoder-decoder with its one summary vector, and one attention step."""
from book.chapters.ch02 import draw_rnn_encoder_decoder
from book.chapters.ch03 import draw_bahdanau_attention
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


def _position(fig, text):
    (t,) = [t for t in fig.axes[0].texts if t.get_text() == text]
    return t.get_position()


def _arrows(fig):
    from matplotlib.patches import FancyArrowPatch
    return [p._posA_posB for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)]


def _joins(arrows, a, b, reach=0.8):
    """Some arrow starts within `reach` grid units of point a and ends within `reach` of point b."""
    near = lambda p, q: abs(p[0] - q[0]) <= reach and abs(p[1] - q[1]) <= reach
    return any(near(start, a) and near(end, b) for start, end in arrows)


def test_attention_step_sums_the_values_through_their_weights():
    """Each encoder state h_i (a value) reaches the sum through a product with its weight alpha_ti: the picture is
    a weighted sum of states, not a sum of weights (review of chapter 3, c8)."""
    fig = draw_bahdanau_attention()
    arrows = _arrows(fig)
    products = sorted(t.get_position() for t in fig.axes[0].texts if t.get_text() == r"$\times$")
    assert len(products) == 4
    total = _position(fig, r"$\Sigma$")
    for i, product in enumerate(products, start=1):
        h, alpha = _position(fig, f"$h_{i}$"), _position(fig, rf"$\alpha_{{t{i}}}$")
        assert abs(h[0] - product[0]) < 1 and any(abs(s[0] - product[0]) < 0.1 and s[1] < product[1] < e[1] + 0.3
                                                   and abs(s[1] - h[1]) < 0.5 for s, e in arrows), i   # h_i -> x
        assert _joins(arrows, alpha, product), i                                                      # alpha -> x
        assert _joins(arrows, product, total, reach=0.35) or any(
            abs(s[0] - product[0]) < 0.1 and abs(e[0] - total[0]) < 0.4 and abs(e[1] - total[1]) < 0.1
            for s, e in arrows), i                                                                    # x -> sum


def test_attention_step_has_a_bidirectional_encoder_and_predicts_from_state_and_context():
    fig = draw_bahdanau_attention()
    texts = _texts(fig)
    for i in range(1, 5):
        assert {rf"$\overrightarrow{{h}}_{i}$", rf"$\overleftarrow{{h}}_{i}$"} <= set(texts)
    arrows = _arrows(fig)
    for i in range(1, 4):            # the forward chain points right, the backward chain left
        f, f_next = _position(fig, rf"$\overrightarrow{{h}}_{i}$"), _position(fig, rf"$\overrightarrow{{h}}_{i + 1}$")
        b, b_next = _position(fig, rf"$\overleftarrow{{h}}_{i}$"), _position(fig, rf"$\overleftarrow{{h}}_{i + 1}$")
        assert any(f[0] < s[0] < e[0] < f_next[0] for s, e in arrows if abs(s[1] - e[1]) < 1e-9 and s[1] > f[1])
        assert any(b[0] < e[0] < s[0] < b_next[0] for s, e in arrows if abs(s[1] - e[1]) < 1e-9 and s[1] < b[1])
    (predict,) = [t for t in texts if "predict" in t]
    assert "s_t" in predict and "c_t" in predict
    out, c = _position(fig, predict), _position(fig, "$c_t$")
    assert any(abs(s[1] - c[1]) < 0.1 and abs(e[1] - out[1]) < 0.1 and s[0] > c[0] and e[0] < out[0]
               for s, e in arrows)                                                         # c_t -> prediction
