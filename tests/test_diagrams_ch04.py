"""Chapter 4's diagram: the Q/K/V data flow draws, names every stage with its shape, and fits its canvas."""
from matplotlib.backends.backend_agg import FigureCanvasAgg

from book.chapters.ch04 import draw_qkv_flow
from book.plots import to_png


def _texts(fig):
    return [t.get_text() for t in fig.axes[0].texts]


def test_qkv_flow_names_every_stage_with_its_shape():
    fig = draw_qkv_flow()
    text = " ".join(_texts(fig))
    for label in ("X", "$W_Q$", "$W_K$", "$W_V$", "Q\nT", "K\nT", "V\nT", "QK^\\top / \\sqrt{d_k}", "mask",
                  "softmax", "weights × V", "output"):
        assert label in text, label
    assert text.count("T × T") >= 3                 # scores, mask and weights are all T x T
    assert to_png(fig)[:8] == b"\x89PNG\r\n\x1a\n"


def test_qkv_flow_labels_stay_inside_the_canvas():
    fig = draw_qkv_flow()
    renderer = FigureCanvasAgg(fig).get_renderer()
    box = fig.bbox
    for t in fig.axes[0].texts:
        e = t.get_window_extent(renderer)
        assert box.x0 <= e.x0 and e.x1 <= box.x1 and box.y0 <= e.y0 and e.y1 <= box.y1, t.get_text()
