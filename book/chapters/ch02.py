"""Chapter 2, the limits of the RNN: the encoder-decoder drawing, the LSTM-step exercise checker, and the
measurements' plumbing (recorded tables read and printed, claims asserted, numbers glued, figures drawn).
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..checks import pair as _pair, returned
from ..diagrams import Diagram, ROLES, _SRC, _TGT
from ..language import _

__all__ = ["draw_rnn_encoder_decoder", "check_lstm_step", "check_and_glue_samples", "count_and_time",
           "check_and_glue_costs", "check_recall", "check_and_glue_slopes", "curriculum_record",
           "print_curriculum", "check_and_glue_curriculum", "plot_curriculum", "capacity_record", "print_capacity",
           "check_and_glue_capacity", "plot_capacity", "check_and_glue_plain", "check_and_glue_positions",
           "draw_translation", "bottleneck_record", "print_bottleneck", "check_and_glue_bottleneck", "plot_bottleneck"]


def _encoder_row(d: Diagram, xs, y_tok: float, y_h: float, states: bool) -> None:
    """Source words (tokens) under a chain of encoder states h_1..h_S, each waiting for the one before."""
    for i, (x, word) in enumerate(zip(xs, _SRC)):
        d.box(x, y_tok, word, role="token", w=1.25)
        d.box(x, y_h, f"$h_{i + 1}$" if states else "GRU", role="rnn", w=1.25)
        d.arrow((x, y_tok + 0.35), (x, y_h - 0.35))
        if i:
            d.arrow((xs[i - 1] + 0.63, y_h), (x - 0.63, y_h))


def draw_rnn_encoder_decoder():
    """Chapter 2's encoder-decoder: the encoder's last state is the one summary vector the decoder sees.

    Source words feed a chain of encoder states; only the final one leaves the encoder, as the summary c,
    which starts the decoder and is fed again at every decoder step. Returns a matplotlib Figure.
    """
    d = Diagram(17, 5.6, title="Encoder–decoder without attention: the whole source squeezed into one vector")
    xs, ds, mem = [1.0, 2.7, 4.4, 6.1], [10.4, 12.4, 14.4, 16.0], ROLES["memory"][1]
    _encoder_row(d, xs, 0.8, 3.0, states=False)
    d.group(0.15, 0.25, 6.95, 3.7, "encoder (reads the source)", role="rnn")
    d.box(8.25, 3.0, "summary $c$", role="memory", w=1.5, h=0.8, bold=True)
    d.arrow((6.73, 3.0), (7.5, 3.0))
    d.text(8.2, 4.45, "one vector of\nfixed size, however\nlong the sentence", fontsize=8, italic=True, color=mem)
    for t, (x, word) in enumerate(zip(ds, _TGT[:-1])):
        d.box(x, 0.8, word, role="token", w=1.35)
        d.box(x, 3.0, f"$s_{t + 1}$", role="rnn", w=1.25)
        d.box(x, 4.6, _TGT[t + 1], role="token", w=1.35)
        d.arrow((x - 0.2, 1.15), (x - 0.2, 2.65))
        d.arrow((x, 3.35), (x, 4.25))
        d.arrow((x + 0.3, 1.75), (x + 0.3, 2.65), color=mem, dashed=True)
        if t:
            d.arrow((ds[t - 1] + 0.63, 3.0), (x - 0.63, 3.0))
    d.arrow((9.0, 3.0), (ds[0] - 0.63, 3.0))
    d.line([(8.25, 2.6), (8.25, 1.75), (ds[-1] + 0.3, 1.75)], color=mem, dashed=True)
    d.text(8.25, 1.2, "$c$ again at\nevery step", fontsize=8, color=mem)
    d.group(9.45, 0.25, 16.85, 5.15, "decoder (writes the translation, one word per step)", role="rnn")
    return d.figure


def check_lstm_step(fn) -> bool:
    """Self-check for the Chapter 2 exercise: fn(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh)
    -> (h', c') must match nn.LSTMCell (gate order i, f, g, o). Raises AssertionError with a hint."""
    g = torch.Generator().manual_seed(0)
    cell = nn.LSTMCell(4, 3)
    x, h, c = torch.randn(2, 4, generator=g), torch.randn(2, 3, generator=g), torch.randn(2, 3, generator=g)
    h_ref, c_ref = cell(x, (h, c))
    h_new, c_new = _pair(returned(fn(x, h, c, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)),
                         "(h_new, c_new)")
    # explicit raises, not `assert`: the check must still reject wrong answers under `python -O`
    if tuple(h_new.shape) != (2, 3) or tuple(c_new.shape) != (2, 3):
        raise AssertionError(_("h' and c' should be (B, H) = (2, 3), got {h_shape} and {c_shape}")
                             .format(h_shape=tuple(h_new.shape), c_shape=tuple(c_new.shape)))
    if not torch.allclose(c_new, c_ref, atol=1e-5):
        raise AssertionError(_("c' differs: c' = f * c + i * g (gate order i, f, g, o)"))
    if not torch.allclose(h_new, h_ref, atol=1e-5):
        raise AssertionError(_("c' is right but h' differs: h' = o * tanh(c')"))
    return True


# ---- the chapter's measurements, read, printed, checked and glued: plumbing out of the reader's cells -------------

def _mean(xs):
    return sum(xs) / len(xs)


def _span(xs) -> str:
    """The seeds' range as percentages, one number where every seed shows alike."""
    from ..results import value_range

    return value_range(min(xs), max(xs), "{:.0%}")


