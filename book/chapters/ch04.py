"""Chapter 4, self-attention: the Q/K/V drawing, the CPU memory peak it measures, the attention exercise checker, and
the live section (a typed line read twice by the trained layer: exported for the website, a widget in a kernel).
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

__all__ = ["draw_qkv_flow", "check_attention", "peak_cpu_memory", "read_twice", "export_read_twice",
           "load_read_twice", "live_read_twice", "MAX_LINE"]


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
            raise AssertionError(f"output should have shape {tuple(want.shape)}, got {tuple(got.shape)}")
        if not torch.allclose(got, want, atol=1e-5, rtol=1e-4):
            hint = "with the mask" if m is not None else "without a mask (check the 1/sqrt(D) scale)"
            raise AssertionError(f"values differ from F.scaled_dot_product_attention {hint}")
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
    for _, delta in steps:
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
    n = len(shown["text"])
    return (f'<pre style="margin:0">line read twice: {html.escape(shown["text"])}\n'
            f'second reading writes: {marks}</pre><p>{shown["right"]} of {n} characters right '
            "(red: a miss)</p>")


def live_read_twice(model, tok, line: str = "Sweet are the uses of adversity"):
    """The live section for a kernel: a text box for a line; the layer reads it twice and shows what the second
    reading predicts and its attention map (row = a character of the second copy, column = the first copy)."""
    import ipywidgets as widgets
    from ..plots import alt_text, display_width, heatmap, new_figure, to_png
    from ..widgets import frame_html

    box = widgets.Text(value=line, description="your line", layout=widgets.Layout(width="95%"))
    out, picture = widgets.HTML(), widgets.HTML()

    def draw(_=None):
        if not _line_ids(tok, box.value):
            out.value, picture.value = "Type a line.", ""
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
