"""Sliders that work everywhere: JupyterLab, Colab, and the static website with no kernel.

Every frame is drawn once, ahead of time, as a small PNG. With ipywidgets >= 8 the frames sit in
a `Stack` whose `selected_index` is linked to the slider in the browser (jslink), so moving the
slider on the static site switches frames client-side. ipywidgets 7 (e.g. Colab) has no `Stack`:
then a live kernel swaps the frame when the slider moves.

A frame is an HTML widget holding `<img alt="..." src="data:image/png;base64,...">`, not an Image widget:
ipywidgets' Image has no alt text, and the frame's alt is the description of the figure drawn for that value
(book.plots.alt_text). The base64 PNG weighs what an Image widget's stored buffer weighs (also base64 in the
notebook's widget state); the site's Content-Security-Policy allows data: images.
"""
from __future__ import annotations

import base64
import html
from typing import Callable, Optional, Sequence, Tuple

import ipywidgets as widgets

from .plots import alt_text, display_width, to_png

__all__ = ["slider", "slider2", "has_stack", "bars_html"]

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


def _figure(fig, value):
    """draw(value) must return a matplotlib Figure (e.g. the fig of plots.new_figure): say so when it does not."""
    if not hasattr(fig, "savefig"):
        hint = " (did draw forget `return fig`?)" if fig is None else ""
        raise TypeError(f"draw({value!r}) must return a matplotlib Figure, got {type(fig).__name__}{hint}")
    return fig


def _render(figs):
    """PNG bytes, screen widths and alt texts of the figures (the PNGs are drawn at plots.PIXEL_RATIO x that
    width)."""
    return [to_png(f, palette=True) for f in figs], [display_width(f) for f in figs], [alt_text(f) for f in figs]


def frame_html(png: bytes, width: int, alt: str) -> str:
    """One frame: the PNG inline, shown `width` CSS px wide (never wider than its column), with its alt text."""
    if not alt or not str(alt).strip():
        raise ValueError(f"a slider frame needs alt text describing it, got {alt!r}")
    return (f'<img alt="{html.escape(str(alt), quote=True)}" src="data:image/png;base64,'
            f'{base64.b64encode(png).decode("ascii")}" width="{int(width)}" '
            'style="display:block;max-width:100%;height:auto">')


def _frames(pngs, width, alts):
    """Each frame's HTML (frame_html); width is one number for all frames, or a list with one per frame."""
    widths = width if isinstance(width, list) else [width] * len(pngs)
    return [frame_html(p, w, a) for p, w, a in zip(pngs, widths, alts)]


def _stack(frames, control, index):
    """A Stack of the frames (HTML widgets) whose selected_index follows `control` in the browser (jslink)."""
    stack = widgets.Stack([widgets.HTML(value=f) for f in frames], selected_index=index)
    widgets.jslink((control, "index"), (stack, "selected_index"))
    return stack


def _control(values, index, description):
    """The slider, without its own readout: that box is narrow and cuts long values off ("scaled + causa")."""
    options = [(str(v), i) for i, v in enumerate(values)]
    return widgets.SelectionSlider(options=options, value=index, description=description, readout=False,
                                   continuous_update=True, style={"description_width": "initial"})


def _readout(values, control, index):
    """The slider's value in full beside it: a Stack of labels jslinked to it (ipywidgets 8), or one label the
    kernel updates (ipywidgets 7)."""
    return _view([f"<b>{html.escape(str(v))}</b>" for v in values], control, index)


def _row(control, values, index):
    return widgets.HBox([control, _readout(values, control, index)])


def _view(frames, control, index):
    """HTML `frames` shown one at a time as `control` moves: a Stack linked to it (ipywidgets 8), or one HTML
    widget the kernel updates (ipywidgets 7)."""
    if has_stack():
        return _stack(frames, control, index)
    shown = widgets.HTML(value=frames[index])
    control.observe(lambda change: setattr(shown, "value", frames[change["new"]]), names="index")
    return shown