def check_and_glue_samples(sampled: str, train_text: str, train_ids, tok, generator=None) -> None:
    """The share of the LSTM's sampled words that are words of the training text, against a bigram's 2,000 sampled
    characters (drawn with the same generator); printed, asserted, glued."""
    from .. import ngram
    from ..utils import claim, glue

    bare = lambda w: w.strip(".,;:!?'-").lower()
    train_words = {bare(w) for w in train_text.split()}
    known_share = lambda text: sum(bare(w) in train_words for w in text.split()) / max(len(text.split()), 1)
    log_probs = ngram.bigram_log_probs(ngram.bigram_counts(train_ids, tok.vocab_size), 1.0)
    bigram_text = tok.decode(ngram.sample_bigram(log_probs, tok.encode("\n")[0], 2000, generator=generator))
    known, known_bigram = known_share(sampled), known_share(bigram_text)
    claim("\n" in sampled and any(p in sampled for p in ".,;:!?") and known > 0.45 and known > known_bigram + 0.15,
          f"line breaks and punctuation appear, and {known:.0%} of the sampled words are words of the training text "
          f"(the bigram's samples: {known_bigram:.0%})")
    print(f"words of the training text: LSTM {known:.0%} | bigram {known_bigram:.0%}")
    glue("ch2_known_lstm", f"{known:.0%}", tol=15, spread="glue_spread", margin=2)
    glue("ch2_known_bigram", f"{known_bigram:.0%}", tol=5, spread="glue_spread", margin=2)


def count_and_time(contenders: dict, lengths, make_input) -> tuple:
    """For every length T: the matrix products each contender runs (counted) and its time on this machine (the
    contenders timed in turns), on the input make_input(T). Returns ({name: [products]}, {name: [seconds]})."""
    from ..timing import count_calls, time_in_turns

    products = {name: [] for name in contenders}
    times = {name: [] for name in contenders}
    with torch.no_grad():
        for T in lengths:
            x = make_input(T)
            for name, f in contenders.items():
                products[name].append(count_calls(lambda f=f, x=x: f(x), "mm", "addmm"))
            fns = [lambda f=f, x=x: f(x) for f in contenders.values()]
            for name, s in zip(contenders, time_in_turns(fns, min_run_time=0.1)):
                times[name].append(s)
    return products, times


