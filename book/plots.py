"""Figures for the chapters: attention-style heatmaps, line plots, PNG export.

Figures are made with matplotlib.figure.Figure, not pyplot, so a figure drawn for a slider frame
is not also shown inline. Make a figure the last expression of a cell to show it.

Every figure carries alt text made from its data (`alt_text`): what it shows and its key values, e.g. "row 'sat'
puts 0.71 on 'cat'". `heatmap`, `line_plot` and book.diagrams.Diagram describe what they draw; anything else drawn
on an axes (lines, bars, points, images) is described from the artists themselves; an explicit `alt=` (of
new_figure, heatmap, line_plot, Diagram) replaces the description. In a notebook the PNG output carries it as output
metadata {"image/png": {"alt": ...}} (the convention of IPython.display.Image and nbconvert; myst-nb 1.x reads only
width and height there, so the site's _ext/figure_alt.py writes it into the page's <img alt>), and slider frames
(book.widgets) carry the alt of the figure drawn for their value.
"""
from __future__ import annotations

import io
from typing import Dict, Optional, Sequence

import numpy as np
from matplotlib.figure import Figure

__all__ = ["new_figure", "token_labels", "heatmap", "line_plot", "to_png", "display_width", "alt_text", "SEQUENTIAL",
           "DIVERGING"]

SEQUENTIAL = "viridis"   # one map for weights in [0, 1]
DIVERGING = "RdBu_r"     # one map for signed values


def new_figure(figsize=(4.5, 3.2), nrows: int = 1, ncols: int = 1, alt: Optional[str] = None, **kw):
    """(fig, ax) on a pyplot-free Figure; ax is an array when nrows*ncols > 1. `alt` replaces the alt text described
    from what is drawn (see alt_text)."""
    for name, n in (("nrows", nrows), ("ncols", ncols)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{name} must be a positive int, got {n!r}")
    fig = Figure(figsize=figsize, dpi=SCREEN_DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=True, **kw)
    _set_alt(fig, alt)
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
            xlabel: str = "", ylabel: str = "", colorbar: bool = True, alt: Optional[str] = None) -> Figure:
    """A (rows, cols) matrix as a heatmap, rows = queries (y), columns = keys (x), with token labels.
    Its alt text names each row's largest entry (or the strongest cells of a big matrix); `alt` replaces it."""
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
    if annotate:   # black on light cells, white on dark ones: by the luminance of the colour drawn
        rgba = im.cmap(im.norm(w))
        light = 0.2126 * rgba[..., 0] + 0.7152 * rgba[..., 1] + 0.0722 * rgba[..., 2] > 0.5
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="black" if light[i, j] else "white")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if colorbar:
        fig.colorbar(im, ax=ax, shrink=0.8)
    xl = None if x_labels is None else token_labels(x_labels)
    yl = None if y_labels is None else token_labels(y_labels)
    # described when shown, so a title or label set on the axes afterwards is in it
    ax._book_alt = lambda: _matrix_alt(w, xl, yl, ax.get_title(), ax.get_xlabel(), ax.get_ylabel())
    _set_alt(ax, alt)
    return fig


def line_plot(x, series: Dict[str, Sequence[float]], xlabel: str, ylabel: str, title: str = "",
              logx: bool = False, logy: bool = False, ax=None, marker: str = "o", alt: Optional[str] = None,
              colors: Optional[Dict[str, str]] = None) -> Figure:
    """One line per entry of `series` (label -> y values over `x`), with a legend. Its alt text gives each series'
    first, last and extreme values; `alt` replaces it. `colors`: label -> colour, for the labels that should keep
    one colour across a chapter's figures (the others take matplotlib's cycle)."""
    xs = _array(x)
    if ax is None:
        fig, ax = new_figure()
    for label, ys in series.items():
        ys = _array(ys)
        if ys.shape != xs.shape:
            raise ValueError(f"series {label!r} has {ys.shape[0] if ys.ndim else 0} values, x has {len(xs)}")
        ax.plot(xs, ys, marker=marker, markersize=3, label=label, **({"color": colors[label]}
                                                                    if colors and label in colors else {}))
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=8)
    drawn = [(str(k), xs, _array(v)) for k, v in series.items()]
    ax._book_alt = lambda: _lines_alt(ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), drawn, logx, logy)
    _set_alt(ax, alt)
    return ax.figure