def slider(values: Sequence, draw: Callable, *, description: str = "", default=None,
           width: Optional[int] = None) -> widgets.VBox:
    """A slider over `values`; `draw(v)` returns the matplotlib Figure shown for value v.

    Example: slider([1, 2, 3], lambda n: plot_for(n), description="n-gram order", default=2)
    """
    values = list(values)             # once: a generator would be used up by the check
    index = _check(values, default, "slider")
    pngs, widths, alts = _render([_figure(draw(v), v) for v in values])
    control = _control(values, index, description)
    box = SliderBox([_row(control, values, index), _view(_frames(pngs, width or widths, alts), control, index)])
    box._book_label = f"{description or 'value'}: {len(values)} frames"
    return box


def slider2(values_a: Sequence, values_b: Sequence, draw: Callable, *,
            descriptions: Tuple[str, str] = ("", ""), defaults: Tuple = (None, None),
            width: Optional[int] = None) -> widgets.VBox:
    """Two sliders; `draw(a, b)` returns the Figure for the pair (a, b). A Stack of Stacks."""
    values_a, values_b = list(values_a), list(values_b)
    ia = _check(values_a, defaults[0], "first slider")
    ib = _check(values_b, defaults[1], "second slider")
    if len(values_a) * len(values_b) > 4 * MAX_FRAMES:
        raise ValueError(f"{len(values_a)} x {len(values_b)} frames is too many; keep it to {4 * MAX_FRAMES}")
    ctrl_a = _control(values_a, ia, descriptions[0])
    ctrl_b = _control(values_b, ib, descriptions[1])
    rendered = [_render([_figure(draw(a, b), (a, b)) for b in values_b]) for a in values_a]
    grid = [_frames(pngs, width or row_widths, alts) for pngs, row_widths, alts in rendered]
    if has_stack():
        outer = widgets.Stack([_stack(row, ctrl_b, ib) for row in grid], selected_index=ia)
        widgets.jslink((ctrl_a, "index"), (outer, "selected_index"))
        view = outer
    else:
        view = widgets.HTML(value=grid[ia][ib])

        def update(_change):
            view.value = grid[ctrl_a.index][ctrl_b.index]
        ctrl_a.observe(update, names="index")
        ctrl_b.observe(update, names="index")
    box = SliderBox([_row(ctrl_a, values_a, ia), _row(ctrl_b, values_b, ib), view])
    box._book_label = f"{descriptions[0] or 'a'} x {descriptions[1] or 'b'}: {len(grid) * len(grid[0])} frames"
    return box


def bars_html(labels: Sequence[str], values: Sequence[float], outline: Optional[Sequence[float]] = None) -> str:
    """Horizontal bars as HTML (for a widgets.HTML): one row per label, `values` in [0, 1] filled, `outline`
    (optional, e.g. a distribution before a change) drawn as a frame on the same track, the value in percent."""
    labels, values = list(labels), [float(v) for v in values]
    outline = [float(v) for v in outline] if outline is not None else [None] * len(values)
    if not len(labels) == len(values) == len(outline):
        raise ValueError(f"labels, values and outline must have one entry each per bar, got {len(labels)}, "
                         f"{len(values)} and {len(outline)}")
    for v in values + [o for o in outline if o is not None]:
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"bar values must lie in [0, 1], got {v}")
    span = "position:absolute;left:0;top:0;height:100%;width:{:.1f}%;"
    rows = []
    for label, v, o in zip(labels, values, outline):
        frame = "" if o is None else f"<span style='{span.format(100 * o)}border:1px solid #888;" \
                                     "box-sizing:border-box'></span>"
        rows.append("<div style='display:flex;align-items:center;gap:6px;font-size:12px;line-height:1.3'>"
                    f"<code style='min-width:1.4em;text-align:center'>{html.escape(str(label))}</code>"
                    "<span style='position:relative;flex:1;height:10px;min-width:160px'>"
                    f"{frame}<span style='{span.format(100 * v)}background:rgba(31,119,180,0.8)'></span></span>"
                    f"<span style='width:3.5em;text-align:right'>{100 * v:.1f}%</span></div>")
    return "".join(rows)