def check_and_glue_costs(lengths, products: dict, times: dict, matmul_flops) -> dict:
    """The counted laws (asserted: they hold on every machine) and the times of this machine (glued as timings,
    with each one's slope on the log-log plot said as measured). Returns {name: milliseconds per length}."""
    import math

    from ..utils import claim, glue

    ms = {name: [1000 * s for s in ts] for name, ts in times.items()}
    grow = {name: ts[-1] / ts[0] for name, ts in times.items()}
    slope = {name: math.log(g) / math.log(lengths[-1] / lengths[0]) for name, g in grow.items()}
    print(f"{'':26s} | products at T={lengths[0]}, T={lengths[-1]} | ms at T={lengths[0]}, T={lengths[-1]} | slope")
    for name in ms:
        print(f"{name:26s} | {products[name][0]:12d} {products[name][-1]:6d} | {ms[name][0]:9.3f} "
              f"{ms[name][-1]:8.3f} | {slope[name]:5.2f}")
    loop = products["our loop (Python)"]
    claim(all(n == loop[0] // lengths[0] * T for n, T in zip(loop, lengths)), f"a few per step: {loop}")
    claim(products["nn.RNN (loop in C++)"] == [1 + T for T in lengths], "all inputs at once, then one per step")
    claim(products["one matmul, all positions"] == [1] * len(lengths), "one operation, whatever T")
    claim(matmul_flops[1] == 64 * matmul_flops[0], f"... whose arithmetic grows with T: {matmul_flops}")
    fold = lengths[-1] // lengths[0]

    loops = {"our loop (Python)": "our loop", "nn.RNN (loop in C++)": "nn.RNN"}
    verdict = {name: "close to it" if slope[name] >= 0.85 else "below it" for name in loops}
    each = "; ".join(f"{who} {grow[name]:.0f} times the time for {fold} times the length (slope {slope[name]:.2f})"
                     for name, who in loops.items())
    if len(set(verdict.values())) == 1:
        said = f"both loops came {verdict['our loop (Python)']}: {each}"
    else:
        said = "; ".join(f"{who} came {verdict[name]}" for name, who in loops.items()) + f" ({each})"
    glue("ch2_loop_slopes", said, timing=True)
    glue("ch2_loop_products", f"{loop[-1]:,}")
    glue("ch2_matmul_flops_growth", f"{matmul_flops[1] / matmul_flops[0]:.0f}")
    glue("ch2_matmul_growth", f"{grow['one matmul, all positions']:.0f}", timing=True)
    glue("ch2_matmul_speedup", f"{times['nn.RNN (loop in C++)'][-1] / times['one matmul, all positions'][-1]:.0f}",
         timing=True)
    return ms


def check_recall(acc: dict, grads: dict, distances, T_train: int) -> None:
    """The live recall run: accuracy and gradient by distance printed, the claims the prose makes asserted."""
    from ..utils import claim

    claim(acc["rnn"][4] < 0.5 and all(acc["rnn"][k] < 0.3 for k in distances if k >= 16),
          f"the RNN collapses within a few steps, near chance (0.125) from k = 16: {acc['rnn']}")
    claim(all(acc["lstm"][k] >= 0.9 for k in distances if k < T_train),
          f"the LSTM stays near perfect across the trained distances: {acc['lstm']}")
    claim(acc["lstm"][256] > 0.5, f"the LSTM still recalls most digits at k = 256: {acc['lstm'][256]:.2f}")
    print("   k | RNN acc | LSTM acc | RNN gradient | LSTM gradient")
    for k in distances:
        print(f"{k:4d} | {acc['rnn'][k]:7.2f} | {acc['lstm'][k]:8.2f} | {grads['rnn'][k]:12.1e} | "
              f"{grads['lstm'][k]:13.1e}")


def _decay_slope(g: dict) -> float:
    """Least-squares slope of log10(gradient) against k ({k: gradient}), over the k where it is not exactly 0."""
    import math

    ks = torch.tensor([k for k in g if g[k] > 0], dtype=torch.float64)
    logs = torch.tensor([math.log10(g[k]) for k in g if g[k] > 0], dtype=torch.float64)
    return (((ks - ks.mean()) * (logs - logs.mean())).sum() / ((ks - ks.mean()) ** 2).sum()).item()


def check_and_glue_slopes(grads: dict, grads_init: dict, acc: dict) -> None:
    """The gradient's decay per step, trained and untrained, printed, asserted and glued, with the recall
    accuracies the prose cites."""
    import math

    from ..utils import claim, glue

    slope = {kind: _decay_slope(grads[kind]) for kind in grads}
    slope_init = {kind: _decay_slope(grads_init[kind]) for kind in grads_init}
    print(f"trained:   RNN {slope['rnn']:.3f}, LSTM {slope['lstm']:.4f} decades per step")
    print(f"untrained: RNN {slope_init['rnn']:.3f}, LSTM {slope_init['lstm']:.3f} decades per step")
    claim(slope_init["rnn"] < -0.1 and slope_init["lstm"] < -0.1, f"untrained, both fade: {slope_init}")
    last = max(grads["rnn"])
    claim(slope["rnn"] < -0.1 and grads["rnn"][last] < 1e-20,
          f"the trained RNN still fades: {slope['rnn']:.3f} decades per step, {grads['rnn'][last]:.1e} at k = {last}")
    claim(abs(slope["lstm"]) < abs(slope["rnn"]) / 10,
          f"the LSTM's curve is at least 10x flatter: {slope['lstm']:.4f} vs {slope['rnn']:.3f} decades per step")
    glue("ch2_rnn_slope", f"{slope['rnn']:.3f}", tol=0.04, spread="glue_spread", margin=2)
    glue("ch2_rnn_factor", f"{10 ** slope['rnn']:.2f}", tol=0.06, spread="glue_spread", margin=2)
    glue("ch2_rnn_decades_64", f"{math.log10(grads['rnn'][1] / grads['rnn'][64]):.0f}", tol=3,
         spread="glue_spread", margin=2)
    glue("ch2_lstm_slope", f"{slope['lstm']:.4f}", tol=0.005, spread="glue_spread", margin=2)
    glue("ch2_init_rnn_loss", f"{-slope_init['rnn']:.2f}", tol=0.01, spread="glue_spread", margin=2)
    glue("ch2_init_lstm_loss", f"{-slope_init['lstm']:.2f}", tol=0.01, spread="glue_spread", margin=2)
    glue("ch2_rnn_acc_1", f"{acc['rnn'][1]:.0%}", tol=20, spread="glue_spread", margin=2)
    glue("ch2_rnn_acc_4", f"{acc['rnn'][4]:.0%}", tol=10, spread="glue_spread", margin=2)
    glue("ch2_rnn_acc_16", f"{acc['rnn'][16]:.0%}", tol=5, spread="glue_spread", margin=2)
    glue("ch2_lstm_acc_64", f"{acc['lstm'][64]:.0%}", tol=10, spread="glue_spread", margin=2)
    glue("ch2_lstm_acc_256", f"{acc['lstm'][256]:.0%}", tol=15, spread="glue_spread", margin=2)
    glue("ch2_lstm_acc_min", f"{min(acc['lstm'].values()):.0%}", tol=15, spread="glue_spread", margin=2)
    g = grads["rnn"]
    far = max(k for k in g if g[k] > 0)
    zero = [k for k in sorted(g) if g[k] == 0]
    glue("ch2_rnn_grad_end", f"at k = {far} it is down to {g[far]:.0e}"
         + (f", and from k = {zero[0]} on it is exactly zero" if zero else ""), tol="any")


# -- the recorded curriculum run (benchmarks/recall_curriculum.py) --

def curriculum_record() -> dict:
    """benchmarks/recall_curriculum.py's record: {"prov", "ks", "seeds", "runs": {(cell, schedule, seed): {k: (accuracy,
    gradient)}}, "slope": {(cell, schedule): per-seed gradient slopes}}."""
    from ..results import provenance, read_rows

    rows = read_rows("recall_curriculum")
    ks, seeds = sorted({int(r["k"]) for r in rows}), sorted({int(r["seed"]) for r in rows})
    runs = {}
    for r in rows:
        runs.setdefault((r["cell"], r["schedule"], int(r["seed"])), {})[int(r["k"])] = (float(r["acc"]),
                                                                                       float(r["grad"]))
    slope = {(c, sch): [_decay_slope({k: runs[(c, sch, s)][k][1] for k in ks}) for s in seeds]
             for c in ("rnn", "lstm") for sch in ("uniform", "curriculum")}
    return {"prov": provenance("recall_curriculum"), "ks": ks, "seeds": seeds, "runs": runs, "slope": slope}


def _rec_acc(rec: dict, cell: str, schedule: str, k: int) -> list:
    return [rec["runs"][(cell, schedule, s)][k][0] for s in rec["seeds"]]


def _recorded_by(prov: dict) -> None:
    print(f"recorded by {prov['script']}: seeds {prov['seeds']}, {prov['wall_s'] / 60:.0f} min on "
          f"{prov['threads']} thread of")
    print(f"  {prov['cpu']}")


def print_curriculum(rec: dict) -> None:
    """The recorded recall accuracies by distance (the seeds' range) and the gradient slopes, one row per k."""
    _recorded_by(rec["prov"])
    cols = [(c, sch) for c in ("rnn", "lstm") for sch in ("uniform", "curriculum")]
    print("   k | " + " | ".join(f"{c.upper()} {sch:10s}" for c, sch in cols))
    for k in rec["ks"]:
        print(f"{k:4d} | " + " | ".join(f"{_span(_rec_acc(rec, c, sch, k)):>{len(c) + 11}s}" for c, sch in cols))
    print("gradient slope, decades per step:")
    for c, sch in cols:
        sl = rec["slope"][(c, sch)]
        print(f"  {c.upper():4s} {sch:10s} {min(sl):.3f} to {max(sl):.3f}")


def check_and_glue_curriculum(rec: dict, acc: dict) -> None:
    """The live run agrees with the recorded one (asserted), and what the prose says of the recorded runs
    (asserted on the fixed data) glued."""
    from ..utils import claim, glue

    runs, ks, seeds = rec["runs"], rec["ks"], rec["seeds"]
    claim(acc["rnn"][16] < 0.3 and all(a < 0.3 for a in _rec_acc(rec, "rnn", "uniform", 16))
          and acc["lstm"][64] > 0.9 and all(a > 0.9 for a in _rec_acc(rec, "lstm", "uniform", 64)),
          f"live and recorded agree: RNN at k = 16 {acc['rnn'][16]:.2f} here, "
          f"{_rec_acc(rec, 'rnn', 'uniform', 16)} recorded; LSTM at k = 64 {acc['lstm'][64]:.2f} here, "
          f"{_rec_acc(rec, 'lstm', 'uniform', 64)} recorded")
    words = {0: "none", 1: "one", 2: "two", 3: "all three"}
    held = [s for s in seeds if min(runs[("rnn", "curriculum", s)][k][0] for k in ks if k <= 128) > 0.5]
    held_slopes = [rec["slope"][("rnn", "curriculum")][seeds.index(s)] for s in held]
    lstm_128 = [runs[("lstm", sch, s)][k][0] for sch in ("uniform", "curriculum") for s in seeds
                for k in ks if k <= 128]
    lstm_256 = [runs[("lstm", sch, s)][256][0] for sch in ("uniform", "curriculum") for s in seeds]
    claim(min(_rec_acc(rec, "rnn", "curriculum", 1)) > max(_rec_acc(rec, "rnn", "uniform", 1)),
          "every curriculum seed beats every uniform one at k = 1")
    claim(0 < len(held) < len(seeds) and all(sl < -0.05 for sl in held_slopes),
          f"memory holds in some seeds ({held}), and their gradient fades: {held_slopes}")
    claim(min(lstm_128) >= 0.99, f"every LSTM seed recalls every digit up to k = 128: {min(lstm_128)}")
    glue("ch2_rec_rnn_uni_k1", _span(_rec_acc(rec, "rnn", "uniform", 1)))
    glue("ch2_rec_rnn_cur_k1", _span(_rec_acc(rec, "rnn", "curriculum", 1)))
    glue("ch2_rec_rnn_held", words[len(held)])
    glue("ch2_rec_rnn_held_256", _span([runs[("rnn", "curriculum", s)][256][0] for s in held]))
    glue("ch2_rec_rnn_held_slope", f"{min(held_slopes):.3f} to {max(held_slopes):.3f}")
    glue("ch2_rec_lstm_256", _span(lstm_256))
    glue("ch2_rec_curr_minutes", f"{rec['prov']['wall_s'] / 60:.0f}")


def plot_curriculum(rec: dict):
    """Recall by distance, one line per seed: the LSTM's wide and pale, the RNN's thin and drawn above them, so that
    an RNN seed at 100 % shows inside the band of LSTM lines at 100 % instead of hiding under it."""
    from .. import plots

    fig, ax = plots.new_figure(figsize=(8.6, 3.2))
    styles = [("lstm", "uniform", "tab:blue", ":", 3.5, 2), ("lstm", "curriculum", "tab:blue", "-", 3.5, 2),
              ("rnn", "uniform", "tab:red", ":", 1.2, 3), ("rnn", "curriculum", "tab:red", "-", 1.2, 3)]
    for cell, sch, color, ls, lw, z in styles:
        for s in rec["seeds"]:
            label = f"{cell.upper()}, {'k uniform' if sch == 'uniform' else 'curriculum'}"
            ax.plot(rec["ks"], [rec["runs"][(cell, sch, s)][k][0] for k in rec["ks"]], ls, color=color, lw=lw,
                    alpha=0.45 if cell == "lstm" else 1.0, marker="o", ms=2.5, zorder=z,
                    label=label if s == rec["seeds"][0] else None)
    ax.axhline(1 / 8, color="gray", ls=":", lw=1)
    ax.axvspan(1, 64, color="gray", alpha=0.1)
    ax.set(xscale="log", xlabel="distance k (log scale; shaded: trained)", ylabel="accuracy", ylim=(0, 1.05),
           title="Recall at distance k, 3 seeds each")
    ax.set_xticks(rec["ks"], [str(k) for k in rec["ks"]])
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))      # outside: covers no seed
    return fig


