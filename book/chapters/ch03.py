"""Chapter 3, Bahdanau attention: its drawing, the general-score exercise checker, the cost of a training step, the
recorded parameter-matched comparison (read, drawn, checked and glued) and where the decoder looks.
"""
from __future__ import annotations

import torch

from ..checks import returned
from ..diagrams import Diagram, ROLES, _SRC
from ..language import _

__all__ = ["draw_bahdanau_attention", "check_general_score", "step_cost", "print_step_cost", "matched_results",
           "print_matched", "draw_matched", "check_and_glue_matched", "alignment_misses"]


def _bidirectional_row(d: Diagram, xs, y_tok: float, y_h: float, y_cat: float) -> None:
    """Source words under a bidirectional GRU: a forward state and a backward state per word (the forward chain's
    arrows point right, the backward chain's left), concatenated into h_i = [forward; backward]."""
    rnn = ROLES["rnn"][1]
    for i, (x, word) in enumerate(zip(xs, _SRC)):
        d.box(x, y_tok, word, role="token", w=1.25)
        d.box(x - 0.42, y_h, rf"$\overrightarrow{{h}}_{i + 1}$", role="rnn", w=0.84, h=0.7)
        d.box(x + 0.42, y_h, rf"$\overleftarrow{{h}}_{i + 1}$", role="rnn", w=0.84, h=0.7)
        d.arrow((x - 0.2, y_tok + 0.35), (x - 0.42, y_h - 0.35))                # the word into both directions
        d.arrow((x + 0.2, y_tok + 0.35), (x + 0.42, y_h - 0.35))
        d.box(x, y_cat, f"$h_{i + 1}$", role="memory", w=1.3, h=0.6)
        d.arrow((x - 0.42, y_h + 0.35), (x - 0.3, y_cat - 0.3), color=rnn)     # concatenated
        d.arrow((x + 0.42, y_h + 0.35), (x + 0.3, y_cat - 0.3), color=rnn)
        if i:   # each chain joins its own boxes: over the top from forward to forward, under from backward to backward
            d.arrow((xs[i - 1] - 0.3, y_h + 0.35), (x - 0.54, y_h + 0.35), color=rnn, curve=-0.35)   # left to right
            d.arrow((x + 0.3, y_h - 0.35), (xs[i - 1] + 0.54, y_h - 0.35), color=rnn, curve=-0.35)   # right to left


