"""Chapter 4, self-attention: the Q/K/V drawing, the CPU memory peak it measures, the attention exercise checker,
the live section (a typed line read twice by the trained layer: exported for the website, a widget in a kernel), and
the measurements' plumbing (recorded tables read and printed, claims asserted, figures drawn, numbers glued).
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from ..checks import returned
from ..diagrams import Diagram
from ..language import _

__all__ = ["draw_qkv_flow", "check_attention", "peak_cpu_memory", "read_twice", "export_read_twice",
           "load_read_twice", "live_read_twice", "MAX_LINE", "plain_log_ticks", "draw_two_threads",
           "check_and_glue_read_twice", "ScaleRecord", "check_and_glue_scale", "check_and_glue_scale_live",
           "draw_scale_curves", "RECALL_NAMES", "recall_record", "check_recall_live", "draw_recall",
           "draw_softmax_stats"]


def draw_qkv_flow() -> Figure:
    """Self-attention's data flow with every shape: X -> W_Q, W_K, W_V -> Q, K, V -> QK^T/sqrt(d_k) -> mask ->
    softmax -> weights x V -> output. Chapter 4.

    Example: fig = draw_qkv_flow()   # a Figure; the chapter shows it, tests read its labels
    """
    d = Diagram(15.2, 6.6, title="Self-attention: one sequence in, one sequence out, no loop over positions")
    bw, bh = 1.7, 1.0                                       # box size; arrows run edge to edge
    d.box(1.1, 3.5, "X\ntokens\nT × $d_{model}$", role="embed", w=1.6, h=1.3)
    rows = {"Q": 5.5, "K": 3.5, "V": 1.3}
    for name, y in rows.items():
        d.arrow((1.9, 3.5), (2.55, y), curve=0.0)
        d.box(3.4, y, f"$W_{name}$\n$d_{{model}}$ × $d_{name.lower() if name != 'Q' else 'k'}$", w=bw, h=bh)
        d.arrow((4.25, y), (4.95, y))
        dim = "$d_v$" if name == "V" else "$d_k$"
        d.box(5.8, y, f"{name}\nT × {dim}", role="attn", w=bw, h=bh)
    d.arrow((6.65, 5.5), (7.55, 4.75))
    d.arrow((6.65, 3.5), (7.55, 4.25))
    d.box(8.5, 4.5, "$QK^\\top / \\sqrt{d_k}$\nscores, T × T", role="attn", w=1.9, h=bh)
    d.arrow((9.45, 4.5), (10.15, 4.5))
    d.box(11.0, 4.5, "mask\n(optional)\nT × T", role="plain", w=bw, h=bh + 0.2, dashed=True)
    d.arrow((11.85, 4.5), (12.55, 4.5))
    d.box(13.5, 4.5, "softmax\nper row\nT × T", role="plain", w=1.9, h=bh + 0.2)
    d.arrow((13.5, 3.9), (13.5, 1.85), text="weights", text_offset=(0.45, 0.0))
    d.arrow((6.65, 1.3), (12.55, 1.3), text="values")
    d.box(13.5, 1.3, "weights × V\noutput\nT × $d_v$", role="attn", w=1.9, h=bh + 0.1)
    d.text(8.5, 3.2, "every query against every key:\nall T × T scores at once", fontsize=8, italic=True)
    return d.figure


def check_attention(fn: Callable, seed: int = 0) -> bool:
    """Self-check for the chapter 4 exercise: does `fn(q, k, v, mask)` compute masked attention output?

    Tries shapes with all dims distinct (B=2, H=3, Tq=5, Tk=7, D=8, Dv=4), with and without a mask;
    `fn` may return out or (out, weights). Raises AssertionError with a hint on the first mismatch.
    """
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g), torch.randn(2, 3, 7, 8, generator=g),
               torch.randn(2, 3, 7, 4, generator=g))
    mask = torch.rand(5, 7, generator=g) > 0.4
    mask[:, 0] = True  # every query keeps at least one key
    for m in (None, mask):
        got = returned(fn(q, k, v, m))
        got = got[0] if isinstance(got, tuple) else got
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        if tuple(got.shape) != tuple(want.shape):
            raise AssertionError(_("output should have shape {want}, got {got}")
                                 .format(want=tuple(want.shape), got=tuple(got.shape)))
        if not torch.allclose(got, want, atol=1e-5, rtol=1e-4):
            hint = _("with the mask") if m is not None else _("without a mask (check the 1/sqrt(D) scale)")
            raise AssertionError(_("values differ from F.scaled_dot_product_attention {hint}").format(hint=hint))
    return True


@contextmanager
def _silence_fd2() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null: the profiler's C++ layer logs there on every start/stop."""
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_cpu_memory(fn: Callable[[], object]) -> int:
    """Peak bytes of CPU memory that `fn()` allocates beyond what existed before, measured. Chapter 4.

    Replays torch.profiler's allocation and free events in time order (allocations at an op's start,
    frees at its end), so kernel-internal buffers count too. CPU tensors only.
    """
    from torch.profiler import ProfilerActivity, profile

    with _silence_fd2(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    steps = sorted((e.time_range.start if e.self_cpu_memory_usage > 0 else e.time_range.end,
                    e.self_cpu_memory_usage) for e in prof.events() if e.self_cpu_memory_usage)
    live = peak = 0
    for _time, delta in steps:
        live += delta
        peak = max(peak, live)
    return peak


# ---- the live section: the reader's own line, read twice (the website runs the exported layer; a kernel, this) ----

READ_TWICE_FORMAT = "book-live-reread/1"   # the JSON's layout; _ext/live_gpt.js checks it
MAX_LINE = 64                              # characters of a typed line: the map stays readable


class _ReadTwiceGraph(torch.nn.Module):
    """x (B, T) -> (logits (B, T, V), weights (B, T, T)): the exported graph of a OneLayerAttention."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        logits = self.model(x)
        return logits, self.model.weights


def _line_ids(tok, line: str) -> list:
    if not isinstance(line, str):
        raise TypeError(f"line must be a str, got {type(line).__name__}")
    return [tok.stoi[c] for c in line if c in tok.stoi][-MAX_LINE:]


@torch.no_grad()
def read_twice(model, tok, line: str) -> dict:
    """The layer on `line` read twice (its known characters, the last MAX_LINE): {"text": the line read,
    "predicted": the character it predicts at each place of the second copy, "right": how many are the line's,
    "weights": (n, n) tensor, row i = the query predicting character i, column j = character j of the first copy}.
    """
    ids = _line_ids(tok, line)
    if not ids:
        raise ValueError(f"line must hold at least one character of the vocabulary, got {line!r}")
    n = len(ids)
    x = torch.tensor([ids + ids[:-1]], device=next(model.parameters()).device)
    was_training = model.training
    model.eval()
    try:
        logits = model(x)
    finally:
        model.train(was_training)
    rows = slice(n - 1, 2 * n - 1)                      # the queries that predict the second copy's characters
    predicted = logits[0, rows].argmax(-1).tolist()
    text = tok.decode(ids)
    return {"text": text, "predicted": tok.decode(predicted), "right": sum(p == i for p, i in zip(predicted, ids)),
            "weights": model.weights[0, rows, :n].float().cpu()}


def export_read_twice(model, tok, path, *, example: str, provenance: dict) -> dict:
    """Export the chapter's trained OneLayerAttention for the website (book.export.export_onnx): the graph, and a
    JSON with the vocabulary, MAX_LINE, the provenance and `example` read twice (shown while the page loads)."""
    from ..export import _vocab, example_outputs, export_onnx

    vocab = _vocab(tok, model.embed.num_embeddings)
    shown = read_twice(model, tok, example)
    meta = {"format": READ_TWICE_FORMAT, "kind": "read-twice",
            "inputs": {"x": "int64 (B, T): the line, then the line again without its last character"},
            "outputs": {"logits": "float32 (B, T, V)", "weights": "float32 (B, T, T)"},
            "vocab": vocab, "config": {"vocab_size": len(vocab), "d": model.embed.embedding_dim},
            "max_line": MAX_LINE, "provenance": provenance,
            "example": example_outputs(shown)}
    T = torch.export.Dim("T", min=1, max=2 * MAX_LINE - 1)
    ids = _line_ids(tok, example)
    checks = [(torch.tensor([ids + ids[:-1]]),), (torch.arange(2 * MAX_LINE - 1)[None] % len(vocab),)]
    return export_onnx(_ReadTwiceGraph(model), (torch.zeros(1, 5, dtype=torch.long),), path, input_names=["x"],
                       output_names=["logits", "weights"], dynamic_shapes={"x": {1: T}}, meta=meta, verify=checks)


def load_read_twice(path):
    """(book.attention.OneLayerAttention with the export's weights, the JSON) for export_read_twice's files."""
    from ..attention import OneLayerAttention
    from ..export import read_meta, read_weights

    meta = read_meta(path, READ_TWICE_FORMAT, writer="export_read_twice")
    with torch.random.fork_rng(devices=[]):
        model = OneLayerAttention(meta["config"]["vocab_size"], meta["config"]["d"])
    return read_weights(path, model, prefix="model."), meta


def _read_twice_html(shown: dict) -> str:
    import html
    marks = "".join(f'<span style="{"" if p == c else "background:#f4c7c3;"}">{html.escape(p)}</span>'
                    for p, c in zip(shown["predicted"], shown["text"]))
    lines = _("line read twice: {text}\nsecond reading writes: {marks}").format(text=html.escape(shown["text"]),
                                                                              marks=marks)
    score = _("{right} of {n} characters right (red: a miss)").format(right=shown["right"], n=len(shown["text"]))
    return f'<pre style="margin:0">{lines}</pre><p>{score}</p>'


def live_read_twice(model, tok, line: str = "Sweet are the uses of adversity"):
    """The live section for a kernel: a text box for a line; the layer reads it twice and shows what the second
    reading predicts and its attention map (row = a character of the second copy, column = the first copy)."""
    import ipywidgets as widgets
    from ..plots import alt_text, display_width, heatmap, new_figure, to_png
    from ..widgets import frame_html

    box = widgets.Text(value=line, description=_("your line"), layout=widgets.Layout(width="95%"))
    out, picture = widgets.HTML(), widgets.HTML()

    def draw(_change=None):
        if not _line_ids(tok, box.value):
            out.value, picture.value = _("Type a line."), ""
            return
        shown = read_twice(model, tok, box.value)
        chars, n = list(shown["text"]), len(shown["text"])
        side = min(6.5, 1.6 + 0.16 * n)
        fig, ax = new_figure(figsize=(side, side))
        heatmap(shown["weights"], chars, chars[-1:] + chars[:-1], ax=ax, vmin=0, vmax=1, annotate=False,
                xlabel="key: first copy", ylabel="query: second copy")
        picture.value = frame_html(to_png(fig, palette=True), display_width(fig), alt_text(fig))
        out.value = _read_twice_html(shown)

    box.observe(draw, names="value")
    draw()
    section = widgets.VBox([box, out, picture])
    section.draw = draw
    return section


# ---- the chapter's recorded measurements, read, printed, checked, drawn and glued: plumbing out of the reader's cells

def plain_log_ticks(ax, values) -> None:
    """A log x-axis labelled with the measured values in full (64, 128, ...), without crowded minor labels."""
    from matplotlib.ticker import NullLocator

    ax.set_xticks(values, [str(v) for v in values])
    ax.xaxis.set_minor_locator(NullLocator())


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs)


def _glue_spread(name: str, values) -> None:
    """Glue the mean over the seeds with the lowest and highest, '0.25 (0.24–0.27)'; one value in the brackets when
    every seed shows alike, '1.00 (1.00)' (book.results.seed_span)."""
    from ..results import seed_span
    from ..utils import glue

    glue(name, seed_span(values, "{:.2f}"))


def draw_softmax_stats(dims, stats: dict) -> Figure:
    """Left: the weights' entropy against d_k, scaled and unscaled. Right: the gradient's norm at the scores and at q,
    each scaled (dashed, hollow squares) and unscaled (solid, dots), so that a scaled line lying on another shows."""
    from ..plots import new_figure

    fig, (ax1, ax2) = new_figure(figsize=(8.4, 3.2), ncols=2)
    style = {True: dict(ls="--", marker="s", mfc="white", ms=5), False: dict(ls="-", marker="o", ms=4)}
    for scaled in (True, False):
        name = "scaled" if scaled else "unscaled"
        ax1.plot(dims, [r["entropy"] for r in stats[scaled]], color="C0" if scaled else "C1", label=name,
                 **style[scaled])
        for key, color in (("scores", "C0" if scaled else "C1"), ("q", "C2" if scaled else "C3")):
            ax2.plot(dims, [r[key] for r in stats[scaled]], color=color, label=f"at {key}, {name}",
                     zorder=3 if scaled else 2, **style[scaled])
    ax1.set(xscale="log", xlabel="d_k", ylabel="entropy (nats)", title="Unscaled: one-hot weights")
    ax2.set(xscale="log", yscale="log", xlabel="d_k", ylabel="gradient norm",
            title="Less gradient at the scores, more at q")
    for ax in (ax1, ax2):
        ax.legend(fontsize=7)
    return fig


def draw_two_threads() -> Figure:
    """benchmarks/parallel_threads.py's record: each model's time with two threads over its time with one (paired by
    repeat), printed and drawn (median, min-max over the repeats), its numbers and the sentence that reads them
    glued."""
    from matplotlib.ticker import LogLocator, NullFormatter

    from ..plots import _set_alt, new_figure
    from ..results import provenance, read_rows
    from ..utils import glue

    rows, run = read_rows("parallel_threads"), provenance("parallel_threads")
    models = list(dict.fromkeys(r["model"] for r in rows))
    lengths = sorted({int(r["T"]) for r in rows if r["device"] == "cpu"})

    def two_over_one(model, T):
        reading = {(int(r["threads"]), int(r["repeat"])): float(r["seconds"]) for r in rows
                   if r["device"] == "cpu" and r["model"] == model and int(r["T"]) == T}
        return sorted(reading[2, k] / reading[1, k] for t, k in reading if t == 1)

    par = {m: {T: two_over_one(m, T) for T in lengths} for m in models}
    mid = lambda v: v[len(v) // 2]                       # the median of an odd number of repeats
    repeats = len(par[models[0]][lengths[0]])
    print(f"recorded by {run['script']}, {repeats} repeats, {run['wall_s']:.0f} s, {run['date'][:10]}")
    print(f"on {run['cpu']} ({run['cores_available']} cores)")
    print("time with 2 threads / time with 1 (median, min-max over repeats)")
    for m in models:
        print(f"{m:10s} | " + " | ".join(f"T = {T}: {mid(v):.2f} ({v[0]:.2f}-{v[-1]:.2f})" for T, v in par[m].items()))
    fig, ax = new_figure(figsize=(6.4, 3.4))
    for k, m in enumerate(models):
        xs = [T * 1.04 ** (k - 1.5) for T in lengths]     # side by side, so the bars do not hide each other
        med = [mid(par[m][T]) for T in lengths]
        ax.errorbar(xs, med, yerr=[[a - par[m][T][0] for a, T in zip(med, lengths)],
                                   [par[m][T][-1] - a for a, T in zip(med, lengths)]], marker="o", capsize=3, label=m)
    ax.axhline(1.0, color="0.4", lw=0.8, ls="--")
    ax.axhline(0.5, color="0.4", lw=0.8, ls=":")
    ax.set(xscale="log", yscale="log", xlabel="sequence length T", ylabel="time with 2 threads / with 1",
           title="What a second core buys (recorded)")
    plain_log_ticks(ax, lengths)
    ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))     # a ratio: halving and doubling equally far from 1
    ax.yaxis.set_major_formatter("{x:g}")
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.legend(fontsize=8)
    _set_alt(fig, "Time with two threads over time with one against the sequence length T (log scales), the "
                     "median over the repeats with its min-max bar: " + "; ".join(
                         f"{m} " + ", ".join(f"{mid(par[m][T]):.2f} at T = {T}" for T in lengths) for m in models)
                     + ". A dashed line at 1 (no gain), a dotted one at 0.5 (twice as fast).")
    T_big = lengths[-1]
    glue("ch4_par_T", T_big)
    glue("ch4_par_repeats", len(par[models[0]][T_big]))
    glue("ch4_par_cpu", run["cpu"])
    glue("ch4_par_wall", f"{run['wall_s']:.0f}")
    for m, name in zip(models, ["loop", "nnrnn", "attn", "fused"]):
        glue(f"ch4_par_{name}", f"{mid(par[m][T_big]):.2f}")   # recorded: the same on every machine
    gain = {m: mid(par[m][T_big]) for m in models}
    load, cores = run["load_average"][0], run["cores_available"]
    if gain["attention"] < 0.8 and gain["RNN loop"] > 0.9:                 # what the recording shows, in words
        reading = ("Attention's wide products split over the two cores; the Python loop's T small steps cannot, "
                   "because each waits for the one before.")
        if gain["nn.RNN"] < 0.9:
            reading += (" What nn.RNN gained comes from its input products, which it computes for all T steps at "
                        "once before its loop.")
    elif load > cores + 0.5:                                               # other programs held the cores
        reading = (f"This recording does not show that split: it was made while other programs kept the machine "
                   f"busy (load average {load:.1f} on {cores} cores), so a second thread found no free core to run "
                   "on. The counted halves above are the law; rerun python benchmarks/parallel_threads.py on an idle "
                   "machine to see it in seconds.")
    else:
        reading = ("This recording does not show a second core helping attention more than the recurrence: at these "
                   "sizes the split did not pay on this machine. The counted halves above are the law.")
    glue("ch4_par_reading", reading)
    return fig


def check_and_glue_read_twice(seconds: float, copy_acc: float, weight: float, argmax: float) -> None:
    """The trained reader on unseen text: printed, its claim checked, its numbers glued (tolerances from the seeds)."""
    from ..utils import claim, glue

    print(f"trained {seconds:.1f} s; second copy, unseen text: {copy_acc:.0%} of characters right")
    print(f"on the key after the twin: {weight:.0%} of the weight; the largest weight in {argmax:.0%} of rows")
    claim(copy_acc > 0.8 and weight > 0.6 and argmax > 0.8,
          f"the layer should find its place in the first copy: accuracy {copy_acc:.2f}, weight {weight:.2f}, "
          f"argmax {argmax:.2f}")
    glue("ch4_copy_acc", f"{100 * copy_acc:.0f}", tol=8, spread="glue_spread", margin=2)
    glue("ch4_copy_weight", f"{100 * weight:.0f}", tol=10, spread="glue_spread", margin=2)
    glue("ch4_copy_argmax", f"{100 * argmax:.0f}", tol=8, spread="glue_spread", margin=2)


class ScaleRecord:
    """benchmarks/attention_scale.py's record: the same one-layer model at d_k = 256 with and without 1/sqrt(d_k),
    Adam at each of three rates, three seeds, the validation loss every 20 steps. `best[scaled]` is each setting's
    rate with the lowest mean final loss."""

    def __init__(self):
        from ..results import provenance, read_rows

        rows, self.prov = read_rows("attention_scale"), provenance("attention_scale")
        self.seeds = self.prov["seeds"]
        self.rates = sorted({float(r["lr"]) for r in rows})
        self.steps = sorted({int(r["step"]) for r in rows})
        self._values = {}
        for r in rows:
            key = (r["scaled"] == "1", float(r["lr"]), int(r["step"]))
            self._values.setdefault(key, []).append(r)
        self.best = {scaled: min(self.rates, key=lambda lr: _mean(self.recorded(scaled, lr, self.steps[-1])))
                     for scaled in (True, False)}

    def recorded(self, scaled: bool, lr: float, step: int, field: str = "val_loss") -> list:
        """One value per seed."""
        return [float(r[field]) for r in self._values.get((scaled, lr, step), [])]

    def steps_to(self, scaled: bool, nats: float = 1.0) -> list:
        """Each seed's first recorded step below `nats` at the setting's best rate (None: never)."""
        curves = zip(*(self.recorded(scaled, self.best[scaled], s) for s in self.steps))
        return [next((s for s, v in zip(self.steps, c) if v < nats), None) for c in curves]


def check_and_glue_scale(rec: ScaleRecord) -> None:
    """The recorded scale experiment: its table printed (each rate's mean over the seeds [lowest, highest]), every
    seed's order asserted, and the prose's numbers glued."""
    from ..utils import claim, glue

    steps, last = rec.steps, rec.steps[-1]
    print(f"{'':18s} | entropy at step 0 | loss at step {steps[1]:<5d} | loss at step {last}")
    for scaled in (True, False):
        for lr in rec.rates:
            cols = [rec.recorded(scaled, lr, 0, "entropy"), rec.recorded(scaled, lr, steps[1]),
                    rec.recorded(scaled, lr, last)]
            print(f"{'scaled' if scaled else 'unscaled':8s} Adam {lr:<5g}| " + " | ".join(
                f"{_mean(c):.2f} [{min(c):.2f}, {max(c):.2f}]" for c in cols) + (" <- best" if lr == rec.best[scaled]
                                                                                   else ""))
    final = {scaled: rec.recorded(scaled, rec.best[scaled], last) for scaled in (True, False)}
    claim(max(final[True]) < min(final[False]), f"every seed ends better with the scale: {final}")
    for scaled, tag in ((True, "scaled"), (False, "raw")):
        glue(f"ch4_scale_lr_{tag}", f"{rec.best[scaled]:g}")
        glue(f"ch4_scale_ent_{tag}", f"{_mean(rec.recorded(scaled, rec.best[scaled], 0, 'entropy')):.2f}")
        glue(f"ch4_scale_steps_{tag}", ", ".join(str(s) for s in rec.steps_to(scaled)))
        _glue_spread(f"ch4_scale_final_{tag}", final[scaled])
    _glue_spread("ch4_scale_fast_scaled", rec.recorded(True, rec.rates[-1], last))
    _glue_spread("ch4_scale_fast_raw", rec.recorded(False, rec.rates[-1], last))
    glue("ch4_scale_fast_lr", f"{rec.rates[-1]:g}")
    glue("ch4_scale_minutes", f"{rec.prov['wall_s'] / 60:.0f}")
    glue("ch4_scale_last_step", last)


def check_and_glue_scale_live(rec: ScaleRecord, live: dict, steps: int) -> None:
    """The live run (one seed, `steps` steps, each setting at its recorded best rate) is ahead with the scale, as
    every recorded seed is at that step; its losses glued."""
    from ..utils import claim, glue

    gaps = [u - s for s, u in zip(rec.recorded(True, rec.best[True], steps),
                                  rec.recorded(False, rec.best[False], steps))]
    claim(min(gaps) > 0 and live[True] < live[False], f"at step {steps} every recorded seed and the live run should "
          f"be ahead with the scale: recorded gaps {gaps}, live {live[True]:.2f} (scaled) vs {live[False]:.2f}")
    glue("ch4_scale_live_scaled", f"{live[True]:.2f}", tol=0.3, spread="glue_spread", margin=2)
    glue("ch4_scale_live_raw", f"{live[False]:.2f}", tol="any")


def draw_scale_curves(rec: ScaleRecord, live: dict, steps: int) -> Figure:
    """One panel per rate: every seed's validation loss, scaled (blue) and unscaled (red), and the live run at
    `steps` (diamonds) at each setting's best rate."""
    from ..plots import new_figure

    fig, axes = new_figure(figsize=(9.6, 3.2), ncols=len(rec.rates), sharey=True)
    for ax, lr in zip(axes, rec.rates):                    # the same rates and seeds for both settings
        for scaled, color in ((True, "C0"), (False, "C3")):
            for n in range(len(rec.seeds)):
                ax.plot(rec.steps, [rec.recorded(scaled, lr, s)[n] for s in rec.steps], color=color, lw=1,
                        label=f"{'scaled' if scaled else 'unscaled'}: each seed" if n == 0 else None)
            if lr == rec.best[scaled]:
                ax.plot([steps], [live[scaled]], "D", color=color, mec="black",
                        label=f"live run ({'scaled' if scaled else 'unscaled'})")
        ax.set(title=f"Adam {lr:g}", xlabel="training step", yscale="log")
    axes[0].set_ylabel("validation loss (nats)")
    axes[0].legend(fontsize=7)
    return fig


RECALL_NAMES = {"rnn": "RNN", "lstm": "LSTM", "attention": "attention"}


def recall_record() -> dict:
    """benchmarks/recall_models.py's record: {"distances", "steps", "seeds", "wall_s", "lr": each model's rate with
    the best mean validation accuracy, "acc": {(model, k): per-seed accuracy at that rate}, "curves": {model: per
    seed (steps, mean training loss over each 50 steps)}}."""
    from ..results import provenance, read_rows

    rows, prov = read_rows("recall_models"), provenance("recall_models")
    acc = {}
    for r in rows:
        acc.setdefault((r["model"], float(r["lr"]), int(r["k"])), []).append(float(r["acc"]))   # k = 0: validation
    rates = sorted({float(r["lr"]) for r in rows})
    lr = {kind: max(rates, key=lambda x: _mean(acc[kind, x, 0])) for kind in RECALL_NAMES}
    distances = sorted({int(r["k"]) for r in rows} - {0})
    curves = {kind: [] for kind in RECALL_NAMES}
    curve_rows = read_rows("recall_models_curves")
    for kind in RECALL_NAMES:
        for seed in prov["seeds"]:
            run = [r for r in curve_rows if (r["model"], float(r["lr"]), int(r["seed"])) == (kind, lr[kind], seed)]
            curves[kind].append(([int(r["step"]) for r in run], [float(r["train_loss"]) for r in run]))
    return {"distances": distances, "steps": prov["args"]["steps"], "seeds": prov["seeds"], "wall_s": prov["wall_s"],
            "lr": lr, "acc": {(kind, k): acc[kind, lr[kind], k] for kind in RECALL_NAMES for k in distances},
            "curves": curves}


def _far(rec: dict) -> list:
    return [k for k in rec["distances"] if k >= 16]


def check_recall_live(rec: dict, acc_live: dict, seconds: float) -> None:
    """The live recall run (one seed per model, the recorded steps and rates): printed, and checked to land on the
    recorded seeds' side of 0.5 far back (k >= 16) for every model, with attention recalling at every distance."""
    from ..utils import claim

    print(f"live: one seed per model, {rec['steps']} steps each, {seconds:.0f} s in all")
    print("   k |  RNN | LSTM | attention")
    for k in rec["distances"]:
        print(f"{k:4d} | {acc_live['rnn'][k]:.2f} | {acc_live['lstm'][k]:.2f} | {acc_live['attention'][k]:.2f}")
    far = _far(rec)
    for kind in RECALL_NAMES:
        live = _mean(acc_live[kind][k] for k in far)
        seeds = [_mean(rec["acc"][kind, k][n] for k in far) for n in range(len(rec["seeds"]))]
        claim(all((a > 0.5) == (live > 0.5) for a in seeds),
              f"{kind}: mean accuracy at k >= 16, live {live:.2f}, recorded seeds {seeds}")
    claim(min(acc_live["attention"].values()) > 0.9,
          f"attention should recall at every distance: {acc_live['attention']}")


def draw_recall(rec: dict, acc_live: dict) -> Figure:
    """Left: accuracy at distance k, each model's recorded mean with its min-max band and the live run's dots (side
    by side and each its own marker, so none hides another). Right: every recorded seed's training loss. The
    prose's numbers glued; the RNN's loss never falls below 1 nat (asserted)."""
    from ..plots import new_figure
    from ..utils import claim, glue

    distances, n_seeds = rec["distances"], len(rec["seeds"])
    learned_at = lambda kind, n: next((s for s, v in zip(*rec["curves"][kind][n]) if v < 1.0), None)   # 1 nat
    fig, (ax, ax2) = new_figure(figsize=(9.6, 3.6), ncols=2)
    dots = {"rnn": ("s", 0.92, 5), "lstm": ("^", 1.0, 7), "attention": ("o", 1.087, 5)}   # marker, x offset, size
    for kind, color in zip(RECALL_NAMES, ("C1", "C2", "C0")):
        name = RECALL_NAMES[kind]
        runs = [[rec["acc"][kind, k][n] for k in distances] for n in range(n_seeds)]
        ax.fill_between(distances, [min(c) for c in zip(*runs)], [max(c) for c in zip(*runs)], color=color, alpha=0.25)
        ax.plot(distances, [_mean(c) for c in zip(*runs)], color=color, label=f"{name}: recorded mean, min-max",
                ls="--" if kind == "attention" else "-")    # dashed: the LSTM's mean shows where both sit at 1
        marker, shift, size = dots[kind]
        ax.plot([k * shift for k in distances], [acc_live[kind][k] for k in distances], marker, ms=size, mfc="white",
                mec=color, mew=1.5, ls="none", zorder=3, label=f"{name}: live")     # hollow, side by side
        for n in range(n_seeds):
            ax2.plot(*rec["curves"][kind][n], color=color, lw=1, label=f"{name}: each seed" if n == 0 else None)
    ax.axhline(1 / 8, color="grey", ls=":", label="chance")
    ax.set(xscale="log", ylim=(0, 1.08), xlabel="distance k to the digit to recall", ylabel="accuracy",
           title="Recall at distance k: the same steps for every model")
    plain_log_ticks(ax, distances)
    ax.legend(fontsize=7, loc="center right")   # one column: clear of the RNN curve on the left
    ax2.set(yscale="log", xlabel="training step", ylabel="training loss (nats, recorded)",
            title="How fast each learns it")
    ax2.legend(fontsize=7)
    far = _far(rec)
    for kind in RECALL_NAMES:
        glue(f"ch4_recall_lr_{kind}", f"{rec['lr'][kind]:g}")
        _glue_spread(f"ch4_recall_far_{kind}", [_mean(rec["acc"][kind, k][n] for k in far) for n in range(n_seeds)])
    _glue_spread("ch4_recall_lstm_256", rec["acc"]["lstm", 256])
    glue("ch4_recall_attn_min", f"{min(min(rec['acc']['attention', k]) for k in distances):.2f}")
    glue("ch4_recall_steps", rec["steps"])
    for kind in ("lstm", "attention"):
        glue(f"ch4_recall_learned_{kind}", ", ".join(str(learned_at(kind, n)) for n in range(n_seeds)))
    claim(all(learned_at("rnn", n) is None for n in range(n_seeds)), "the RNN's loss never fell below 1 nat")
    glue("ch4_recall_minutes", f"{rec['wall_s'] / 60:.0f}")
    return fig