# -- the recorded capacity run (benchmarks/recall_capacity.py) --

def capacity_record() -> dict:
    """benchmarks/recall_capacity.py's record: {"prov", "ns", "base", "long", "long_ns", "acc": (hidden, n, steps) ->
    per-seed share of digits right}."""
    from ..results import provenance, read_rows

    rows = read_rows("recall_capacity")
    acc = {}
    for r in rows:
        acc.setdefault((int(r["hidden"]), int(r["n_digits"]), int(r["steps"])), []).append(float(r["digit_acc"]))
    steps = sorted({k[2] for k in acc})
    return {"prov": provenance("recall_capacity"), "ns": sorted({k[1] for k in acc}), "base": steps[0],
            "long": steps[-1], "long_ns": sorted({k[1] for k in acc if k[2] == steps[-1]}), "acc": acc}


def print_capacity(cap: dict) -> None:
    _recorded_by(cap["prov"])
    base, long = cap["base"], cap["long"]
    print("share of digits right (the seeds' range); chance 12.5%")
    print(f"   n | 16 units, {base:,} steps | 64 units, {base:,} steps | 64 units, {long:,} steps")
    for n in cap["ns"]:
        longer = _span(cap["acc"][(64, n, long)]) if n in cap["long_ns"] else "-"
        print(f"{n:4d} | {_span(cap['acc'][(16, n, base)]):>21s} | {_span(cap['acc'][(64, n, base)]):>21s} | "
              f"{longer:>21s}")


