"""Figures for the chapters: attention-style heatmaps, line plots, PNG export.

Figures are made with matplotlib.figure.Figure, not pyplot, so a figure drawn for a slider frame
is not also shown inline. Make a figure the last expression of a cell to show it.
"""
from __future__ import annotations

import io
from typing import Dict, Optional, Sequence

import numpy as np
from matplotlib.figure import Figure

__all__ = ["new_figure", "token_labels", "heatmap", "line_plot", "to_png", "display_width", "SEQUENTIAL", "DIVERGING"]

SEQUENTIAL = "viridis"   # one map for weights in [0, 1]
DIVERGING = "RdBu_r"     # one map for signed values


def new_figure(figsize=(4.5, 3.2), nrows: int = 1, ncols: int = 1, **kw):
    """(fig, ax) on a pyplot-free Figure; ax is an array when nrows*ncols > 1."""
    for name, n in (("nrows", nrows), ("ncols", ncols)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{name} must be a positive int, got {n!r}")
    fig = Figure(figsize=figsize, dpi=SCREEN_DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=True, **kw)
    return fig, axes


def _array(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().float().numpy()
    return np.asarray(x, dtype=float)


_VISIBLE = {" ": "␣", "\n": "\\n", "\t": "\\t"}


def token_labels(tokens) -> list:
    """Tokens as readable tick labels: a space shows as ␣ and a newline as \\n."""
    if tokens is None or not hasattr(tokens, "__iter__"):
        raise TypeError(f"tokens must be a sequence of tokens (a str or a list), got {type(tokens).__name__}")
    return ["".join(_VISIBLE.get(ch, ch) for ch in str(t)) for t in tokens]


def heatmap(weights, x_labels: Optional[Sequence[str]] = None, y_labels: Optional[Sequence[str]] = None,
            ax=None, title: str = "", cmap: str = SEQUENTIAL, vmin=None, vmax=None, annotate: bool = False,
            xlabel: str = "", ylabel: str = "", colorbar: bool = True) -> Figure:
    """A (rows, cols) matrix as a heatmap, rows = queries (y), columns = keys (x), with token labels."""
    w = _array(weights)
    if w.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D matrix, got shape {w.shape}")
    for labels, n, axis in ((x_labels, w.shape[1], "x_labels"), (y_labels, w.shape[0], "y_labels")):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{axis} has {len(labels)} entries but the matrix has {n} along that axis")
        for i, label in enumerate(labels or []):
            _check_mathtext(label, f"{axis}[{i}]")
    if ax is None:
        fig, ax = new_figure(figsize=(max(3.0, 0.38 * w.shape[1] + 1.6), max(2.6, 0.34 * w.shape[0] + 1.2)))
    fig = ax.figure
    im = ax.imshow(w, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    if x_labels is not None:
        xl = token_labels(x_labels)
        ax.set_xticks(range(len(xl)), xl, rotation=90 if max(map(len, xl), default=0) > 2 else 0)
    if y_labels is not None:
        ax.set_yticks(range(len(y_labels)), token_labels(y_labels))
    if annotate:
        mid = (np.nanmax(w) + np.nanmin(w)) / 2
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="black" if w[i, j] > mid else "white")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if colorbar:
        fig.colorbar(im, ax=ax, shrink=0.8)
    return fig


def line_plot(x, series: Dict[str, Sequence[float]], xlabel: str, ylabel: str, title: str = "",
              logx: bool = False, logy: bool = False, ax=None, marker: str = "o") -> Figure:
    """One line per entry of `series` (label -> y values over `x`), with a legend."""
    xs = _array(x)
    if ax is None:
        fig, ax = new_figure()
    for label, ys in series.items():
        ys = _array(ys)
        if ys.shape != xs.shape:
            raise ValueError(f"series {label!r} has {ys.shape[0] if ys.ndim else 0} values, x has {len(xs)}")
        ax.plot(xs, ys, marker=marker, markersize=3, label=label)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=8)
    return ax.figure


SCREEN_DPI = 80   # a figure's size on the page: figsize (inches) x 80 CSS pixels
PIXEL_RATIO = 2   # PNGs carry twice as many pixels, so they stay sharp on high-density screens


def to_png(fig: Figure, dpi: Optional[int] = None) -> bytes:
    """PNG bytes of a figure at PIXEL_RATIO x SCREEN_DPI (default), without software/date metadata."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi or SCREEN_DPI * PIXEL_RATIO, metadata={"Software": None})
    return buf.getvalue()


def display_width(fig: Figure) -> int:
    """The width in CSS pixels a figure is shown at (its PNG has PIXEL_RATIO times as many)."""
    return round(fig.get_figwidth() * SCREEN_DPI)


def _show_figures_inline() -> bool:
    """Let IPython display our pyplot-free Figures as small PNGs when one is a cell's result."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with Jupyter
        return False
    shell = get_ipython()
    if shell is None:
        return False
    # (data, metadata): the PNG has PIXEL_RATIO x the pixels, shown at its screen width
    shell.display_formatter.formatters["image/png"].for_type(
        Figure, lambda fig: (to_png(fig), {"width": display_width(fig)}))
    return True


_show_figures_inline()


def _check_mathtext(label, name: str) -> None:
    """A label with an even number of unescaped $ is drawn as TeX: fail here, naming it, if matplotlib cannot parse it
    (else the figure fails later, when it is drawn, with a parser's message that names no label)."""
    from matplotlib import cbook
    from matplotlib.mathtext import MathTextParser

    if isinstance(label, str) and cbook.is_math_text(label):
        try:
            MathTextParser("path").parse(label)
        except ValueError as e:
            raise ValueError(f"{name}={label!r} is not valid mathtext ({str(e).splitlines()[-1].strip()}); write "
                             r"\$ to show a dollar sign as itself") from None