SCREEN_DPI = 80   # a figure's size on the page: figsize (inches) x 80 CSS pixels
PIXEL_RATIO = 2   # PNGs carry twice as many pixels, so they stay sharp on high-density screens


def to_png(fig: Figure, dpi: Optional[int] = None, palette: bool = False) -> bytes:
    """PNG bytes of a figure at PIXEL_RATIO x SCREEN_DPI (default), without software/date metadata.

    palette=True stores it with 256 colours (a slider's frames: a plot's few colours and a colour map's steps fit;
    the file is about a third of the size, so a page of sliders loads faster)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi or SCREEN_DPI * PIXEL_RATIO, metadata={"Software": None})
    if not palette:
        return buf.getvalue()
    from PIL import Image

    small = io.BytesIO()
    Image.open(io.BytesIO(buf.getvalue())).convert("RGB").quantize(256).save(small, "PNG", optimize=True)
    return small.getvalue()


def display_width(fig: Figure) -> int:
    """The width in CSS pixels a figure is shown at (its PNG has PIXEL_RATIO times as many)."""
    return round(fig.get_figwidth() * SCREEN_DPI)




# ---- alt text: what a figure shows and its key values, made from the data it draws ----------------------------
ALT_MAX_CHARS = 1200   # a screen reader reads all of it: the rest is cut off with an ellipsis
_MAX_ROWS = 10         # a heatmap with more rows names its strongest cells instead of every row's maximum
_MAX_ITEMS = 8         # lines, bars or cells named one by one; more are counted


def _num(v) -> str:
    """A value as a reader would say it: 3 significant digits, thousands grouped."""
    v = float(v)
    if not np.isfinite(v):
        return str(v)
    if abs(v) >= 1000 and v == round(v):
        return f"{v:,.0f}"
    return f"{v:.3g}"


def _set_alt(target, alt) -> None:
    """Store explicit or described alt text on a Figure or an Axes (None keeps what is there)."""
    if alt is None:
        return
    if not isinstance(alt, str) or not alt.strip():
        raise ValueError(f"alt must be a non-empty str describing the figure, got {alt!r}")
    target._book_alt = alt.strip()


def _sentence(parts) -> str:
    return "; ".join(p for p in parts if p)


def _axis_phrase(name: str, label: str, lo, hi, log: bool = False) -> str:
    scale = ", log scale" if log else ""
    return f"{name}{' (' + label + ')' if label else ''} from {_num(lo)} to {_num(hi)}{scale}"


def _matrix_alt(w: np.ndarray, x_labels=None, y_labels=None, title: str = "", xlabel: str = "",
                ylabel: str = "") -> str:
    """A heatmap in words: its size, value range and where the weight goes (each row's largest entry, or the
    strongest cells of a big matrix)."""
    rows, cols = w.shape
    xl = list(x_labels) if x_labels is not None else [str(j) for j in range(cols)]
    yl = list(y_labels) if y_labels is not None else [str(i) for i in range(rows)]
    head = f"{title.strip()}: " if title.strip() else ""
    what = (f"{head}heatmap of {rows} rows{' (' + ylabel + ')' if ylabel else ''} by {cols} columns"
            f"{' (' + xlabel + ')' if xlabel else ''}")
    if not np.isfinite(w).any():
        return f"{what}; no finite values"
    finite = np.where(np.isfinite(w), w, -np.inf)
    parts = [what, f"values from {_num(np.nanmin(np.where(np.isfinite(w), w, np.nan)))} to {_num(finite.max())}"]
    if rows == cols > 1 and xl == yl and np.allclose(np.diag(finite), finite.max()):
        # a similarity matrix: each row is largest on its own column; say so once, then name the strongest pairs
        parts.append(f"every row has the largest value {_num(finite.max())} on its own column (the diagonal)")
        finite = finite.copy()
        np.fill_diagonal(finite, -np.inf)
        off = finite[np.isfinite(finite)]
        if off.size and off.min() == off.max():
            return _sentence(parts + [f"every other entry is {_num(off[0])}"])
        order = [k for k in np.argsort(finite, axis=None)[::-1] if np.isfinite(finite.flat[k])]
        pairs = []
        for i, j in (np.unravel_index(k, w.shape) for k in order):
            if (j, i) not in pairs:
                pairs.append((i, j))
            if len(pairs) == _MAX_ITEMS // 2:
                break
        if pairs:
            parts.append("strongest pairs off the diagonal: " + ", ".join(f"'{yl[i]}' and '{xl[j]}' {_num(w[i, j])}"
                                                                         for i, j in pairs))
    elif rows <= _MAX_ROWS:
        picks = [(i, int(np.argmax(finite[i]))) for i in range(rows) if np.isfinite(finite[i]).any()]
        parts.append(", ".join(f"row '{yl[i]}' puts {_num(w[i, j])} on '{xl[j]}'" for i, j in picks))
    else:
        order = np.argsort(finite, axis=None)[::-1][:_MAX_ITEMS]
        cells = [np.unravel_index(k, w.shape) for k in order]
        parts.append("strongest cells: " + ", ".join(f"row '{yl[i]}' column '{xl[j]}' {_num(w[i, j])}"
                                                     for i, j in cells))
    return _sentence(parts)


def _series_phrase(label: str, xs: np.ndarray, ys: np.ndarray) -> str:
    ok = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[ok], ys[ok]
    if len(ys) == 0:
        return f"'{label}': no finite values"
    if len(ys) == 1:
        return f"'{label}': {_num(ys[0])} at x={_num(xs[0])}"
    text = f"'{label}' goes from {_num(ys[0])} at x={_num(xs[0])} to {_num(ys[-1])} at x={_num(xs[-1])}"
    lo, hi = int(np.argmin(ys)), int(np.argmax(ys))
    ends = {_num(ys[0]), _num(ys[-1])}   # an extreme that reads like an end value says nothing new
    extremes = [f"lowest {_num(ys[lo])} at x={_num(xs[lo])}" if _num(ys[lo]) not in ends else "",
                f"highest {_num(ys[hi])} at x={_num(xs[hi])}" if _num(ys[hi]) not in ends else ""]
    extremes = [e for e in extremes if e]
    return text + (f" ({', '.join(extremes)})" if extremes else "")


def _lines_alt(title: str, xlabel: str, ylabel: str, series, logx: bool = False, logy: bool = False) -> str:
    """Line plots in words: the axes, then each series' start, end and extremes (series = [(label, xs, ys)])."""
    head = f"{title.strip()}: " if title.strip() else ""
    xs_all = np.concatenate([np.asarray(x, float) for _, x, _ in series]) if series else np.array([])
    kind = f"{head}line plot of {ylabel or 'y'} against {xlabel or 'x'}"
    parts = [kind]
    if xs_all.size and np.isfinite(xs_all).any():
        parts.append(f"x from {_num(np.nanmin(xs_all))} to {_num(np.nanmax(xs_all))}"
                     + (" (log scale)" if logx else ""))
    if logy:
        parts.append("y on a log scale")
    parts += [_series_phrase(lab, np.asarray(x, float), np.asarray(y, float)) for lab, x, y in series[:_MAX_ITEMS]]
    if len(series) > _MAX_ITEMS:
        parts.append(f"and {len(series) - _MAX_ITEMS} more lines")
    return _sentence(parts)