def check_and_glue_capacity(cap: dict, cap_live: dict) -> None:
    """The live run points the way the recorded one does (asserted), and what the prose says of the recorded runs
    (asserted on the fixed data) glued."""
    from ..utils import claim, glue

    a, base, long = cap["acc"], cap["base"], cap["long"]
    claim(cap_live[1] > cap_live[8] + 0.3 and min(a[(64, 1, base)]) > max(a[(64, 8, base)]),
          f"live and recorded agree: n = 1 {cap_live[1]:.2f} vs n = 8 {cap_live[8]:.2f} here; recorded "
          f"{a[(64, 1, base)]} vs {a[(64, 8, base)]}")
    means64 = [_mean(a[(64, n, base)]) for n in cap["ns"]]
    claim(means64 == sorted(means64, reverse=True), f"fewer right as n grows: {means64}")
    claim(min(a[(64, 1, base)]) > max(a[(64, max(cap["ns"]), base)]), "every seed agrees")
    claim(_mean(a[(16, 1, base)]) < _mean(a[(64, 1, base)]), "16 units worse than 64 at one digit")
    claim(min(a[(64, 4, long)]) > 0.99 and min(a[(64, 8, long)]) < 0.9, "4 solved with more steps, 8 not always")
    claim(all(x > y for x, y in zip(a[(64, 8, long)], a[(64, 8, base)])), "each seed: more steps help at n = 8")
    for n in cap["ns"]:
        glue(f"ch2_cap64_{n}", _span(a[(64, n, base)]))
    glue("ch2_cap16_1", _span(a[(16, 1, base)]))
    glue("ch2_cap_long_4", _span(a[(64, 4, long)]))
    glue("ch2_cap_long_8", _span(a[(64, 8, long)]))
    glue("ch2_cap_minutes", f"{cap['prov']['wall_s'] / 60:.0f}")


