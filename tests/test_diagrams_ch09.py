"""Chapter 9's diagram: SFT and RLHF's steps, in order, with the loop back to new rankings."""
from matplotlib.patches import FancyArrowPatch

from book import plots
from book.chapters.ch09 import RLHF_STEPS
from book.chapters.ch09 import draw_rlhf


def test_rlhf_diagram_has_every_step_in_order_and_the_loop():
    fig = draw_rlhf()
    texts = [t for t in fig.axes[0].texts]
    titles = [t for t in texts if t.get_text() in {title for title, _ in RLHF_STEPS}]
    assert [t.get_text() for t in sorted(titles, key=lambda t: t.get_position()[0])] == [s for s, _ in RLHF_STEPS]
    assert any("KL penalty" in t.get_text() for t in texts)
    arrows = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == len(RLHF_STEPS)                    # one between each pair of steps, and the loop back
    assert any("new samples to rank" in t.get_text() for t in texts)
    assert plots.to_png(fig)[:4] == b"\x89PNG"