def draw_bahdanau_attention():
    """Chapter 3: one decoder step with additive attention (Bahdanau et al., 2014).

    A bidirectional GRU reads the source both ways; h_i joins its forward and backward states. The previous decoder
    state s_{t-1} scores every h_i (e_ti = v_a^T tanh(W_a s_{t-1} + U_a h_i)), a softmax turns the scores into
    weights alpha_ti, and each h_i (the values) reaches the sum through its weight: c_t = sum_i alpha_ti h_i. The GRU
    step reads y_{t-1} and c_t; the next word is predicted from [s_t; c_t]. Returns a matplotlib Figure.
    """
    d = Diagram(18, 11.4, title="One decoder step with Bahdanau attention: a weighted sum of every encoder state")
    xs, mem, att = [1.3, 3.6, 5.9, 8.2], ROLES["memory"][1], ROLES["attn"][1]
    y_cat, y_q, y_e, y_soft, y_a, y_mul, y_c = 3.35, 4.3, 5.2, 6.25, 7.3, 8.45, 9.75
    _bidirectional_row(d, xs, 0.6, 2.05, y_cat)
    d.group(0.2, 0.1, 9.3, 2.6, role="rnn")
    d.text(9.55, 1.45, "bidirectional GRU encoder:\n→ reads left to right,\n← right to left",
           fontsize=8, ha="left", color=ROLES["rnn"][1])
    d.text(9.55, y_cat, r"$h_i = [\overrightarrow{h}_i; \overleftarrow{h}_i]$: all kept", fontsize=8, ha="left",
           color=mem)
    dec = 15.6
    d.box(dec, y_q, "$s_{t-1}$", role="rnn", w=1.3)
    d.text(dec + 0.05, y_q - 0.75, "previous decoder\nstate (the query)", fontsize=8, italic=True)
    d.line([(dec - 0.65, y_q), (xs[0] - 0.55, y_q)], color=att)
    for i, x in enumerate(xs):
        d.box(x - 0.3, y_e, f"$e_{{t{i + 1}}}$", role="attn", w=1.1)
        d.arrow((x - 0.15, y_cat + 0.3), (x - 0.15, y_e - 0.35))                 # h_i into its score (the key)
        d.arrow((x - 0.55, y_q), (x - 0.55, y_e - 0.35), color=att)             # s_{t-1} into every score
        d.arrow((x - 0.3, y_e + 0.35), (x - 0.3, y_a - 0.35))
        d.box(x - 0.3, y_a, rf"$\alpha_{{t{i + 1}}}$", role="attn", w=1.1)
        d.circle(x + 0.5, y_mul, r"$\times$", r=0.24, role="memory")
        d.arrow((x - 0.3, y_a + 0.35), (x + 0.3, y_mul - 0.1), color=att)      # the weight ...
        d.arrow((x + 0.5, y_cat + 0.3), (x + 0.5, y_mul - 0.24), color=mem, width=2.0)   # ... times the value h_i
    d.group(xs[0] - 1.0, y_soft - 0.3, xs[-1] + 0.35, y_soft + 0.3, role="attn")
    d.text(9.55, y_soft, "softmax over $i$ (all scores together)", fontsize=8, ha="left", color=att)
    d.text(9.55, y_mul, r"each value $h_i$ times its weight $\alpha_{ti}$", fontsize=8, ha="left", color=mem)
    d.text(9.55, y_e, "scores\n" r"$e_{ti} = v_a^\top \tanh(W_a s_{t-1} + U_a h_i)$", fontsize=8, ha="left")
    d.text(9.55, y_a, "weights $\\alpha_{ti} > 0$,\nsumming to 1 over $i$", fontsize=8, ha="left")
    sum_xy = (10.4, y_c)
    d.circle(*sum_xy, text=r"$\Sigma$", r=0.3, role="memory")
    for x in xs:
        d.arrow((x + 0.5, y_mul + 0.24), (sum_xy[0] - 0.3, sum_xy[1]), color=mem, curve=-0.12)
    d.text(4.6, 10.75, r"context $c_t = \sum_i \alpha_{ti} h_i$: the encoder states (values), weighted and summed",
           fontsize=8, color=mem)
    c_xy = (12.0, y_c)
    d.box(*c_xy, "$c_t$", role="memory", w=1.0, bold=True)
    d.arrow((sum_xy[0] + 0.3, sum_xy[1]), (c_xy[0] - 0.5, c_xy[1]))
    gru = (dec, 7.0)
    d.box(*gru, "GRU step\n→ $s_t$", role="rnn", w=1.5, h=0.9)
    d.arrow((c_xy[0] + 0.2, c_xy[1] - 0.35), (gru[0] - 0.75, gru[1] + 0.2), color=mem)
    d.arrow((dec, y_q + 0.35), (gru[0], gru[1] - 0.45))
    d.box(17.25, gru[1], "$y_{t-1}$", role="token", w=1.1)
    d.arrow((16.7, gru[1]), (gru[0] + 0.75, gru[1]))
    out = (dec, y_c)
    d.box(*out, "predict from\n$[s_t; c_t]$", role="plain", w=1.9, h=0.9)
    d.arrow((gru[0], gru[1] + 0.45), (out[0], out[1] - 0.45), text="$s_t$", text_offset=(0.3, -0.1))
    d.arrow((c_xy[0] + 0.5, c_xy[1]), (out[0] - 0.95, out[1]), color=mem)
    d.box(dec, 10.95, "$y_t$", role="token", w=1.1)
    d.arrow((dec, out[1] + 0.45), (dec, 10.6))
    return d.figure


def check_general_score(fn) -> bool:
    """Self-check for the Chapter 3 exercise: fn(s (B, Ddec), H (B, S, Denc), W (Ddec, Denc)) -> (B, S)
    must equal the scores s^T W h_i. Raises AssertionError with a hint otherwise."""
    g = torch.Generator().manual_seed(0)
    s, H, W = torch.randn(2, 3, generator=g), torch.randn(2, 5, 4, generator=g), torch.randn(3, 4, generator=g)
    out = returned(fn(s, H, W))
    # explicit raises, not `assert`: the check must still reject wrong answers under `python -O`
    if tuple(out.shape) != (2, 5):
        raise AssertionError(_("scores should have shape (B, S) = (2, 5), got {shape}").format(shape=tuple(out.shape)))
    want = torch.einsum("bd,de,bse->bs", s, W, H)
    if not torch.allclose(out, want, atol=1e-5):
        raise AssertionError(_("shape is right but values differ: score_i = s^T W h_i"))
    return True


