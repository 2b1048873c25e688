"""Chapter 8's committed figures are at the book's resolution: every PNG, inline or a slider frame, carries
plots.PIXEL_RATIO times the pixels of the width it is shown at (160 dpi for a figure shown at 80 CSS px per inch).
The 2026-12-03 review read the shown widths (440 px, 480 px) as the PNGs' and reported 80 dpi; this pins the fact."""
import json
from pathlib import Path

from book.plots import PIXEL_RATIO
from nbtools import notebook_images

NOTEBOOK = Path(__file__).resolve().parent.parent / "chapters" / "08_encoder_decoder.ipynb"


def _png_width(data: bytes) -> int:
    assert data[:4] == b"\x89PNG"
    return int.from_bytes(data[16:20], "big")   # the IHDR width


def _shown_and_drawn(nb):
    """(width shown, PNG width) for every inline figure and every slider frame of the notebook."""
    return [(shown, _png_width(png)) for _, png, shown, _ in notebook_images(nb)]


def test_every_chapter_8_figure_and_slider_frame_is_drawn_at_twice_its_shown_width():
    pairs = _shown_and_drawn(json.loads(NOTEBOOK.read_text()))
    assert len(pairs) >= 10, "expected the inline figures and the two sliders' frames"
    assert all(abs(drawn - PIXEL_RATIO * shown) <= PIXEL_RATIO for shown, drawn in pairs), pairs
