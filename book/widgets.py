"""Sliders that work everywhere: JupyterLab, Colab, and the static website with no kernel.

Every frame is drawn once, ahead of time, as a small PNG. With ipywidgets >= 8 the frames sit in
a `Stack` whose `selected_index` is linked to the slider in the browser (jslink), so moving the
slider on the static site switches frames client-side. ipywidgets 7 (e.g. Colab) has no `Stack`:
then a live kernel swaps the image's bytes when the slider moves.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

import ipywidgets as widgets

from .plots import to_png

__all__ = ["slider", "slider2", "has_stack"]

MAX_FRAMES = 24


def has_stack() -> bool:
    """True when this ipywidgets has `Stack` (version 8 and later)."""
    return hasattr(widgets, "Stack")


class SliderBox(widgets.VBox):
    """A VBox whose text form is short and stable (the PNG bytes stay out of text outputs)."""

    def __repr__(self) -> str:
        return f"<slider {self._book_label}>"


def _check(values: Sequence, default, name: str) -> int:
    values = list(values)
    if not values:
        raise ValueError(f"{name} needs at least one value, got none (zero frames)")
    if len(values) > MAX_FRAMES:
        raise ValueError(f"{name} has {len(values)} values; keep it to at most {MAX_FRAMES} frames")
    if default is None:
        return 0
    if default not in values:
        raise ValueError(f"default {default!r} is not one of the {name} values {values!r}")
    return values.index(default)


def _frames(pngs, width):
    size = {} if width is None else {"width": width}     # None: the figure's own pixel size
    return [widgets.Image(value=p, format="png", **size) for p in pngs]


def _control(values, index, description):
    options = [(str(v), i) for i, v in enumerate(values)]
    return widgets.SelectionSlider(options=options, value=index, description=description,
                                   continuous_update=True, style={"description_width": "initial"})


def _view(frames, control, index, stack_cls=None):
    """A Stack linked to `control` (ipywidgets 8), or one image swapped by the kernel (ipywidgets 7)."""
    if has_stack():
        stack = widgets.Stack(frames, selected_index=index)
        widgets.jslink((control, "index"), (stack, "selected_index"))
        return stack
    image = widgets.Image(value=frames[index].value, format="png", width=frames[index].width)
    control.observe(lambda change: setattr(image, "value", frames[change["new"]].value), names="index")
    return image


def slider(values: Sequence, draw: Callable, *, description: str = "", default=None,
           width: Optional[int] = None) -> widgets.VBox:
    """A slider over `values`; `draw(v)` returns the matplotlib Figure shown for value v.

    Example: slider([1, 2, 3], lambda n: plot_for(n), description="n-gram order", default=2)
    """
    index = _check(values, default, "slider")
    values = list(values)
    pngs = [to_png(draw(v)) for v in values]
    if len(pngs) != len(values):  # pragma: no cover - defensive, draw is called once per value
        raise ValueError("draw must return one figure per value")
    control = _control(values, index, description)
    box = SliderBox([control, _view(_frames(pngs, width), control, index)])
    box._book_label = f"{description or 'value'}: {len(values)} frames"
    return box


def slider2(values_a: Sequence, values_b: Sequence, draw: Callable, *,
            descriptions: Tuple[str, str] = ("", ""), defaults: Tuple = (None, None),
            width: Optional[int] = None) -> widgets.VBox:
    """Two sliders; `draw(a, b)` returns the Figure for the pair (a, b). A Stack of Stacks."""
    ia = _check(values_a, defaults[0], "first slider")
    ib = _check(values_b, defaults[1], "second slider")
    values_a, values_b = list(values_a), list(values_b)
    if len(values_a) * len(values_b) > 4 * MAX_FRAMES:
        raise ValueError(f"{len(values_a)} x {len(values_b)} frames is too many; keep it to {4 * MAX_FRAMES}")
    ctrl_a = _control(values_a, ia, descriptions[0])
    ctrl_b = _control(values_b, ib, descriptions[1])
    grid = [[to_png(draw(a, b)) for b in values_b] for a in values_a]
    if has_stack():
        inner = []
        for row in grid:
            s = widgets.Stack(_frames(row, width), selected_index=ib)
            widgets.jslink((ctrl_b, "index"), (s, "selected_index"))
            inner.append(s)
        outer = widgets.Stack(inner, selected_index=ia)
        widgets.jslink((ctrl_a, "index"), (outer, "selected_index"))
        view = outer
    else:
        view = _frames([grid[ia][ib]], width)[0]

        def update(_change):
            view.value = grid[ctrl_a.index][ctrl_b.index]
        ctrl_a.observe(update, names="index")
        ctrl_b.observe(update, names="index")
    box = SliderBox([ctrl_a, ctrl_b, view])
    box._book_label = f"{descriptions[0] or 'a'} x {descriptions[1] or 'b'}: {len(grid) * len(grid[0])} frames"
    return box