def step_cost(models: dict, task, device=None) -> dict:
    """One training step (forward + backward) of each model on the same 64 sentences of 28-32 words:
    {name: (GFLOPs counted, ms on this machine)}, the models timed in turns so that other programs slow them alike."""
    import torch.nn.functional as F

    from ..timing import count_flops, time_in_turns

    b = task.train_batch(64, 28, 32, torch.Generator().manual_seed(0))
    src, tgt_in, tgt_out = b.src.to(device), b.tgt_in.to(device), b.tgt_out.to(device)

    def step_of(m):
        def step():
            F.cross_entropy(m(src, tgt_in).flatten(0, 1), tgt_out.flatten(), ignore_index=0).backward()
            m.zero_grad(set_to_none=True)
        return step

    steps = {name: step_of(m) for name, m in models.items()}
    flops = {name: count_flops(step) for name, step in steps.items()}
    return {name: (flops[name] / 1e9, 1e3 * s) for name, s in zip(steps, time_in_turns(list(steps.values())))}


def print_step_cost(cost: dict) -> None:
    print("one training step, 64 sentences of 28-32 words:")
    for name, (gflops, ms) in cost.items():
        print(f"  {name:15s} {gflops:.2f} GFLOPs (counted), {ms:.0f} ms on this machine")


def matched_results(buckets) -> dict:
    """benchmarks/seq2seq_matched.py's record: {"run": provenance, "configs", "params": {config: n},
    "exact": {config: {bucket: [one value per seed]}}, "size": {(config, "d_enc" | "d_dec"): n}}."""
    from ..results import provenance, read_rows

    rows = read_rows("seq2seq_matched")
    configs = list(dict.fromkeys(r["config"] for r in rows))
    exact = {c: {b: [float(r["exact"]) for r in rows if r["config"] == c and (int(r["lo"]), int(r["hi"])) == b]
                 for b in buckets} for c in configs}
    return {"run": provenance("seq2seq_matched"), "configs": configs, "exact": exact,
            "params": {r["config"]: int(r["params"]) for r in rows},
            "size": {(r["config"], f): int(r[f]) for r in rows for f in ("d_enc", "d_dec")}}


def print_matched(rec: dict, buckets) -> None:
    run = rec["run"]
    print(f"recorded by {run['script']}: {len(run['seeds'])} seeds per model,")
    print(f"{run['wall_s'] / 60:.0f} min on one thread of {run['cpu']}")
    short = {c: c.removeprefix("plain, ") for c in rec["configs"]}
    print("exact match, lowest-highest seed")
    print("length  | " + " | ".join(f"{short[c]:>12s}" for c in rec["configs"]))
    for b in buckets:
        print(f"{b[0]:2d}-{b[1]:<4d} | " + " | ".join(
            f"{min(rec['exact'][c][b]):.3f}-{max(rec['exact'][c][b]):.3f}".rjust(12) for c in rec["configs"]))
    print("params  | " + " | ".join(f"{rec['params'][c]:>12,}" for c in rec["configs"]))