def _tick_names(axis, n: int):
    """Category names along an axis from its tick labels at 0..n-1 (heatmaps, bar charts with named bars), else
    None (a numeric axis)."""
    from matplotlib.category import StrCategoryFormatter
    from matplotlib.ticker import FixedFormatter, FuncFormatter
    fmt = axis.get_major_formatter()
    if not isinstance(fmt, (FixedFormatter, FuncFormatter, StrCategoryFormatter)):
        return None
    locs = list(axis.get_majorticklocs())
    names = dict(zip((round(float(v)) for v in locs), fmt.format_ticks(locs)))
    return [names.get(i, str(i)) for i in range(n)] if names else None


_MATH = {"alpha": "α", "beta": "β", "gamma": "γ", "theta": "θ", "sigma": "σ", "Sigma": "Σ", "sum": "Σ", "mu": "μ",
         "times": "×", "cdot": "·", "top": "ᵀ", "sqrt": "√", "to": "→", "rightarrow": "→", "leftarrow": "←",
         "odot": "⊙", "oplus": "⊕", "ell": "ℓ", "infty": "∞", "approx": "≈", "le": "≤", "ge": "≥", "lambda": "λ",
         "pi": "π", "tau": "τ", "phi": "φ", "epsilon": "ε", "omega": "ω", "Delta": "Δ", "nabla": "∇"}


