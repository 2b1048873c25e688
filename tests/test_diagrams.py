"""book.diagrams: the drawing primitives every architecture diagram uses."""
import pytest

from book.diagrams import ROLES, UNIT_INCH, Diagram
from book.plots import PIXEL_RATIO, SCREEN_DPI, to_png


def test_canvas_size_follows_the_grid_and_the_png_is_drawn_at_twice_the_screen_pixels():
    d = Diagram(6, 3)
    assert d.figure.get_size_inches().tolist() == pytest.approx([6 * UNIT_INCH, 3 * UNIT_INCH])
    png = to_png(d.figure)
    width = int.from_bytes(png[16:20], "big")   # the PNG header's IHDR width
    assert width == round(6 * UNIT_INCH * SCREEN_DPI * PIXEL_RATIO)


def test_every_role_draws_and_unknown_roles_are_refused():
    d = Diagram(len(ROLES) * 1.5, 2, title="roles")
    for i, role in enumerate(ROLES):
        d.box(0.75 + 1.5 * i, 1, role, role=role)
    d.arrow((0.5, 0.3), (2, 0.3), text="a")
    d.circle(1, 1.6)
    d.group(0.1, 0.1, 3, 1.9, "x N")
    assert len(d.ax.patches) == len(ROLES) + 3
    with pytest.raises(ValueError, match="role must be one of"):
        d.box(1, 1, "x", role="attention")
    with pytest.raises(ValueError, match="width must be a number > 0, got 0"):
        Diagram(0, 2)
    with pytest.raises(ValueError, match="height must be a number > 0, got True"):
        Diagram(2, True)