def plot_capacity(cap: dict):
    """Share of digits right against n, one dot per seed, the mean as a line; the longer control as triangles."""
    from .. import plots

    a, base, long = cap["acc"], cap["base"], cap["long"]
    fig, ax = plots.new_figure(figsize=(8.6, 3.2))
    for h, color in [(16, "tab:orange"), (64, "tab:blue")]:
        ax.plot(cap["ns"], [_mean(a[(h, n, base)]) for n in cap["ns"]], "-", color=color, lw=1,
                label=f"LSTM, {h} units, {base:,} steps (mean)")
        for n in cap["ns"]:
            ax.plot([n] * len(a[(h, n, base)]), a[(h, n, base)], "o", color=color, ms=4, alpha=0.7,
                    label=f"{h} units, one seed" if n == cap["ns"][0] else None)
    for n in cap["long_ns"]:
        ax.plot([n] * len(a[(64, n, long)]), a[(64, n, long)], "^", color="black", ms=5, mfc="none",
                label=f"64 units, {long:,} steps" if n == cap["long_ns"][0] else None)
    ax.axhline(1 / 8, color="gray", ls=":", lw=1, label="chance")
    ax.set(xscale="log", xlabel="digits to hold at once, n (log scale)", ylabel="share of digits named right",
           ylim=(0, 1.05), title="Recall of n digits after 16 filler steps")
    ax.set_xticks(cap["ns"], [str(n) for n in cap["ns"]])
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))      # outside: covers no seed
    return fig


# -- the encoder-decoder without attention --

def check_and_glue_plain(plain_acc: dict, plain_hist, buckets) -> None:
    """Exact match and token accuracy per length bucket printed; fine when short, lost when long (asserted); glued."""
    from ..utils import claim, glue

    print("source length | exact match | token accuracy")
    for (lo, hi), (exact, token) in plain_acc.items():
        print(f"{lo:6d}-{hi:<6d} | {exact:11.3f} | {token:14.3f}")
    short, b2, long = plain_acc[buckets[0]], plain_acc[buckets[1]], plain_acc[buckets[-1]]
    claim(short[0] > 0.8 and b2[0] < short[0] - 0.2 and long[0] < 0.1 and long[1] < 0.6,
          f"fine when short, lost when long: exact match {short[0]:.3f} -> {b2[0]:.3f} -> {long[0]:.3f}, "
          f"token accuracy {long[1]:.3f} at 28-32 words")
    glue("ch2_plain_short", f"{short[0]:.0%}", tol=5, spread="glue_spread", margin=2)
    glue("ch2_plain_long", f"{long[0]:.0%}", tol=3, spread="glue_spread", margin=2)
    glue("ch2_plain_long_token", f"{long[1]:.0%}", tol=5, spread="glue_spread", margin=2)
    glue("ch2_plain_b2", f"{b2[0]:.0%}", tol=10, spread="glue_spread", margin=2)
    glue("ch2_plain_loss", f"{sum(plain_hist[-50:]) / 50:.2f}", tol=0.1, spread="glue_spread", margin=2)