def _plain_math(text: str) -> str:
    """Mathtext ($...$) in words for alt text ($\\overrightarrow{h}_1$ -> h→_1, $\\alpha_t$ -> α_t); text outside
    $...$ (e.g. the token label \\n) is kept; one line."""
    import re

    def words(m):
        t = re.sub(r"\\overrightarrow\{([^{}]*)\}", r"\1→", m.group(1))
        t = re.sub(r"\\overleftarrow\{([^{}]*)\}", r"\1←", t)
        t = re.sub(r"\\[A-Za-z]+\{([^{}]*)\}", r"\1", t) if not re.search(r"\\(sum|sqrt)\b", t) else t
        t = re.sub(r"\\([A-Za-z]+)", lambda g: _MATH.get(g.group(1), g.group(1)), t)
        return t.replace("{", "").replace("}", "").replace("\\", "")
    return " ".join(re.sub(r"\$([^$]*)\$", words, str(text)).split())


def _label(artist, k: int, kind: str) -> str:
    lab = artist.get_label()
    return str(lab) if lab and not str(lab).startswith("_") else (f"{kind} {k + 1}" if k else kind)


def _line_names(ax, lines) -> list:
    """A name per line: its legend label; an unlabelled line takes the label of a labelled line drawn alike (a legend
    entry drawn apart, e.g. one label for several seeds' lines), numbered ("RNN #2"), else "line k". "Alike" is tried
    from the closest match down: colour, line style, marker and width; then colour, style and marker. Where lines
    alike carry several labels, the nearest labelled line drawn before it names it. A line that shares only its colour
    with a label is named as such ("a line coloured like 'RNN' #1"), not as one of that label's lines; markers
    without a line, coloured like a labelled line, are its seeds' dots ("RNN, seeds #1")."""
    from matplotlib.colors import to_hex

    keys = (lambda ln: (to_hex(ln.get_color()), ln.get_linestyle(), str(ln.get_marker()), round(ln.get_linewidth(), 2)),
            lambda ln: (to_hex(ln.get_color()), ln.get_linestyle(), str(ln.get_marker())),
            lambda ln: to_hex(ln.get_color()))
    drawn = list(ax.get_lines())
    labelled = [(i, ln) for i, ln in enumerate(drawn) if not str(ln.get_label()).startswith("_")]

    def base_of(ln):
        at = next((i for i, d in enumerate(drawn) if d is ln), len(drawn))
        for n, key in enumerate(keys):
            alike = [(i, str(d.get_label())) for i, d in labelled if key(d) == key(ln)]
            if not alike:
                continue
            before = [name for i, name in alike if i < at]
            name = alike[0][1] if len({a for _, a in alike}) == 1 else before[-1] if before else alike[0][1]
            if n == len(keys) - 1 and ln.get_linestyle() in ("None", "", " ") and str(ln.get_marker()) != "None":
                return f"{name}, seeds"          # markers only, coloured like a labelled line: its seeds' dots
            return name if n < len(keys) - 1 else f"a line coloured like '{name}'"
        return None

    names, seen = [], {}
    for k, ln in enumerate(lines):
        own = str(ln.get_label())
        if not own.startswith("_"):
            names.append(own)
            continue
        base = base_of(ln)
        if base is None:
            names.append(_label(ln, k, "line"))
        else:
            seen[base] = seen.get(base, 0) + 1
            names.append(f"{base} #{seen[base]}")
    return names