def draw_matched(rec: dict, buckets, mids):
    """Exact match by length, one thin line per seed and a band over the seeds, for each recorded model."""
    from .. import plots

    colors = dict(zip(rec["configs"], ["tab:red", "tab:orange", "tab:purple", "tab:blue"]))
    fig, ax = plots.new_figure(figsize=(7.6, 3.4))
    # the plain model last and with markers: the raised models' lines lie almost on it, and at 0 on the long
    # sentences every plain line lies on the axis, which the lower limit below -0.03 keeps visible
    order = [c for c in rec["configs"] if c != "plain"] + ["plain"]
    for z, c in enumerate(order):
        by_bucket = [rec["exact"][c][b] for b in buckets]
        ax.fill_between(mids, [min(v) for v in by_bucket], [max(v) for v in by_bucket], color=colors[c], alpha=0.2)
        style = dict(marker="o", markersize=3.5, mfc="white") if c == "plain" else {}
        for one_seed in zip(*by_bucket):
            ax.plot(mids, one_seed, color=colors[c], lw=0.9, zorder=3 + z, **style)
        ax.plot([], [], color=colors[c], label=f"{c} ({rec['params'][c]:,} parameters)", **style)
    ax.set(xlabel="source length (bucket middle)", ylabel="exact match, held-out", ylim=(-0.03, 1.03),
           title=f"{len(rec['run']['seeds'])} seeds each (recorded)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    return fig


def check_and_glue_matched(rec: dict, buckets, live_attn_long: float, live_plain_long: float) -> None:
    """The recorded comparison's claims, asserted, and its numbers glued for the prose: every plain seed at 0 on
    the longest sentences and every attention seed above them; the live run pointing the same way; what the raised
    models bought on short and middle sentences (their ranges against the plain model's)."""
    from ..utils import claim, glue

    exact, configs = rec["exact"], rec["configs"]
    longest, shortest, middle = buckets[-1], buckets[0], buckets[1]
    raised = [c for c in configs if "raised" in c]
    pct = lambda v: f"{v:.0%}"
    span = lambda vals: pct(min(vals)) if pct(min(vals)) == pct(max(vals)) else f"{pct(min(vals))}–{pct(max(vals))}"
    plain_long = max(max(exact[c][longest]) for c in configs if c != "additive")
    attn_long = exact["additive"][longest]
    claim(min(attn_long) > plain_long and live_attn_long - live_plain_long > 0.5,
          f"the live run (one seed) should point the way every recorded seed does: attention ahead on the longest "
          f"sentences by {live_attn_long - live_plain_long:.3f} live; recorded, attention {min(attn_long):.3f}-"
          f"{max(attn_long):.3f} against at most {plain_long:.3f} for any plain model")
    raised_mid = [v for c in raised for v in exact[c][middle]]
    claim(plain_long == 0 and min(raised_mid) >= min(exact["plain"][middle]),
          f"the raised models gain a little in the middle bucket and nothing on the longest: {exact}")
    glue("ch3_rec_seeds", len(rec["run"]["seeds"]))
    glue("ch3_rec_d_dec", rec["size"]["plain, d_dec raised", "d_dec"])
    glue("ch3_rec_d_enc", rec["size"]["plain, d_enc raised", "d_enc"])
    glue("ch3_rec_minutes", f"{rec['run']['wall_s'] / 60:.0f}")
    glue("ch3_rec_plain_long", pct(plain_long))
    glue("ch3_rec_attn_long_lo", pct(min(attn_long)))
    glue("ch3_rec_attn_long_hi", pct(max(attn_long)))
    glue("ch3_rec_plain_short", span(exact["plain"][shortest]))
    glue("ch3_rec_raised_short", span([v for c in raised for v in exact[c][shortest]]))
    glue("ch3_rec_plain_mid", span(exact["plain"][middle]))
    glue("ch3_rec_raised_mid_range", span(raised_mid))
    glue("ch3_rec_raised_mid", pct(max(max(exact[c][buckets[2]]) for c in raised)))


def alignment_misses(model, tests: dict, task, device=None) -> dict:
    """Where the decoder's largest attention weight sits against the true source word, over every test sentence:
    {"hit": share on the true word, "left": share of the misses one or two words to its left, "right": ... to its
    right, "next": share of the misses on the source word of the next output word, "words": output words}."""
    offsets, ahead = [], 0
    for batch in tests.values():
        _, w = model.greedy(batch.src.to(device), batch.tgt_out.shape[1] + 5)
        for i, src_ids in enumerate(batch.src):
            truth = task.alignment(task.decode(src_ids, "src"))
            looked = w[i, :len(truth), :len(truth)].argmax(-1).tolist()
            offsets += [a - b for a, b in zip(looked, truth)]
            ahead += sum(a != b and a == c for a, b, c in zip(looked, truth, truth[1:]))
    misses = max(1, len(offsets) - offsets.count(0))
    return {"hit": offsets.count(0) / len(offsets), "left": sum(o in (-1, -2) for o in offsets) / misses,
            "right": sum(o in (1, 2) for o in offsets) / misses, "next": ahead / misses, "words": len(offsets)}