def check_and_glue_positions(task, batch, pred, token_acc: float) -> dict:
    """Accuracy at every target position of the long sentences: all tokens, without AND (its place is fixed by the
    grammar), and words only (without AND and the end-of-sentence mark EOS); where it is right and where lost,
    and why the curve rises again at the end (asserted, glued). Returns the three curves."""
    from ..tasks import EOS, PAD, position_accuracy
    from ..utils import claim, glue

    AND = task.tgt_vocab.index(task.conj.upper())
    target = batch.tgt_out
    curves = {}
    for name, skip in (("all", []), ("no_and", [AND]), ("words", [AND, EOS])):
        curves[name] = position_accuracy(pred, target, skip=skip)
    acc_no_and, count_no_and = curves["no_and"]
    acc_words, count_words = curves["words"]
    real = target != PAD
    and_share = ((target == AND).sum() / real.sum()).item()
    token_words = ((acc_no_and.nan_to_num() * count_no_and).sum() / count_no_and.sum()).item()
    first, rest = acc_no_and[:3].mean().item(), acc_no_and[10:30].nanmean().item()
    end = slice(28, None)                                   # positions 29 on: where the end mark can sit
    pooled = lambda acc, n: ((acc[end].nan_to_num() * n[end]).sum() / n[end].sum()).item()
    end_no_and, end_words = pooled(acc_no_and, count_no_and), pooled(acc_words, count_words)
    acc_eos, count_eos = position_accuracy(pred, torch.where(target == EOS, target, PAD))   # the end mark alone
    eos_right = ((acc_eos.nan_to_num() * count_eos).sum() / count_eos.sum()).item()
    print(f"28-32 words: AND is {and_share:.0%} of the target tokens; token accuracy {token_words:.3f} without it")
    print(f"without AND: positions 1-3 {first:.3f}, 11-30 {rest:.3f}, 29 on {end_no_and:.3f}")
    print(f"  words only (no end mark), 29 on: {end_words:.3f}; the end mark in the right place: {eos_right:.3f}")
    claim(first > rest + 0.3 and token_words < token_acc,
          f"it gets the beginning and then loses track: {first:.3f} at positions 1-3, {rest:.3f} at 11-30 (AND "
          f"excluded); AND tokens lift the token accuracy from {token_words:.3f} to {token_acc:.3f}")
    claim(end_no_and > rest and end_words < end_no_and - 0.03 and eos_right > end_words + 0.15,
          f"the curve rises at the end ({end_no_and:.3f} from position 29 on, {rest:.3f} at 11-30), and the rise is "
          f"the end mark ({eos_right:.3f} in the right place), not the words ({end_words:.3f})")
    glue("ch2_and_share", f"{and_share:.0%}")
    glue("ch2_plain_long_words", f"{token_words:.0%}", tol=5, spread="glue_spread", margin=2)
    glue("ch2_plain_first", f"{first:.0%}", tol=10, spread="glue_spread", margin=2)
    glue("ch2_plain_rest", f"{rest:.0%}", tol=5, spread="glue_spread", margin=2)
    glue("ch2_plain_end", f"{end_no_and:.0%}", tol=5, spread="glue_spread", margin=2)
    glue("ch2_plain_end_words", f"{end_words:.0%}", tol=5, spread="glue_spread", margin=2)
    glue("ch2_plain_eos", f"{eos_right:.0%}", tol=10, spread="glue_spread", margin=2)
    return {name: acc for name, (acc, _) in curves.items()}


def draw_translation(task, batch, decode, exact: float, bucket):
    """One held-out sentence of a length bucket: source, reference and the model's output, wrong words in red."""
    from .. import plots

    out = decode(batch.src[:1], batch.tgt_out.shape[1] + 5)[0]
    src, ref, hyp = (task.decode(batch.src[0], "src"), task.decode(batch.tgt_out[0], "tgt"), task.decode(out, "tgt"))
    per_line, rows = 11, []                       # (label, first index, words, check against ref?)
    for label, words in [("source", src), ("reference", ref), ("RNN output", hyp)]:
        for i in range(0, max(len(words), 1), per_line):
            rows.append((label if i == 0 else "", i, words[i:i + per_line], label == "RNN output"))
    fig, ax = plots.new_figure(figsize=(8, 0.32 * len(rows) + 0.7))
    for r, (label, start, words, check) in enumerate(rows):
        ax.text(0, -r, label, fontsize=9, weight="bold", va="center")
        for j, w in enumerate(words):
            wrong = check and (start + j >= len(ref) or ref[start + j] != w)
            ax.text(1.25 + j * 0.62, -r, w, fontsize=8, va="center", color="tab:red" if wrong else "black")
    ax.set(xlim=(0, 8.3), ylim=(-len(rows) + 0.5, 0.6),
           title=f"{bucket[0]}-{bucket[1]} words: exact match {exact:.0%} of test sentences")
    ax.axis("off")
    return fig


# -- the recorded bottleneck run (benchmarks/seq2seq_bottleneck.py) --

def bottleneck_record(long_lo: int) -> dict:
    """benchmarks/seq2seq_bottleneck.py's record: {"prov", "configs", "seeds", "rows", "pos", "long_lo",
    "heads"/"tails": {config: per-seed accuracy (without AND) at positions 1-3 / 11-30 of the longest bucket}}."""
    from ..results import provenance, read_rows

    rows, pos = read_rows("seq2seq_bottleneck"), read_rows("seq2seq_bottleneck_positions")
    configs = list(dict.fromkeys(r["config"] for r in rows))
    seeds = sorted({int(r["seed"]) for r in rows})

    def head_tail(name, s):
        acc = {int(r["position"]): float(r["acc_no_and"]) for r in pos
               if r["config"] == name and int(r["seed"]) == s and r["acc_no_and"] != ""}
        return _mean([acc[p] for p in (1, 2, 3)]), _mean([acc[p] for p in range(11, 31) if p in acc])

    return {"prov": provenance("seq2seq_bottleneck"), "configs": configs, "seeds": seeds, "rows": rows, "pos": pos,
            "long_lo": long_lo, "heads": {n: [head_tail(n, s)[0] for s in seeds] for n in configs},
            "tails": {n: [head_tail(n, s)[1] for s in seeds] for n in configs}}