def _describe_axes(ax) -> str:
    """An axes in words, from the artists drawn on it: images, lines, bars, points; axes without data give their
    title and texts (e.g. a diagram drawn with patches)."""
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer
    from matplotlib.text import Annotation
    title = ax.get_title().strip()
    xlabel, ylabel = ax.get_xlabel(), ax.get_ylabel()
    parts = []
    for im in ax.get_images():
        w = np.ma.filled(np.ma.asarray(im.get_array(), dtype=float), np.nan)
        if w.ndim == 2:
            parts.append(_matrix_alt(w, _tick_names(ax.xaxis, w.shape[1]), _tick_names(ax.yaxis, w.shape[0]),
                                     title, xlabel, ylabel))
    if parts:
        return _sentence(parts)
    lines = [ln for ln in ax.get_lines() if ln.get_visible() and len(ln.get_xdata()) > 0]
    # axhline / axvline: a reference level (drawn in axes units along the other axis)
    transforms = (("y", ax.get_yaxis_transform()), ("x", ax.get_xaxis_transform()))
    refs = [(axis, ln) for ln in lines for axis, tf in transforms if ln.get_transform() == tf]
    data = [ln for ln in lines if ln not in [r for _, r in refs]]
    series = [(name, _array(ln.get_xdata()), _array(ln.get_ydata())) for name, ln in zip(_line_names(ax, data), data)]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    points = [c for c in ax.collections if isinstance(c, PathCollection) and len(c.get_offsets())]
    arrows = [t for t in ax.texts if isinstance(t, Annotation) and t.arrow_patch is not None]
    if arrows and not (series or bars or points or refs):   # e.g. vectors drawn as arrows from the origin
        shown = ", ".join(f"from ({_num(t.xyann[0])}, {_num(t.xyann[1])}) to ({_num(t.xy[0])}, {_num(t.xy[1])})"
                          for t in arrows[:_MAX_ITEMS])
        more = f" and {len(arrows) - _MAX_ITEMS} more" if len(arrows) > _MAX_ITEMS else ""
        return _sentence([title, f"{len(arrows)} arrow{'' if len(arrows) == 1 else 's'}: {shown}{more}"])
    if not (series or bars or points or refs):
        texts = [t.get_text().strip() for t in ax.texts if t.get_text().strip()]
        return _sentence([title, "labels: " + ", ".join(texts) if texts else ""]) or "an empty figure"
    names = _tick_names(ax.yaxis, max([round(v) for v in ax.yaxis.get_majorticklocs()] + [0]) + 1)
    dots = _dot_rows(ax, names, title, xlabel, points, data, refs) if names is not None and not bars else None
    if dots is not None:
        return dots
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    head = f"{title}: " if title else ""
    parts.append(f"{head}chart of {ylabel or 'y'} against {xlabel or 'x'}")
    for name, axis, label, (lo, hi), scale in (("x", ax.xaxis, xlabel, (x0, x1), ax.get_xscale()),
                                               ("y", ax.yaxis, ylabel, (y0, y1), ax.get_yscale())):
        if _tick_names(axis, 1) is None:   # a numeric axis: its range (named bars say their own names)
            parts.append(_axis_phrase(name, label, min(lo, hi), max(lo, hi), scale == "log"))
    parts += [_series_phrase(lab, xs, ys) for lab, xs, ys in series[:_MAX_ITEMS]]
    if len(series) > _MAX_ITEMS:
        parts.append(f"and {len(series) - _MAX_ITEMS} more lines")
    for k, c in enumerate(bars):
        horizontal = getattr(c, "orientation", "vertical") == "horizontal"
        vals = [p.get_width() if horizontal else p.get_height() for p in c.patches]
        names = _tick_names(ax.yaxis if horizontal else ax.xaxis, len(vals))
        if names is None:
            names = [_num(p.get_y() + p.get_height() / 2 if horizontal else p.get_x() + p.get_width() / 2)
                     for p in c.patches]
        items = ", ".join(f"{n} {_num(v)}" for n, v in list(zip(names, vals))[:_MAX_ITEMS])
        more = f" and {len(vals) - _MAX_ITEMS} more" if len(vals) > _MAX_ITEMS else ""
        parts.append(f"{_label(c, k, 'bars')}: {items}{more}")
    for k, c in enumerate(points):
        xy = np.asarray(c.get_offsets(), float)
        parts.append(f"{len(xy)} {_label(c, k, 'points')} with x from {_num(xy[:, 0].min())} to "
                     f"{_num(xy[:, 0].max())} and y from {_num(xy[:, 1].min())} to {_num(xy[:, 1].max())}")
    parts += [_ref_phrase(axis, ln) for axis, ln in refs]
    return _sentence(parts)


