"""Chapter 6, multi-head attention and the block: its drawings, the repeat task, the exercise checkers, and the
plumbing of its measurements (recorded tables read, claims checked, values glued), each called in one line.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, Optional

import torch
import torch.nn.functional as F

from .. import plots
from ..attention import Attention
from ..checks import positive_int, returned
from ..diagrams import Diagram
from ..language import _
from ..results import provenance, read_rows, value_range
from ..utils import claim, glue

__all__ = ["NORM_COLOURS", "draw_head_split", "draw_post_pre_norm", "repeat_batch", "block_params", "check_multi_head",
           "check_rms_norm", "check_and_glue_stream_rms", "check_gpt3_without_residuals", "warmup_record",
           "check_live_warmup", "lstm_from_leaderboard", "check_and_glue_live_ladder", "recorded_ladder",
           "check_and_glue_recorded_ladder", "ladder_answer", "ladder_dot_plot", "wide_head_report",
           "stream_after_training", "check_and_glue_copy", "print_timings", "check_and_glue_head_stats",
           "top_contexts", "identity_fit", "check_and_glue_identity_fit", "draw_batchnorm_wobble", "head_stats",
           "copy_run", "check_and_glue_newline_head"]


def draw_head_split():
    """Multi-head attention as data flow: project x, split C into H chunks of D = C/H, attend per head, concat, W_O.

    Chapter 6. Rows of the Q, K, V strips are the heads: head h reads chunk h of each and writes chunk h of the
    concatenation, which out_proj (W_O) mixes back into one (T, C) output.
    """
    d = Diagram(14.4, 6.9, title="Multi-head attention: split C into H heads of D = C / H, attend, concatenate, mix")
    mid = 3.6
    d.box(0.8, mid, "x\n(T, C)", role="token", w=1.2, h=1.0)
    d.box(2.75, mid, "$W_Q, W_K, W_V$\nC → C each", role="attn", w=1.9, h=1.2)
    d.arrow((1.4, mid), (1.8, mid))
    rows = [5.7, 4.3, 2.9, 1.5]                      # head 1, head 2, ..., head H
    names = ["head 1", "head 2", None, "head H"]
    cols = {"Q": 4.85, "K": 5.45, "V": 6.05}
    for name, cx in cols.items():
        d.text(cx, rows[0] + 0.75, name, fontsize=10)
    d.text(5.45, rows[-1] - 0.8, "each row: one chunk\nof D columns", fontsize=8, italic=True)
    for y, name in zip(rows, names):
        if name is None:                             # the rows between head 2 and head H
            for x in (*cols.values(), 8.4, 10.5):
                d.text(x, y, "⋮", fontsize=12)
            continue
        d.arrow((3.7, mid), (4.5, y), color="#888888", width=0.9)
        for cx in cols.values():
            d.box(cx, y, "D", role="attn", w=0.55, h=0.75, fontsize=8)
        d.arrow((6.35, y), (7.1, y))
        d.box(8.4, y, f"{name}\nsoftmax($QK^T/\\sqrt{{D}}$) V", role="attn", w=2.6, h=0.95, fontsize=8)
        d.arrow((9.7, y), (10.2, y))
        d.box(10.5, y, name.split()[1], role="attn", w=0.6, h=0.95, fontsize=8)
        d.arrow((10.8, y), (11.6, mid), color="#888888", width=0.9)
    d.text(10.5, rows[0] + 0.75, "concat", fontsize=9)
    d.text(10.5, rows[-1] - 0.8, "(T, H·D) = (T, C)", fontsize=8, italic=True)
    d.box(12.15, mid, "$W_O$\nC → C", role="attn", w=1.1, h=1.0)
    d.arrow((12.7, mid), (13.1, mid))
    d.box(13.7, mid, "out\n(T, C)", role="token", w=1.1, h=1.0)
    return d.figure


def _norm_column(d: Diagram, cx: float, pre: bool):
    """One block, bottom to top, at centre cx: Pre-Norm x + f(LN(x)) or Post-Norm LN(x + f(x)); returns nothing."""
    red = "#c0392b"
    d.box(cx, 1.0, "x (from the block below)", role="token", w=3.0, h=0.6, fontsize=8)
    y = 1.3
    for sub, role in (("multi-head attention", "attn"), ("FFN", "ffn")):
        branch = y + 0.2                            # where the residual leaves the main path
        steps = [("LayerNorm", "norm"), (sub, role)] if pre else [(sub, role)]
        for text, r in steps:
            d.arrow((cx, y), (cx, y + 0.5))
            y += 0.85
            d.box(cx, y, text, role=r, w=2.6, h=0.7)
            y += 0.35
        d.arrow((cx, y), (cx, y + 0.4))
        y += 0.62
        d.circle(cx, y)
        d.line([(cx, branch), (cx - 1.75, branch), (cx - 1.75, y)], color=red, width=1.6)
        d.arrow((cx - 1.75, y), (cx - 0.22, y), color=red, width=1.6)
        y += 0.22
        if not pre:
            d.arrow((cx, y), (cx, y + 0.5))
            y += 0.85
            d.box(cx, y, "LayerNorm", role="norm", w=2.6, h=0.7)
            y += 0.35
    d.arrow((cx, y), (cx, y + 0.5))
    y += 0.8
    if pre:
        d.box(cx, y, "to the next block\n(after the last one: a final LayerNorm)", role="token", w=3.9, h=0.7,
              fontsize=8)
    else:
        d.box(cx, y, "to the next block", role="token", w=3.0, h=0.6, fontsize=8)


def draw_post_pre_norm():
    """Post-Norm (Vaswani et al. 2017, BERT) and Pre-Norm (GPT-2 and later) blocks side by side. Chapter 6.

    Red: the residual paths. In Post-Norm every path from the output back to x passes a LayerNorm; in
    Pre-Norm the residual path has none, which is why Pre-Norm's gradients stay even and it trains without warmup.
    """
    d = Diagram(12.6, 10.0, title="Where the LayerNorm goes")
    for cx, pre, head, rule in ((3.3, False, "Post-Norm (2017 paper, BERT)", "x ← LN(x + f(x))"),
                                (9.4, True, "Pre-Norm (GPT-2 and later)", "x ← x + f(LN(x))")):
        d.text(cx - 0.3, 9.7, head, fontsize=10)
        d.text(cx - 0.3, 9.3, rule, fontsize=9, italic=True)
        _norm_column(d, cx, pre)
    d.text(3.1, 0.35, "every path back to x passes a LayerNorm", fontsize=8, color="#c0392b")
    d.text(9.2, 0.35, "the residual path (red) has no LayerNorm on it", fontsize=8, color="#c0392b")
    return d.figure


def repeat_batch(batch_size: int, seq_len: int, n_values: int = 32, min_len: int = 4, max_len: Optional[int] = None,
                 generator: Optional[torch.Generator] = None):
    """A random segment written twice in a row, at a random place among random tokens: continue the copy. Chapter 6.

    Each row: p random tokens, a segment of L random tokens (L uniform in min_len..max_len, default seq_len // 3),
    the same segment again, random tokens up to seq_len + 1; p and L vary by row, so no fixed offset finds the
    copy. Returns x (B, T) ids, y (B, T) the next tokens (x shifted by one), and copy (B, T), True where y is
    the next token of the second copy, predictable from the first: find where the current token occurred in
    the first copy, and read the token after it. That is two lookups, one per attention layer (an induction head).
    """
    positive_int(batch_size=batch_size, seq_len=seq_len, n_values=n_values, min_len=min_len)
    max_len = seq_len // 3 if max_len is None else positive_int(max_len=max_len)
    if not 2 <= min_len <= max_len or 2 * max_len > seq_len or n_values < 2:
        raise ValueError(f"need 2 <= min_len <= max_len, 2 * max_len <= seq_len and n_values >= 2, got "
                         f"min_len={min_len}, max_len={max_len}, seq_len={seq_len}, n_values={n_values}")
    w = torch.randint(0, n_values, (batch_size, seq_len + 1), generator=generator)
    copy = torch.zeros(batch_size, seq_len, dtype=torch.bool)
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)
    starts = (torch.rand(batch_size, generator=generator) * (seq_len + 2 - 2 * lengths)).long()   # p in 0..T+1-2L
    for b, (L, p) in enumerate(zip(lengths.tolist(), starts.tolist())):
        w[b, p + L:p + 2 * L] = w[b, p:p + L]
        copy[b, p + L:p + 2 * L - 1] = True          # x at the second copy's first L - 1 tokens -> y its next one
    return w[:, :-1], w[:, 1:], copy


def block_params(d_model: int, d_ff: Optional[int] = None) -> int:
    """Weights of one bias-free block, attention 4C^2 + FFN 2CF (= 12C^2 when F = 4C), norms ignored. Chapter 6."""
    positive_int(d_model=d_model)
    d_ff = 4 * d_model if d_ff is None else positive_int(d_ff=d_ff)
    return 4 * d_model * d_model + 2 * d_model * d_ff


def check_multi_head(fn, seed: int = 0) -> bool:
    """Self-check for the chapter 6 exercise: does `fn(x, mha)` compute mha(x) with a loop over heads?

    `fn` gets x (B, T, C) and a book.attention.Attention `mha` (no mask, not causal) and should return
    out (B, T, C) using only mha.q_proj, k_proj, v_proj, out_proj weights. Tried with B=2, T=5, C=12, H=3.
    """
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    mha = Attention(12, 3)
    x = torch.randn(2, 5, 12, generator=g)
    with torch.no_grad():
        want, got = mha(x, causal=False), returned(fn(x, mha))
    if tuple(got.shape) != (2, 5, 12):
        raise AssertionError(_("output should have shape (2, 5, 12) = (B, T, C), got {shape}")
                             .format(shape=tuple(got.shape)))
    if not torch.allclose(got, want, atol=1e-5, rtol=1e-4):
        raise AssertionError(_("values differ from book.attention.Attention. Hints: head h uses rows h*D:(h+1)*D of "
                               "each projection weight; scale by sqrt(D), not sqrt(C); concatenate, then out_proj."))
    print("Correct: your loop over heads computes exactly what the batched Attention computes.")
    return True


def check_rms_norm(fn, seed: int = 0) -> bool:
    """Self-check for the chapter 6 exercise: does `fn(x, weight, eps)` compute RMSNorm over the last dim?"""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 5, 8, generator=g) * 3 + 1
    w = torch.randn(8, generator=g)
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    got = returned(fn(x, w, 1e-6))
    if tuple(got.shape) != tuple(x.shape):
        raise AssertionError(_("output should have shape {want}, got {got}")
                             .format(want=tuple(x.shape), got=tuple(got.shape)))
    if not torch.allclose(got, want, atol=1e-5, rtol=1e-4):
        hint = _("do not subtract the mean") if torch.allclose(got, F.layer_norm(x, (8,), w, None, 1e-6),
                                                              atol=1e-5) else _("divide by sqrt(mean(x^2) + eps)")
        raise AssertionError(_("values differ from RMSNorm over the last dim. Hint: {hint}, then scale by weight.")
                             .format(hint=hint))
    print("Correct: your RMSNorm matches the reference.")
    return True


# ---- the chapter's measurements: printing, claims and glue (called in one line from the notebook) -------------------

def check_and_glue_stream_rms(rms: Dict[str, list]):
    """The stream's RMS after every 4th of 24 blocks at initialisation, per setup: printed, claimed, glued, drawn."""
    print("block:        " + " ".join(f"{i:5d}" for i in range(0, len(rms["no LayerNorm"]), 4)))
    for name, r in rms.items():
        print(f"{name:13s} " + " ".join(f"{v:5.2f}" for v in r[::4]))
    growth = rms["no LayerNorm"][-1] / rms["no LayerNorm"][0]
    claim(growth > 2 and rms["no LayerNorm"][-1] > rms["Pre-Norm"][-1] > rms["Post-Norm"][-1],
          f"without LayerNorm the stream grows x{growth:.1f} over 24 blocks; Pre-Norm {rms['Pre-Norm'][-1]:.2f}, "
          f"Post-Norm {rms['Post-Norm'][-1]:.2f}")
    glue("ch6_rms_growth", f"{growth:.1f}", rel=0.2, spread="glue_spread", margin=2)
    glue("ch6_rms_pre_24", f"{rms['Pre-Norm'][-1]:.1f}", rel=0.2, spread="glue_spread", margin=2)
    return plots.line_plot(range(len(rms["no LayerNorm"])), rms, "block (0 = embeddings)", "RMS of the residual stream",
                           title="24 blocks at initialisation", marker="", colors=NORM_COLOURS)


def check_gpt3_without_residuals(depths, plain_grads, n_blocks: int = 96) -> float:
    """GPT-3's 96 blocks (192 sub-layers) without residuals: the measured gradient factor per block, extended.

    `plain_grads`: the gradient norm at block 1 of plain stacks of `depths` blocks (the residual section). The factor
    per block is the geometric mean from the shallowest to the deepest stack; block 1's gradient in a plain stack of
    `n_blocks` is extrapolated from the deepest measured one. Returns the base-10 exponent; glues it."""
    factor = (plain_grads[-1] / plain_grads[0]) ** (1 / (depths[-1] - depths[0]))
    log10 = math.log10(plain_grads[-1]) + (n_blocks - depths[-1]) * math.log10(factor)
    tiny = torch.finfo(torch.float32).smallest_normal
    print(f"measured factor per block without residuals: {factor:.3f}")
    print(f"at {n_blocks} blocks ({2 * n_blocks} sub-layers) block 1 would get about 10^{log10:.0f}")
    print(f"the smallest normal float32 is {tiny:.1e}: the gradient would be exactly 0")
    claim(factor < 0.5 and log10 < math.log10(tiny), f"factor {factor:.3f}, extrapolated 10^{log10:.0f}")
    glue("ch6_plain_factor", f"{factor:.2f}", spread="glue_spread", margin=2)
    glue("ch6_gpt3_sublayers", 2 * n_blocks)
    glue("ch6_gpt3_plain", f"1e{log10:.0f}", spread="glue_spread", margin=2)
    glue("ch6_float32_tiny", f"{tiny:.0e}")
    return log10


_WARM_KEYS = {"Post-Norm, no warmup": "post_cold", "Post-Norm, warmup": "post_warm", "Pre-Norm, no warmup": "pre_cold"}
# one colour per placement of the norm in every figure of the chapter
NORM_COLOURS = {"no LayerNorm": "tab:red", "Pre-Norm": "tab:blue", "Post-Norm": "tab:green"}
_WARM_COLOURS = {"Post-Norm, no warmup": "tab:green", "Post-Norm, warmup": "tab:olive",
                 "Pre-Norm, no warmup": "tab:blue"}
FAILS_ABOVE_BIGRAM = 0.75   # a warmup run "fails" when it ends more than this many bits above the count bigram


def warmup_record(bigram_bpc: float) -> dict:
    """The recorded warmup runs (benchmarks/block_ladder.py --parts warmup): curves drawn, finals printed, glued.

    Returns {"final": {run: [per seed]}, "fig": the figure, "lr": the recorded peak rate}. The prose reads exactly
    what the seeds show: Post-Norm with warmup ahead of Post-Norm without by how much on each seed (a seed where the
    two end within 0.05 bits is a tie, not a win)."""
    W = provenance("block_ladder_warmup")["args"]
    rows = read_rows("block_ladder_warmup")
    lrs = sorted({float(r["lr"]) for r in rows})
    runs = list(dict.fromkeys(r["run"] for r in rows))
    seeds = sorted({int(r["seed"]) for r in rows})
    ncols = min(3, len(lrs))
    nrows = -(-len(lrs) // ncols)
    fig, axes = plots.new_figure(nrows=nrows, ncols=ncols, figsize=(4.2 * ncols, 3.0 * nrows), sharey=True)
    axes = list(getattr(axes, "flat", [axes]))
    for ax in axes[len(lrs):]:
        ax.set_visible(False)                          # an empty panel where the rates do not fill the grid
    final = {}
    for ax, lr in zip(axes, lrs):
        for run in runs:
            for s in seeds:
                pts = [(int(r["step"]), float(r["val_bpc"])) for r in rows
                       if r["run"] == run and float(r["lr"]) == lr and int(r["seed"]) == s]
                ax.plot(*zip(*pts), "-", color=_WARM_COLOURS.get(run, "tab:gray"), alpha=0.8, lw=1.2,
                        label=run if s == seeds[0] else None)
                final.setdefault((lr, run), []).append(pts[-1][1])
        ax.axhline(bigram_bpc, color="k", ls=":", lw=1, label=f"count bigram ({bigram_bpc:.2f})")
        ax.set(title=f"{W['warm_layers']} layers, peak lr {lr:g}", xlabel="step")
    for ax in axes[::ncols]:
        ax.set_ylabel("validation bits/char")
    axes[0].legend(fontsize=7)
    print(f"final validation bits/char after {W['warm_steps']} steps, seeds {seeds} (min to max):")
    for lr in lrs:
        for run in runs:
            print(f"  lr {lr:g}  {run:24s} {min(final[lr, run]):.3f} to {max(final[lr, run]):.3f}")
    fails = lambda v: v > bigram_bpc + FAILS_ABOVE_BIGRAM

    def state(vals):
        k = sum(not fails(v) for v in vals)
        return "trains on every seed" if k == len(vals) else "fails on every seed" if k == 0 else \
            f"trains on {k} of {len(vals)} seeds"
    def outcome(r):
        cold, warm, pre = (state(final[r, k]) for k in _WARM_KEYS)
        if cold == warm == pre:
            return "all three " + cold.replace("trains", "train").replace("fails", "fail")
        post = f"Post-Norm {cold} with or without warmup" if cold == warm else \
            f"Post-Norm {cold} without warmup and {warm} with it"
        return f"{post}, Pre-Norm {pre}"
    groups = []                                       # neighbouring rates with the same outcome, said once
    for r in lrs:
        if groups and groups[-1][1] == outcome(r):
            groups[-1][0].append(r)
        else:
            groups.append(([r], outcome(r)))
    glue("ch6_rec_warm_story", "; ".join(
        f"at {' and '.join(f'{r:g}' for r in rs)}, {words}" for rs, words in groups))
    glue("ch6_rec_fail_margin", f"{FAILS_ABOVE_BIGRAM:g}")
    deciding = [r for r in lrs if all(map(fails, final[r, "Post-Norm, no warmup"]))
                and not any(map(fails, final[r, "Post-Norm, warmup"]))]
    lr = deciding[0] if deciding else lrs[-1]          # where warmup decides the outcome, else the highest rate
    glue("ch6_rec_warm_decides", (f"At {lr:g} warmup decides the outcome: without it Post-Norm fails on every seed, "
                                  "with it Post-Norm trains on every seed.") if deciding else
         "No rate we recorded lets warmup decide the outcome: where Post-Norm fails without warmup, it fails with it.")
    fin = {run: final[lr, run] for run in runs}
    for run in runs:
        glue(f"ch6_rec_{_WARM_KEYS[run]}", value_range(min(fin[run]), max(fin[run])))
    # warmup against no warmup, Post-Norm, same seed: a clear gain (> 0.05 bits) or a tie
    gain = [c - w for c, w in zip(fin["Post-Norm, no warmup"], fin["Post-Norm, warmup"])]
    clear = [g > 0.05 for g in gain]
    ties = [f"{w:.3f} against {c:.3f}" for g, c, w in zip(gain, fin["Post-Norm, no warmup"], fin["Post-Norm, warmup"])
            if abs(g) <= 0.05]
    claim(all(g > -0.05 for g in gain), f"warmup never clearly hurts Post-Norm here: gains {gain}")
    if all(clear):
        sentence = f"ahead of no warmup on every seed, by {value_range(min(gain), max(gain))} bits"
    elif not any(clear):
        sentence = f"level with no warmup on every seed ({'; '.join(ties)} bits)"
    else:
        sentence = (f"ahead of no warmup on {sum(clear)} of {len(gain)} seeds (by "
                    f"{value_range(min(g for g in gain if g > 0.05), max(gain))} bits) and level on the other"
                    f"{'s' if len(ties) > 1 else ''} ({'; '.join(ties)} bits)")
    glue("ch6_rec_warm_vs_cold", sentence)
    pre, post_best = fin["Pre-Norm, no warmup"], [min(a, b) for a, b in zip(*(fin[k] for k in list(_WARM_KEYS)[:2]))]
    if not deciding:   # at the rate where Post-Norm fails either way, Pre-Norm trains
        claim(max(pre) < min(post_best) - 0.5, f"Pre-Norm {pre} ahead of Post-Norm, warmup or not, {post_best}")
    glue("ch6_rec_warm_lr", f"{lr:g}")
    glue("ch6_rec_warm_lrs", ", ".join(f"{r:g}" for r in lrs[:-1]) + f" and {lrs[-1]:g}" if len(lrs) > 1 else f"{lr:g}")
    glue("ch6_rec_warm_layers", W["warm_layers"])
    glue("ch6_rec_warm_steps", W["warm_steps"])
    glue("ch6_rec_warm_warmup", W["warm_warmup"])
    return {"final": fin, "fig": fig, "lr": lr, "decides": bool(deciding), "by_rate": final}


def check_live_warmup(live_bpc: Dict[str, float], rec: dict) -> None:
    """The live seed-0 warmup runs point the same way as every recorded seed wherever all recorded seeds agree."""
    fin = rec["final"]
    for a, b in (("Post-Norm, no warmup", "Post-Norm, warmup"), ("Post-Norm, no warmup", "Pre-Norm, no warmup"),
                 ("Post-Norm, warmup", "Pre-Norm, no warmup")):
        d = [x - y for x, y in zip(fin[a], fin[b])]               # same seed
        if all(v > 0.05 for v in d) or all(v < -0.05 for v in d):  # every recorded seed agrees, clearly
            claim((live_bpc[a] > live_bpc[b]) == (d[0] > 0), f"{a} vs {b}: live {live_bpc[a]:.3f} vs "
                  f"{live_bpc[b]:.3f}, recorded differences {min(d):+.3f} to {max(d):+.3f}")
    for name, key in _WARM_KEYS.items():
        glue(f"ch6_{key}_bpc", f"{live_bpc[name]:.3f}", tol=0.3, spread="glue_spread", margin=2)


def lstm_from_leaderboard(path="_generated/runtimes.json") -> Optional[float]:
    """Chapter 2's char LSTM on the book's leaderboard (bits/char), or None where it is not there yet."""
    board = Path(path)
    rows = json.loads(board.read_text()) if board.exists() else {}
    return next((r["val_bpc"] for ch in rows.values() for r in ch.get("leaderboard", [])
                 if r["name"].startswith("char LSTM")), None)


def check_and_glue_live_ladder(rung_bpc: Dict[str, float], bigram_bpc: float, count: dict,
                               lstm_bpc: Optional[float], big: bool) -> None:
    """The live ladder's claims (each rung against the one below it) and its glued values."""
    count_bpc = count["bits"]
    print(f"references: count bigram {bigram_bpc:.3f} | {count['name']} {count_bpc:.3f} | Chapter 2's LSTM "
          + (f"{lstm_bpc:.3f}" if lstm_bpc is not None else "(not on this leaderboard yet)"))
    claim(count_bpc < bigram_bpc and (lstm_bpc is None or count_bpc < lstm_bpc < bigram_bpc),
          f"the references rank the count table {count_bpc:.3f} < LSTM {lstm_bpc} < bigram {bigram_bpc:.3f}")
    order = list(rung_bpc)
    one, multi, ffn, res, full = (rung_bpc[n] for n in order)
    gains = {b: rung_bpc[a] - rung_bpc[b] for a, b in zip(order, order[1:])}    # what each rung adds
    claim(multi < one, f"more heads, same parameters, help: {multi:.3f} vs {one:.3f}")
    claim(res < ffn - 0.1, f"with residuals the FFN's parameters pay off: {res:.3f} vs {ffn:.3f}")
    claim(abs(full - res) < 0.2 and full < one - 0.3 and full < bigram_bpc - 0.3,
          f"the full block {full:.3f}: close to the block without LayerNorm ({res:.3f}), far below one head "
          f"({one:.3f}) and the bigram ({bigram_bpc:.3f})")
    if not big:   # the CPU recipe: 800 steps of a 2-layer, 64-wide model
        claim(ffn > multi, f"the FFN alone hurts without residuals: {ffn:.3f} vs {multi:.3f}")
        claim(max(gains, key=gains.get) == "+ residual", f"residuals are the largest step: {gains}")
        claim(full > res - 0.03, f"LayerNorm does not help a 2-layer model: {full:.3f} vs {res:.3f}")
        claim(min(rung_bpc.values()) > count_bpc, f"at this budget no rung reaches the count table ({count_bpc:.3f})")
        claim(multi < bigram_bpc, f"the live multi-head rung {multi:.3f} beats the bigram {bigram_bpc:.3f}")
    for name, key in zip(order, ("one_head", "multi_head", "ffn", "residual", "norm")):
        glue(f"ch6_rung_{key}", f"{rung_bpc[name]:.3f}", tol=0.3 if key == "ffn" else 0.05, spread="glue_spread",
             margin=2)
    for key, a, b in (("heads", one, multi), ("ffn", multi, ffn), ("residual", ffn, res), ("norm", res, full)):
        glue(f"ch6_gain_{key}", f"{a - b:+.2f}", tol=0.3 if key in ("ffn", "residual") else 0.07,
             spread="glue_spread", margin=2)
    glue("ch6_count_bpc", f"{count_bpc:.3f}")
    glue("ch6_count_name", count["name"])
    glue("ch6_lstm_bpc", f"{lstm_bpc:.3f}" if lstm_bpc else "about 2.5", tol="any")
    glue("ch6_full_minus_count", f"{full - count_bpc:.2f}", tol=0.07, spread="glue_spread", margin=2)


def _mean(d: dict) -> float:
    return sum(d.values()) / len(d) if all(map(math.isfinite, d.values())) else math.inf   # nan: diverged


def recorded_ladder(vocab_size: int) -> dict:
    """The recorded ladder (benchmarks/block_ladder.py): every rung at every peak rate, 3 seeds; printed.

    Returns R with "args", "prov", "rungs" (the five, then "wide head"), "lrs", "sweep" {(rung, lr): {seed: bpc}},
    "best_lr", "bpc" (each rung at its best rate: {seed: bpc}), "params", "seeds", "gain" (per seed, against the
    rung below) and "uniform" (log2 V: a run worse than this diverged)."""
    rec, prov = read_rows("block_ladder"), provenance("block_ladder")
    A = prov["args"]
    rungs = list(dict.fromkeys(r["rung"] for r in rec))
    ladder_rungs = [k for k in rungs if k != "wide head"]
    lrs = sorted({float(r["lr"]) for r in rec})
    sweep = {(k, lr): {int(r["seed"]): float(r["val_bpc"]) for r in rec if r["rung"] == k and float(r["lr"]) == lr}
             for k in rungs for lr in lrs}
    best_lr = {k: min(lrs, key=lambda lr: _mean(sweep[k, lr])) for k in rungs}   # lowest mean over the seeds
    bpc = {k: sweep[k, best_lr[k]] for k in rungs}
    params = {k: int(next(r["params"] for r in rec if r["rung"] == k)) for k in rungs}
    seeds = sorted(bpc[rungs[0]])
    gain = {b: [bpc[a][s] - bpc[b][s] for s in seeds] for a, b in zip(ladder_rungs, ladder_rungs[1:])}
    uniform = math.log2(vocab_size)
    print(f"recorded: {A['layers']} layers x {A['d_model']} wide, {A['steps']} steps, seeds {seeds}; "
          f"{prov['wall_s'] / 60:.0f} minutes on one thread")
    print(f"mean val bits/char over the seeds at each peak rate ('diverged': worse than uniform, {uniform:.2f})")
    print(f"{'rung':12s} | " + " | ".join(f"lr {lr:<6g}" for lr in lrs) + " | best")
    for k in rungs:
        print(f"{k:12s} | " + " | ".join(f"{_mean(sweep[k, lr]):9.3f}" if _mean(sweep[k, lr]) < uniform
                                        else f"{'diverged':>9}" for lr in lrs) + f" | {best_lr[k]:g}"
              + ("  (edge of the sweep)" if best_lr[k] in (lrs[0], lrs[-1]) else ""))
    print(f"\nat each rung's best rate: {'params':>7} | {'val bits/char, each seed':>24} | gain, min to max")
    for k in rungs:
        g = gain.get(k)
        print(f"{k:12s} {'':12s} | {params[k]:7,} | {'  '.join(f'{bpc[k][s]:.3f}' for s in seeds):>24} | "
              + (f"{min(g):+.3f} to {max(g):+.3f}" if g else ""))
    if len(lrs) < 3 or any(len(v) < 3 for v in sweep.values()) or params["wide head"] != params["+ LayerNorm"]:
        raise ValueError("the recorded ladder needs >= 3 rates and >= 3 seeds per run, and a wide head with the full "
                         "block's parameters: re-record it with benchmarks/block_ladder.py")
    return dict(args=A, prov=prov, rungs=rungs, ladder=ladder_rungs, lrs=lrs, sweep=sweep, best_lr=best_lr, bpc=bpc,
                params=params, seeds=seeds, gain=gain, uniform=uniform)


def check_and_glue_recorded_ladder(R: dict, rung_bpc: Dict[str, float], bigram_bpc: float, count_bpc: float,
                                   live_layers: int) -> None:
    """The recorded ladder against the live one, and every value the prose reads from it, glued."""
    A, lrs, sweep, bpc, gain, seeds = R["args"], R["lrs"], R["sweep"], R["bpc"], R["gain"], R["seeds"]
    live_gain = {b: rung_bpc[a] - rung_bpc[b] for a, b in zip(R["ladder"], R["ladder"][1:])}
    for b, g in gain.items():
        if all(x > 0 for x in g) or all(x < 0 for x in g):   # every seed, one sign: the live ladder must agree
            claim((live_gain[b] > 0) == (g[0] > 0), f"{b}: live gain {live_gain[b]:+.3f} at {live_layers} layers, "
                  f"recorded {min(g):+.3f} to {max(g):+.3f} at {A['layers']} layers")
    key = {"multi-head": "heads", "+ FFN": "ffn", "+ residual": "residual", "+ LayerNorm": "norm"}
    names = dict(zip(R["rungs"], ("one_head", "multi_head", "ffn", "residual", "norm", "wide")))
    for k in R["ladder"]:
        glue(f"ch6_rec_{names[k]}", value_range(min(bpc[k].values()), max(bpc[k].values()), "{:.3f}"))
    for b, g in gain.items():
        glue(f"ch6_rec_gain_{key[b]}", f"{min(g):+.2f} to {max(g):+.2f}")
        glue(f"ch6_rec_verdict_{key[b]}", "pays on every seed" if all(x > 0 for x in g) else
             "costs on every seed" if all(x < 0 for x in g) else "no measurable difference (the seeds disagree)")
    glue("ch6_rec_layers", A["layers"])
    glue("ch6_rec_steps", A["steps"])
    glue("ch6_rec_lrs", ", ".join(f"{lr:g}" for lr in lrs))
    for k in R["rungs"]:
        glue(f"ch6_rec_lr_{names[k]}", f"{R['best_lr'][k]:g}")
    trains = lambda k, lr: all(v < R["uniform"] for v in sweep[k, lr].values())   # every seed better than uniform
    res_diverge = min(lr for lr in lrs if not any(v < R["uniform"] for v in sweep["+ residual", lr].values()))
    claim(trains("+ LayerNorm", res_diverge),   # what LayerNorm buys here: a rate that diverges without it trains
          f"the unnormalised stack diverges at {res_diverge:g} on every seed; Pre-Norm must train there")
    glue("ch6_rec_res_diverge_lr", f"{res_diverge:g}")
    glue("ch6_rec_norm_at_diverge", value_range(min(sweep["+ LayerNorm", res_diverge].values()),
                                                max(sweep["+ LayerNorm", res_diverge].values()), "{:.2f}"))
    edges = [k for k in R["rungs"] if R["best_lr"][k] in (lrs[0], lrs[-1])]
    glue("ch6_rec_bracketed", "every rung's best rate has a rate tried on each side of it" if not edges else
         f"the best rate of {', '.join(edges)} is an edge of the sweep")
    glue("ch6_rec_seeds", len(seeds))
    glue("ch6_rec_wall_min", f"{R['prov']['wall_s'] / 60:.0f}")
    # the first rungs against the count bigram: one head no better; several heads, and + FFN, ahead on every seed
    one, multi, ffn = (list(bpc[k].values()) for k in ("one head", "multi-head", "+ FFN"))
    claim(all(v > bigram_bpc - 0.05 for v in one) and all(v < bigram_bpc for v in multi + ffn),
          f"one head {one} no better than the bigram {bigram_bpc:.3f}; multi-head {multi} and + FFN {ffn} below it")
    glue("ch6_rec_one_vs_bigram", value_range(min(one) - bigram_bpc, max(one) - bigram_bpc, "{:+.2f}", " to "))
    glue("ch6_rec_multi_vs_bigram", value_range(bigram_bpc - max(multi), bigram_bpc - min(multi)))
    glue("ch6_rec_ffn_vs_bigram", value_range(bigram_bpc - max(ffn), bigram_bpc - min(ffn)))
    best = min(min(bpc[k].values()) for k in R["ladder"])
    glue("ch6_rec_best", f"{best:.3f}")
    glue("ch6_rec_best_minus_count", f"{best - count_bpc:.2f}", tol=0.05, spread="glue_spread", margin=2)


_WHY = {"ch6_rec_gain_ffn": "Without residual connections the extra layer is one more thing a short run must push a "
                            "signal through.",
        "ch6_rec_gain_norm": "Two layers do not grow the residual stream enough to need it; here it buys a wider "
                             "range of rates that train, and it pays in deep stacks and long runs."}


def ladder_answer(q, name: str) -> dict:
    """The keywords of `q.answer(...)` for a ladder question (improve / cost / disagree on every seed), read from
    the recorded gains glued under `name` (ch6_rec_gain_ffn or ch6_rec_gain_norm)."""
    from .. import quiz
    lo, hi = quiz.numbers(name)
    return dict(choice=q.choices[0 if lo > 0 else 1 if hi < 0 else 2], evidence=[name], why=_WHY[name],
                measured=f"gain {quiz.shown(name)} bits/char over the seeds (+ = fewer bits)")


def ladder_dot_plot(R: dict, rung_bpc: Dict[str, float], refs: list, live_layers: int):
    """Every recorded seed of every rung at its best rate (dots), the live rungs (crosses), the references (lines)."""
    fig, ax = plots.new_figure(figsize=(6.4, 3.8))
    shown, bpc = R["rungs"], R["bpc"]
    for y, k in enumerate(shown[::-1]):
        vals = list(bpc[k].values())
        ax.plot(vals, [y] * len(vals), "o", color="tab:blue", alpha=0.7,
                label=f"{R['args']['layers']} layers, recorded (each seed)" if y == 0 else None)
        ax.text(max(vals) + 0.04, y, f"{min(vals):.2f}–{max(vals):.2f}", va="center", fontsize=7)
        if k in rung_bpc:
            ax.plot(rung_bpc[k], y, "x", color="tab:red", ms=7,
                    label=f"{live_layers} layers, live" if k == shown[0] else None)
    ax.set_yticks(range(len(shown)), shown[::-1])
    for label, v, colour in refs:
        ax.axvline(v, color=colour, ls="--", lw=1.2, label=f"{label} ({v:.2f})")
    lo = min(min(v for _, v, _ in refs), min(min(v.values()) for v in bpc.values()))
    hi = max(max(rung_bpc.values()), max(max(v.values()) for v in bpc.values()))
    ax.set(xlim=(lo - 0.2, hi + 0.45), xlabel="validation bits/char (lower is better)", title="The ladder, every seed")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, frameon=False)
    return fig


def wide_head_report(R: dict) -> None:
    """One head as wide as the model against the full block's heads, same parameters, same seeds: printed, glued."""
    A, seeds, sweep = R["args"], R["seeds"], R["sweep"]
    wide, four = R["bpc"]["wide head"], R["bpc"]["+ LayerNorm"]
    diff = [wide[s] - four[s] for s in seeds]             # positive: the single wide head is worse
    print(f"full block, {R['params']['wide head']:,} parameters either way, {A['layers']} layers, seeds {seeds}")
    print(f"  1 head of {A['d_model']}:  " + "  ".join(f"{wide[s]:.3f}" for s in seeds))
    print(f"  {A['heads']} heads of {A['d_model'] // A['heads']}: " + "  ".join(f"{four[s]:.3f}" for s in seeds))
    print(f"  wide minus {A['heads']} heads, same seed: {min(diff):+.3f} to {max(diff):+.3f} bits/char")
    verdict = lambda d: ("the four heads ahead on every seed" if all(x > 0 for x in d) else
                         "the wide head ahead on every seed" if all(x < 0 for x in d) else
                         "no measurable difference: the seeds disagree")
    glue("ch6_rec_wide", f"{min(wide.values()):.3f}–{max(wide.values()):.3f}")
    glue("ch6_rec_wide_diff", f"{min(diff):+.3f} to {max(diff):+.3f}")
    glue("ch6_rec_wide_verdict", verdict(diff))
    print(f"at each of the sweep's rates, wide minus {A['heads']} heads, same seed:")
    at_rate = {lr: [sweep["wide head", lr][s] - sweep["+ LayerNorm", lr][s] for s in seeds] for lr in R["lrs"]}
    for lr, d in at_rate.items():
        print(f"  lr {lr:<6g} {min(d):+.3f} to {max(d):+.3f}  ({verdict(d)})")
    ahead = [lr for lr, d in at_rate.items() if all(x > 0 for x in d)]
    behind = [lr for lr, d in at_rate.items() if all(x < 0 for x in d)]
    glue("ch6_rec_wide_four_ahead", ", ".join(f"{lr:g}" for lr in ahead) or "none")
    glue("ch6_rec_wide_one_ahead", ", ".join(f"{lr:g}" for lr in behind) or "none of them")
    glue("ch6_rec_wide_summary", f"Splitting the width into heads costs no parameters; here it paid on every seed at "
         f"{len(ahead)} of the {len(at_rate)} rates tried and cost on every seed at {len(behind)}")
    glue("ch6_rec_wide_four_ahead_by", f"{min(min(at_rate[lr]) for lr in ahead):.2f}–"
         f"{max(max(at_rate[lr]) for lr in ahead):.2f}" if ahead else "nothing")
    glue("ch6_rec_heads", A["heads"])
    glue("ch6_rec_d_head", A["d_model"] // A["heads"])


def stream_after_training(R: dict):
    """The recorded RMS of the residual stream after training, "+ residual" (no norm) against Pre-Norm, every seed."""
    rows = read_rows("block_ladder_stream")
    fig, ax = plots.new_figure(figsize=(5.2, 3.2))
    last, grew = {}, {}
    for rung, colour, label in (("+ residual", NORM_COLOURS["no LayerNorm"], "+ residual (no norm)"),
                                ("+ LayerNorm", NORM_COLOURS["Pre-Norm"], "+ LayerNorm (Pre-Norm)")):
        for s in R["seeds"]:
            r = [float(row["rms"]) for row in rows if row["rung"] == rung and int(row["seed"]) == s
                 and float(row["lr"]) == R["best_lr"][rung]]
            ax.plot(range(len(r)), r, "o-", color=colour, alpha=0.7, label=label if s == R["seeds"][0] else None)
            last.setdefault(rung, []).append(r[-1])
            grew.setdefault(rung, []).append(r[-1] / r[0])
    ax.set(xlabel="block (0 = embeddings)", ylabel="RMS of the residual stream",
           title=f"After training ({R['args']['layers']} layers, every seed)", yscale="log",
           xticks=range(R["args"]["layers"] + 1))                       # whole blocks only
    ax.legend(fontsize=8)
    print("RMS after the last block: " + " | ".join(f"{k}: {value_range(min(v), max(v), '{:.1f}', ' to ')}"
                                                    for k, v in last.items()))
    glue("ch6_rec_rms_res", value_range(min(last["+ residual"]), max(last["+ residual"]), "{:.1f}", " to "))
    glue("ch6_rec_rms_norm", value_range(min(last["+ LayerNorm"]), max(last["+ LayerNorm"]), "{:.1f}", " to "))
    glue("ch6_rec_rms_res_growth", value_range(min(grew["+ residual"]), max(grew["+ residual"]), "{:.1f}"))
    return fig


def check_and_glue_copy(copy_acc: Dict[int, list], steps: int, n_values: int = 32) -> None:
    """The repeat task, one layer against two: printed per seed, claimed, glued."""
    for n, accs in copy_acc.items():
        print(f"{n} layer{'s' if n > 1 else ' '}: accuracy on the second copy " + "  ".join(f"{a:.1%}" for a in accs)
              + f"   (guessing: {1 / n_values:.1%})")
    claim(min(copy_acc[2]) > max(copy_acc[1]) + 0.2,
          f"two layers beat one on every seed: {copy_acc[2]} vs {copy_acc[1]}")
    glue("ch6_copy_1", value_range(min(copy_acc[1]), max(copy_acc[1]), "{:.0%}", " to "), tol=15,
         spread="glue_spread", margin=2)
    glue("ch6_copy_2", value_range(min(copy_acc[2]), max(copy_acc[2]), "{:.0%}", " to "), tol=15,
         spread="glue_spread", margin=2)
    glue("ch6_copy_steps", steps)


def print_timings(train_seconds: Dict[str, float], total_s: float, device_type: str) -> None:
    """Every training run's seconds and the chapter's, printed (an illustration of this machine, never compared).

    The only check is one that holds on any machine under any load: every run was timed, and the runs are a part of
    the whole."""
    claim(min(train_seconds.values()) > 0 and sum(train_seconds.values()) < total_s,   # holds on any machine
          f"every run timed, and the runs ({sum(train_seconds.values()):.1f} s) a part of the whole ({total_s:.1f} s)")
    for name, s in train_seconds.items():
        print(f"training {name:34s} {s:6.1f} s")
    print(f"all training {sum(train_seconds.values()):.1f} s; whole chapter {total_s:.1f} s on {device_type}")


def check_and_glue_head_stats(stats: dict, stats0: dict, newline_rate: float) -> None:
    """Per layer and head of the trained block: its habits (look-back, weight on the previous character, on spaces,
    on newlines, entropy) beside the untrained model's; printed, claimed, glued. `stats`: head_stats' dict of (L, H)."""
    L, H = stats["entropy"].shape
    print("layer head | look-back previous  space  newline  entropy | untrained: look-back entropy")
    for layer in range(L):
        for h in range(H):
            s = [stats[k][layer, h].item() for k in stats]
            print(f"{layer + 1:5d} {h + 1:4d} | {s[0]:9.2f} {s[1]:8.2f} {s[2]:6.2f} {s[3]:8.2f} {s[4]:8.2f} |"
                  f" {stats0['look-back'][layer, h]:19.2f} {stats0['entropy'][layer, h]:7.2f}")
    print(f"newlines are {newline_rate:.1%} of the characters")
    nl, lb = stats["newline"], stats["look-back"]
    claim(stats["entropy"].mean() < stats0["entropy"].mean() - 0.5, f"trained heads are sharper: entropy "
          f"{stats['entropy'].mean():.2f} vs {stats0['entropy'].mean():.2f} untrained")
    claim(lb.min() < 3 and lb.max() > 2 * lb.min(), f"some heads look a character or two back, others further: "
          f"look-back {lb.min():.2f} to {lb.max():.2f}")
    claim(nl.max() > 1.8 * newline_rate and nl.max() > 1.8 * nl.min(),
          f"one head drawn to newlines ({nl.max():.1%}, rate {newline_rate:.1%}), another not ({nl.min():.1%})")
    glue("ch6_newline_rate", f"{newline_rate:.1%}", tol=1, spread="glue_spread", margin=2)   # points
    glue("ch6_lookback_min", f"{lb.min():.1f}", rel=0.25, spread="glue_spread", margin=2)
    glue("ch6_lookback_max", f"{lb.max():.1f}", rel=0.2, spread="glue_spread", margin=2)
    glue("ch6_newline_max", f"{nl.max():.0%}", tol=10, spread="glue_spread", margin=2)
    glue("ch6_newline_min", f"{nl.min():.0%}", tol=3, spread="glue_spread", margin=2)
    glue("ch6_newline_ratio", f"{nl.max() / newline_rate:.1f}", rel=0.3, spread="glue_spread", margin=2)


def top_contexts(unit_act: torch.Tensor, windows: torch.Tensor, tok, k: int = 5, width: int = 8) -> list:
    """The `k` validation contexts (the last `width` characters, newlines as ⏎) where one FFN unit fires hardest.
    `unit_act`: (B, T) the unit's activation at every position of `windows` (B, T)."""
    T = unit_act.shape[1]
    out = []
    for j in unit_act.flatten().topk(k).indices.tolist():
        b, t = divmod(j, T)
        out.append(tok.decode(windows[b, max(0, t - width + 1):t + 1].tolist()).replace("\n", "⏎"))
    return out


@torch.no_grad()
def token_in_stream(model, train_windows: torch.Tensor, test_windows: torch.Tensor) -> list:
    """Does the residual stream still hold each position's own input character? For the stream after the
    embeddings and after each block (BlockLM's return_stream), a linear read-out (least squares onto the one-hot
    of the input character, fitted on train_windows) is scored on test_windows: the share of positions whose
    character it names. Returns one share per stream (n_layers + 1). The seeds' "the residual keeps early
    information", measured. Chapter 6."""
    positive_int(windows=min(len(train_windows), len(test_windows)))
    model.eval()
    V = model.vocab_size
    fit_streams, test_streams = model(train_windows, return_stream=True)[1], model(test_windows, return_stream=True)[1]
    target = F.one_hot(train_windows.flatten(), V).float()
    shares = []
    with_bias = lambda h: torch.cat([h.flatten(0, 1), torch.ones(h.shape[0] * h.shape[1], 1, device=h.device)], dim=1)
    for h_fit, h_test in zip(fit_streams, test_streams):
        w = torch.linalg.lstsq(with_bias(h_fit), target).solution      # (C + 1, V): the read-out, with a bias
        b = with_bias(h_test)
        shares.append(((b @ w).argmax(-1) == test_windows.flatten()).float().mean().item())
    return shares


def check_and_glue_token_in_stream(ladder: dict, flags: dict, vocab_size: int, sizes: dict, fit_windows, test_windows,
                                   device=None) -> dict:
    """token_in_stream for the "+ FFN" rung (no residuals) and the "+ residual" rung, untrained (seed 0, the
    ladder's initialisation) and trained (the live ladder's models). Prints a table, asserts what holds at
    initialisation on any machine, and glues the last stream's shares. Returns {(rung, "init"|"trained"): shares}."""
    from ..blocks import BlockLM
    from ..utils import seed_everything

    out = {}
    for rung in ("+ FFN", "+ residual"):
        seed_everything(0)
        init = BlockLM(vocab_size, sizes["context_len"], sizes["d_model"], sizes["n_layers"], **flags[rung]).to(device)
        out[rung, "init"] = token_in_stream(init, fit_windows, test_windows)
        out[rung, "trained"] = token_in_stream(ladder[rung][0], fit_windows, test_windows)
    print("share of positions whose own character a linear read-out finds in the stream")
    heads = ["embeddings"] + [f"block {i}" for i in range(1, sizes["n_layers"] + 1)]
    print(f"{'':26s}" + "".join(f"{h:>12s}" for h in heads))
    for (rung, when), shares in out.items():
        print(f"{rung + ', ' + when:26s}" + "".join(f"{v:12.0%}" for v in shares))
    no_res, res = out["+ FFN", "init"][-1], out["+ residual", "init"][-1]
    claim(no_res < 0.5 < 0.9 < res, f"untrained, the stack without residuals loses the character ({no_res:.0%}) and "
                                    f"the residual stack keeps it ({res:.0%})")
    claim(out["+ FFN", "trained"][-1] > no_res + 0.2, "training teaches the stack without residuals to carry the "
                                                       f"character: {out['+ FFN', 'trained'][-1]:.0%}")
    glue("ch6_keep_init_plain", f"{no_res:.0%}", spread="glue_spread", margin=2)
    glue("ch6_keep_init_res", f"{res:.0%}", spread="glue_spread", margin=2)
    for rung, key in (("+ FFN", "plain"), ("+ residual", "res")):
        glue(f"ch6_keep_trained_{key}", f"{out[rung, 'trained'][-1]:.0%}", tol=8, spread="glue_spread", margin=2)
    return out


def identity_fit(residual: bool, steps: int = 150):
    """Train 4 attention + FFN blocks (no norm, d_model 32) to return their own input, random vectors -> the fit's
    History; its train_loss is the relative error |out - x|^2 / |x|^2 per step."""
    from ..blocks import TransformerBlock
    from ..optim import build_optimizer
    from ..optim import fit
    from ..utils import seed_everything

    steps = positive_int(steps=steps)
    seed_everything(0)
    stack = torch.nn.Sequential(*(TransformerBlock(32, 4, causal=True, residual=residual, use_norm=False)
                                  for _ in range(4)))
    gen = torch.Generator().manual_seed(0)
    loss = lambda m, xb: (m(xb) - xb).pow(2).mean() / xb.pow(2).mean()
    return fit(stack, lambda: torch.randn(16, 12, 32, generator=gen), loss_fn=loss, steps=steps,
               optimizer=build_optimizer(stack, "adam", lr=3e-3), schedule="constant", progress=False)


def check_and_glue_identity_fit(runs: dict):
    """The identity fit with and without residuals ({"with residual": History, "without residual": History}):
    printed, claimed, glued, drawn -> the figure."""
    for name, h in runs.items():
        print(f"{name:16s} relative error: step 1 {h.train_loss[0]:.3f} -> step {h.steps} {h.train_loss[-1]:.4f}")
    id_res, id_plain = runs["with residual"].train_loss[-1], runs["without residual"].train_loss[-1]
    claim(id_res < 0.1 * id_plain, f"the identity is easy with the residual ({id_res:.4f}) and hard without "
          f"({id_plain:.3f})")
    glue("ch6_identity_res", f"{id_res:.3f}", tol=0.02, spread="glue_spread", margin=2)
    glue("ch6_identity_plain", f"{id_plain:.2f}", rel=0.3, spread="glue_spread", margin=2)
    glue("ch6_identity_res0", f"{runs['with residual'].train_loss[0]:.2f}", rel=0.3, spread="glue_spread", margin=2)
    fig, ax = plots.new_figure(figsize=(5.2, 3.2))
    plots.line_plot(range(1, len(runs["with residual"].train_loss) + 1), {k: h.train_loss for k, h in runs.items()},
                    "step", "relative error |out - x|² / |x|²", title="Learning to do nothing: 4 blocks", logy=True,
                    marker="", ax=ax)
    return fig


def draw_batchnorm_wobble(sizes: list, wobble: Dict[str, list]):
    """The std of one fixed example's normalised output over random batches, against the batch size (log axes)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig = plots.line_plot(sizes, {"BatchNorm": wobble["BatchNorm"]}, "batch size", "std of the same example's output",
                          title="BatchNorm: the output depends on the batch", logx=True, logy=True)
    ax = fig.axes[0]
    ax.set_yticks([0.1, 0.2, 0.4, 0.8])
    for axis in (ax.xaxis, ax.yaxis):                        # 0.2 and 100, not 2 x 10^-1 and 10^2
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())
    ax.text(0.03, 0.05, "LayerNorm: 0 at every batch size (a log axis cannot show it)", transform=ax.transAxes,
            fontsize=7)
    return fig


def head_stats(maps: torch.Tensor, idx: torch.Tensor, stoi: dict) -> dict:
    """Per layer and head, averaged over the windows `idx` (B, T) and their queries at positions 8 and later: the
    mean look-back, the weight on the previous character, on spaces, on newlines, and the entropy of the weights.
    `maps`: (B, L, H, T, T) attention weights; `stoi`: the tokenizer's character -> id. -> {name: (L, H)}."""
    T = maps.shape[-1]
    back = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).clamp(min=0).float()
    is_char = lambda c: (idx.cpu() == stoi[c])[:, None, None, None, :].float()   # keys that are c
    m = maps[..., 8:, :]                                        # queries with at least 8 keys
    return {"look-back": (m * back[8:]).sum(-1).mean((0, 3)),
            "previous": maps.diagonal(-1, -2, -1)[..., 7:].mean((0, 3)),
            "space": (m * is_char(" ")).sum(-1).mean((0, 3)),
            "newline": (m * is_char("\n")).sum(-1).mean((0, 3)),
            "entropy": -(m * m.clamp_min(1e-9).log()).sum(-1).mean((0, 3))}


def copy_run(n_layers: int, seed: int, steps: int, lr: float, warmup: int, device, train_seconds: dict) -> float:
    """Train a BlockLM of `n_layers` (d_model 64, 4 heads) on the repeat task (loss on the predictable positions
    only) -> its accuracy on the second copy over 2,000 fresh sequences. Its training time goes into
    train_seconds."""
    from ..blocks import BlockLM
    from ..optim import build_optimizer
    from ..optim import fit
    from ..utils import seed_everything

    seed_everything(seed)
    gen = torch.Generator().manual_seed(seed)
    lm = BlockLM(32, 32, 64, positive_int(n_layers=n_layers), 4).to(device)

    def loss(m, batch):
        x, y, c = (t.to(device) for t in batch)
        return F.cross_entropy(m(x)[c], y[c])
    hist = fit(lm, lambda: repeat_batch(32, 32, 32, 4, 10, generator=gen), loss_fn=loss, steps=steps,
               optimizer=build_optimizer(lm, "adamw", lr=lr), warmup=warmup, grad_clip=1.0, progress=False,
               desc=f"copy, {n_layers} layer(s)")
    train_seconds[f"copy, {n_layers} layer(s), seed {seed}"] = hist.train_seconds
    x, y, c = repeat_batch(2000, 32, 32, 4, 10, generator=torch.Generator().manual_seed(10_000))
    with torch.no_grad():
        return (lm(x.to(device)).argmax(-1).cpu() == y)[c].float().mean().item()


def check_and_glue_newline_head(stats: dict, line_maps: torch.Tensor, line: str, names: list) -> str:
    """The head most drawn to newlines (over the validation windows: head_stats' "newline", (L, H)), claimed not to
    be in layer 1, whose heads look closer; and what it does on the slider's `line` (line_maps: (L, H, T, T)): its
    mean weight on each key over the rows after the first newline, the newline's share and the two keys it favours,
    glued as a sentence -> the head's name ("layer l, head h")."""
    L, H = stats["newline"].shape
    flat = int(stats["newline"].flatten().argmax())
    layer, head = divmod(flat, H)
    name, lb = names[flat], stats["look-back"]
    claim(layer > 0 and lb[0].mean() < lb[-1].mean(),
          f"the newline head ({name}) is not in layer 1, whose heads look closer "
          f"(mean look-back {lb[0].mean():.2f} vs {lb[-1].mean():.2f} in the last layer)")
    nl = line.index("\n")
    w = line_maps[layer, head, nl + 1:, :].mean(0)                   # rows that can see the newline: mean per key
    chars = {}
    for j, c in enumerate(line[:len(w)]):
        chars[c] = chars.get(c, 0.0) + float(w[j])
    show = lambda c: "↵" if c == "\n" else c
    top = [c for c in sorted(chars, key=chars.get, reverse=True) if c != "\n"][:2]
    on_newline = chars["\n"]
    sentence = (f"on this line, after the newline, it gives the newline {on_newline:.0%} of its weight, "
                + " and ".join(f"'{show(c)}' {chars[c]:.0%}" for c in top))
    print(f"{name}, the head most drawn to newlines:\n  {sentence}")
    glue("ch6_newline_head", name, tol="any")
    glue("ch6_newline_line", sentence, tol="any")
    return name