def _col(rec: dict, name: str, key: str, lo=None) -> list:
    return [float(r[key]) for r in rec["rows"] if r["config"] == name and (lo is None or int(r["lo"]) == lo)]


def print_bottleneck(rec: dict) -> None:
    _recorded_by(rec["prov"])
    lo = rec["long_lo"]
    long = f"{lo}-{lo + 4} words"
    print(f"{'':9s} | final loss | exact match, 3-7 words | {long} | tokens without AND, {long}")
    for name in rec["configs"]:
        loss = _col(rec, name, "final_loss")
        print(f"{name:9s} | {min(loss):.2f}-{max(loss):.2f}  | {_span(_col(rec, name, 'exact', 3)):>22s} | "
              f"{_span(_col(rec, name, 'exact', lo)):>11s} | {_span(_col(rec, name, 'token_no_and', lo)):>31s}")


def check_and_glue_bottleneck(rec: dict) -> None:
    """What the prose says of the recorded runs, asserted on the fixed data, and glued (the verdict on the long
    sentences' exact match glued whole)."""
    from ..results import value_range
    from ..utils import claim, glue

    configs, lo = rec["configs"], rec["long_lo"]
    heads, tails = rec["heads"], rec["tails"]
    controls = [name for name in configs if name != "chapter"]
    long_exact = [x for name in configs for x in _col(rec, name, "exact", lo)]
    claim(max(long_exact) < 0.05, f"no config, no seed gets the long sentences: {long_exact}")
    claim(all(min(heads[n]) > max(tails[n]) + 0.2 for n in configs), "the start right, then lost")
    claim(all(min(_col(rec, n, "token_no_and", lo)) > max(_col(rec, "chapter", "token_no_and", lo)) for n in controls),
          "every control seed above every chapter seed on the long sentences' tokens")
    claim(all(max(_col(rec, n, "final_loss")) < min(_col(rec, "chapter", "final_loss")) for n in controls),
          "both controls bring the final loss down")
    for name, key in [("chapter", "chapter"), ("2x sizes", "wide"), ("4x steps", "long")]:
        loss = _col(rec, name, "final_loss")
        glue(f"ch2_s2s_{key}_loss", value_range(min(loss), max(loss)))
        glue(f"ch2_s2s_{key}_words", _span(_col(rec, name, "token_no_and", lo)))
        glue(f"ch2_s2s_{key}_head", _span(heads[name]))
        glue(f"ch2_s2s_{key}_tail", _span(tails[name]))
    glue("ch2_s2s_long_exact", "not one long sentence comes out entirely right, in any seed of any of them"
         if max(long_exact) == 0 else f"no seed of any of them gets more than {max(long_exact):.0%} of the long "
         "sentences entirely right")
    glue("ch2_s2s_minutes", f"{rec['prov']['wall_s'] / 60:.0f}")


def plot_bottleneck(rec: dict):
    """Left: exact match and tokens without AND by source length, one line per seed; right: accuracy by target
    position on the longest bucket."""
    from .. import plots

    colors = dict(zip(rec["configs"], ["tab:gray", "tab:green", "tab:purple", "tab:olive"]))
    fig, (ax1, ax2) = plots.new_figure(figsize=(9, 3.4), ncols=2)
    for name in rec["configs"]:
        for s in rec["seeds"]:
            first = s == rec["seeds"][0]
            mine = [r for r in rec["rows"] if r["config"] == name and int(r["seed"]) == s]
            mids = [(int(r["lo"]) + int(r["hi"])) / 2 for r in mine]
            ax1.plot(mids, [float(r["exact"]) for r in mine], "-", color=colors[name], lw=1,
                     label=f"{name}: exact match" if first else None)
            ax1.plot(mids, [float(r["token_no_and"]) for r in mine], "--", color=colors[name], lw=1,
                     label=f"{name}: tokens without AND" if first else None)
            pos = [r for r in rec["pos"] if r["config"] == name and int(r["seed"]) == s and r["acc_no_and"] != ""]
            ax2.plot([int(r["position"]) for r in pos], [float(r["acc_no_and"]) for r in pos], "-",
                     color=colors[name], lw=1, label=name if first else None)
    lo = rec["long_lo"]
    ax1.set(xlabel="source length (bucket middle)", ylabel="accuracy", ylim=(0, 1.05), title="3 seeds each")
    ax2.set(xlabel=f"target position ({lo}-{lo + 4} words)", ylabel="accuracy without AND", ylim=(0, 1.05),
            title="By position, 3 seeds each")
    ax1.legend(fontsize=6)
    ax2.legend(fontsize=7)
    return fig