def _ref_phrase(axis: str, ln) -> str:
    """An axhline/axvline in words, with its legend label if it has one."""
    at = _array(ln.get_ydata() if axis == "y" else ln.get_xdata())[0]
    name = f"'{ln.get_label()}' " if not str(ln.get_label()).startswith("_") else ""
    return f"{name}reference line at {axis}={_num(at)}"


def _dot_rows(ax, names, title, xlabel, points, lines, refs) -> Optional[str]:
    """A dot plot (named rows on the y axis, values along x) in words: each row's values, smallest first. Dots are
    points and marker-only lines within a quarter row of a name (solid lines, e.g. a mean's tick, are left out)."""
    rows = {i: [] for i in range(len(names))}
    xy = [np.asarray(c.get_offsets(), float) for c in points]
    xy += [np.column_stack([_array(ln.get_xdata()), _array(ln.get_ydata())]) for ln in lines
           if ln.get_linestyle() in ("None", "", " ")]
    for x, y in (pt for arr in xy for pt in arr):
        if np.isfinite(x) and abs(y - round(y)) <= 0.25 and round(y) in rows:
            rows[round(y)].append(x)
    if not any(rows.values()):
        return None   # custom tick labels on a numeric axis: not a dot plot
    head = f"{title}: " if title else ""
    parts = [f"{head}dot plot of {xlabel or 'x'} for {len(names)} rows"]
    for i in sorted(rows, reverse=True):   # top row first, as a reader sees them
        if rows[i]:
            xs = sorted(rows[i])
            more = f" and {len(xs) - _MAX_ITEMS} more" if len(xs) > _MAX_ITEMS else ""
            parts.append(f"{names[i]}: {', '.join(_num(x) for x in xs[:_MAX_ITEMS])}{more}")
    parts += [_ref_phrase(axis, ln) for axis, ln in refs]
    return _sentence(parts)


def _alt_of(obj) -> Optional[str]:
    alt = getattr(obj, "_book_alt", None)
    return alt() if callable(alt) else alt


def alt_text(fig: Figure) -> str:
    """The figure's alt text: an explicit one (alt= of new_figure or Diagram), else its title and each panel's
    description (set by heatmap and line_plot, else described from what is drawn), at most ALT_MAX_CHARS."""
    if not isinstance(fig, Figure):
        raise TypeError(f"alt_text needs a matplotlib Figure, got {type(fig).__name__}")
    text = _alt_of(fig)
    if text is None:
        axes = [ax for ax in fig.axes if ax.get_visible() and not hasattr(ax, "_colorbar")]
        panels = []   # [axes of one panel]: an axes made by twinx/twiny joins the panel it shares
        for ax in axes:
            home = next((p for p in panels if ax in ax._twinned_axes.get_siblings(p[0])), None)
            home.append(ax) if home is not None else panels.append([ax])
        described = ["; second axis: ".join(_alt_of(ax) or _describe_axes(ax) for ax in p) for p in panels]
        if len(described) > 1:
            described = [f"panel {k + 1} of {len(described)}, {d}" for k, d in enumerate(described)]
        suptitle = fig._suptitle.get_text().strip() if fig._suptitle is not None else ""
        text = ". ".join(t for t in [suptitle] + described if t) or "an empty figure"
    text = _plain_math(text)   # one line, mathtext in words
    return text if len(text) <= ALT_MAX_CHARS else text[:ALT_MAX_CHARS - 1].rstrip() + "…"


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
        Figure, lambda fig: (to_png(fig), {"width": display_width(fig), "alt": alt_text(fig)}))
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
