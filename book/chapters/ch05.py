"""Chapter 5, positional encoding: the shift and rotation matrices it proves things with, the order task (bites), the
exercise checkers, and the measurements' plumbing (tables printed, claims asserted, numbers glued).
"""
from __future__ import annotations

from typing import Callable, Optional

import torch

from ..checks import positive_int, probability, returned
from ..language import _
from ..positional import RotaryEmbedding, _check_even, pair_frequencies, sinusoidal_table
from ..tasks import _BITES, _N_NOUNS

__all__ = ["sinusoidal_shift_matrix", "rope_rotation_matrix", "check_shift_matrix", "check_rotate_half", "bites_batch",
           "five_ways_table", "check_and_glue_five_ways", "left_over_right", "check_and_glue_delta",
           "check_and_glue_learned_dip", "attention_weights", "check_and_glue_left_weights", "copy_back_record",
           "print_copy_back", "check_and_glue_copy_back", "copy_lr_sentence", "check_copy_live", "alibi_letter_weights",
           "copy_plot", "interpolation_runs", "print_interpolation", "check_and_glue_interpolation",
           "draw_interpolation"]


def sinusoidal_shift_matrix(k: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The (C, C) matrix M_k with PE[pos + k] = M_k @ PE[pos] for every pos. Chapter 5.

    Block diagonal: pair i gets [[cos k theta_i, sin k theta_i], [-sin k theta_i, cos k theta_i]],
    from sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b - sin a sin b.
    """
    c, s = (k * pair_frequencies(d_model, base)).cos(), (k * pair_frequencies(d_model, base)).sin()
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    idx = torch.arange(0, d_model, 2)
    M[idx, idx], M[idx, idx + 1], M[idx + 1, idx], M[idx + 1, idx + 1] = c, s, -s, c
    return M


def rope_rotation_matrix(pos: int, d_head: int, base: float = 10000.0) -> torch.Tensor:
    """The (D, D) block-diagonal rotation R_pos of RoPE: pair i turns by pos * theta_i. Chapter 5.

    Rows act on column vectors: rotated = R_pos @ x. Orthogonal, and R_m^T R_n = R_(n-m).
    """
    ang = pos * pair_frequencies(d_head, base)
    c, s = ang.cos(), ang.sin()
    R = torch.zeros(d_head, d_head, dtype=torch.float64)
    idx = torch.arange(0, d_head, 2)
    R[idx, idx], R[idx, idx + 1], R[idx + 1, idx], R[idx + 1, idx + 1] = c, -s, s, c
    return R


def check_shift_matrix(fn: Callable, d_model: int = 8, base: float = 10000.0) -> bool:
    """Self-check for the chapter 5 exercise: does `fn(k, d_model)` return M_k with PE[pos+k] = M_k PE[pos]?

    Tries k in {0, 1, 3, 17} on positions 0..49; raises AssertionError with a hint on the first miss.
    """
    pe = sinusoidal_table(50 + 17, d_model, base).double()
    for k in (0, 1, 3, 17):
        M = torch.as_tensor(returned(fn(k, d_model)), dtype=torch.float64)
        if tuple(M.shape) != (d_model, d_model):
            raise AssertionError(_("M_{k} should have shape ({d_model}, {d_model}), got {shape}")
                                 .format(k=k, d_model=d_model, shape=tuple(M.shape)))
        got = pe[:50] @ M.T  # row pos holds (M_k PE[pos])^T
        if not torch.allclose(got, pe[k : k + 50], atol=1e-5):
            raise AssertionError(_("M_{k} @ PE[pos] is not PE[pos + {k}] (check the signs of the sin terms)")
                                 .format(k=k))
    return True


def check_rotate_half(fn: Callable, d_head: int = 8) -> bool:
    """Self-check for the chapter 5 exercise: is `fn(x, offset)` RoPE in the rotate-half layout (GPT-NeoX, HF)?

    In that layout pair i is the dims (i, i + D/2) instead of (2i, 2i+1). Permuting the dims of an interleaved
    vector to [0, 2, 4, ..., 1, 3, 5, ...] gives the rotate-half vector, and then fn must equal the
    interleaved RoPE permuted the same way. Tries offsets 0 and 3 on x (2, 3, 5, d_head); raises on a miss.
    """
    _check_even(d_head, "d_head")
    perm = torch.cat([torch.arange(0, d_head, 2), torch.arange(1, d_head, 2)])
    x = torch.randn(2, 3, 5, d_head, generator=torch.Generator().manual_seed(0))
    rope = RotaryEmbedding(d_head)
    for offset in (0, 3):
        got = fn(x[..., perm], offset)
        if not isinstance(got, torch.Tensor) or got.shape != x.shape:
            raise AssertionError(_("fn(x, offset) should return a tensor of shape {shape}")
                                 .format(shape=tuple(x.shape)))
        if not torch.allclose(got, rope(x, offset)[..., perm], atol=1e-5):
            raise AssertionError(_("offset {offset}: not the interleaved RoPE permuted to the rotate-half layout "
                                   "(pair i is dims i and i + D/2; the first half gets x1 cos - x2 sin)")
                                 .format(offset=offset))
    return True


def bites_batch(batch_size: int, seq_len: int, min_verb_pos: int = 1, distractor_p: float = 0.0,
                generator: Optional[torch.Generator] = None):
    """Who bites? One "noun bites noun" inside filler words; the answer is the noun before "bites". Chapter 5.

    "dog bites man" and "man bites dog" hold the same words, so only word order tells them apart.
    Returns x (B, T) ids into BITES_VOCAB, verb_pos (B,) in min_verb_pos..T-2, y (B,) the biter's id.
    The two nouns differ; with distractor_p > 0 other filler slots hold random nouns too.
    """
    positive_int(batch_size=batch_size, seq_len=seq_len, min_verb_pos=min_verb_pos)
    probability(distractor_p=distractor_p, closed=True)
    if seq_len < 3 or min_verb_pos > seq_len - 2:
        raise ValueError(f"need seq_len >= 3 and 1 <= min_verb_pos <= seq_len - 2, got seq_len={seq_len}, "
                         f"min_verb_pos={min_verb_pos}")
    B, T = batch_size, seq_len
    x = torch.randint(_N_NOUNS, _BITES, (B, T), generator=generator)  # filler words
    nouns = torch.randint(0, _N_NOUNS, (B, T), generator=generator)
    x = torch.where(torch.rand(B, T, generator=generator) < distractor_p, nouns, x)
    pos = torch.randint(min_verb_pos, T - 1, (B,), generator=generator)
    biter = torch.randint(0, _N_NOUNS, (B,), generator=generator)
    bitten = (biter + torch.randint(1, _N_NOUNS, (B,), generator=generator)) % _N_NOUNS  # never the biter
    rows = torch.arange(B)
    x[rows, pos - 1], x[rows, pos], x[rows, pos + 1] = biter, _BITES, bitten
    return x, pos, biter


# ---- the chapter's measurements, read, printed, checked and glued: plumbing out of the reader's cells -------------

def _mean(xs):
    return sum(xs) / len(xs)


def five_ways_table(results: dict, train_len: int, long_len: int):
    """Print the five variants' accuracy in length, unsolved positions and accuracy beyond; return (acc, unsolved,
    table_rows): acc {name: (in length, beyond or None)}, unsolved {name: count over the seeds}, table_rows
    {name: (in length, beyond) as shown}."""
    print(f"{'positions':18s} | in length ({train_len})     | unsolved | beyond (length {long_len}, verb after "
          f"{train_len})")
    table_rows = {}
    for name, accs in results.items():
        acc_in, beyond, unsolved = _mean([a for a, _, _ in accs]), [b for _, b, _ in accs], sum(u for _, _, u in accs)
        shown = "n/a: index out of range" if None in beyond else f"{_mean(beyond):.3f} (worst seed {min(beyond):.3f})"
        count = "-" if name == "no positions" else str(unsolved)        # a coin flip everywhere: not meaningful
        print(f"{name:18s} | {acc_in:.3f} (worst {min(a for a, _, _ in accs):.3f}) | {count:>8s} | {shown}")
        table_rows[name] = (f"{acc_in:.3f}", "n/a" if None in beyond else f"{_mean(beyond):.3f}")
    acc = {name: (_mean([r[0] for r in rs]), None if rs[0][1] is None else _mean([r[1] for r in rs]))
           for name, rs in results.items()}
    unsolved = {name: sum(r[2] for r in rs) for name, rs in results.items()}
    return acc, unsolved, table_rows


def check_and_glue_five_ways(acc: dict, unsolved: dict, table_rows: dict) -> None:
    """The five-ways comparison's claims (asserted) and its numbers glued for the prose."""
    from ..utils import claim, glue

    claim(acc["learned (16 rows)"][1] is None, "learned (16 rows) cannot run beyond its table")
    claim(acc["no positions"][0] < 0.6, f"no positions: a coin flip, {acc['no positions'][0]:.3f}")
    for name in ("sinusoidal", "learned (16 rows)", "learned (64 rows)", "RoPE"):   # every signal solves it in length
        claim(acc[name][0] > 0.9, f"{name} solves the task in length: {acc[name][0]:.3f}")
    for name in ("sinusoidal", "RoPE"):                                   # one rule for all positions: none stuck
        claim(acc[name][0] > 0.99 and unsolved[name] == 0,
              f"{name}: {acc[name][0]:.3f} in length, {unsolved[name]} unsolved positions")
    claim(acc["learned (64 rows)"][1] < acc["no positions"][1] - 0.1,   # rows 16..63 were never trained
          f"learned (64 rows) beyond: worse than the coin flip of no positions, {acc['learned (64 rows)'][1]:.3f} "
          f"vs {acc['no positions'][1]:.3f}")
    claim(acc["sinusoidal"][1] < acc["sinusoidal"][0] - 0.3, f"sinusoidal falls beyond: {acc['sinusoidal'][1]:.3f}")
    claim(acc["RoPE"][1] > 0.9 and acc["RoPE"][1] > acc["sinusoidal"][1] + 0.2,
          f"RoPE keeps its accuracy beyond: {acc['RoPE'][1]:.3f} vs sinusoidal {acc['sinusoidal'][1]:.3f}")
    for name, (acc_in, beyond) in table_rows.items():
        key = name.split()[0].lower() + ("_" + name.split()[1].strip("(") if "learned" in name else "")
        tol_in = 0.05 if key == "learned_64" else 0.03                    # a stuck position costs a few points
        glue(f"ch5_{key}_in", acc_in, tol=tol_in, spread="glue_spread", margin=2)
        glue(f"ch5_{key}_beyond", beyond, tol=0.05, spread="glue_spread", margin=2)


def left_over_right(model, pe_long: torch.Tensor, bites_id: int, long_len: int) -> torch.Tensor:
    """Delta(p) for p = 1 .. long_len - 2: how much more the query of 'bites' at p scores the key at p - 1 than the
    key at p + 1, through positions alone: (e_bites + p_p)^T A (p_{p-1} - p_{p+1}) / sqrt(d), A = W_Q^T W_K."""
    import math

    with torch.no_grad():
        A = (model.q_proj.weight.T @ model.k_proj.weight).cpu()
        query = model.embed.weight[bites_id].cpu() + pe_long[1:long_len - 1]
        return ((query @ A) * (pe_long[:long_len - 2] - pe_long[2:])).sum(-1) / math.sqrt(A.shape[0])


def check_and_glue_delta(delta: torch.Tensor, by_pos: dict, A: torch.Tensor, train_len: int, long_len: int) -> dict:
    """Beyond the training length: the correlation of Delta(p) with the accuracy, how often its sign predicts a
    right answer, and how far the trained A is from commuting with the shift M_1 (a random A for scale); printed,
    asserted, glued. Returns the numbers."""
    from ..utils import claim, glue, other_seeds

    beyond_p = list(range(train_len, long_len - 1))
    acc_p = torch.tensor([by_pos[p] for p in beyond_p])
    d_p = delta[[p - 1 for p in beyond_p]]
    r_delta = torch.corrcoef(torch.stack([d_p, acc_p]))[0, 1].item()
    sign_agree = ((d_p > 0) == (acc_p > 0.5)).float().mean().item()
    M1 = sinusoidal_shift_matrix(1, A.shape[0]).float()
    random_A = torch.randn(*A.shape, generator=torch.Generator().manual_seed(0))
    commute = {name: ((a @ M1 - M1 @ a).norm() / a.norm()).item()
               for name, a in (("trained A", A), ("random", random_A))}
    print(f"beyond {train_len}: corr(Delta(p), accuracy) = {r_delta:.2f}")
    print(f"the sign of Delta matches accuracy > 0.5 at {sign_agree:.0%} of positions")
    print(f"|A M_1 - M_1 A| / |A|: trained A {commute['trained A']:.2f}, a random A {commute['random']:.2f}")
    claim(r_delta > 0.6 and sign_agree > 0.8,
          f"accuracy follows the sign of Delta: r = {r_delta:.2f}, {sign_agree:.0%}")
    claim(commute["trained A"] > 0.05, f"the trained A does not commute with M_1: {commute}")
    glue("ch5_sin_delta_r", f"{r_delta:.2f}", tol=0.1, spread="glue_spread", margin=2)
    glue("ch5_sin_delta_agree", f"{sign_agree:.0%}", tol=10, spread="glue_spread", margin=2)
    glue("ch5_commute_trained", f"{commute['trained A']:.2f}", tol=0.1, spread="glue_spread", margin=2)
    glue("ch5_commute_random", f"{commute['random']:.2f}", spread="glue_spread", margin=2)
    glue("ch5_sin_delta_r_others", other_seeds("ch5_sin_delta_r"))   # this cell with other seeds (recorded)
    return {"r": r_delta, "agree": sign_agree, "commute": commute}


def check_and_glue_learned_dip(short: dict, long: dict, train_len: int) -> None:
    """The learned (64 rows) table on 16- against 64-token sentences at every trained place of 'bites', its stuck
    position, and the place whose object sits on the first untrained row; printed, asserted, glued."""
    from ..utils import claim, glue

    diff = max(abs(short[p] - long[p]) for p in short)
    stuck = min(short, key=short.get)
    edge = long[train_len - 1]                       # 'bites' at 15: its object on row 16, never trained
    print(f"learned (64 rows), 16- vs 64-token sentences: largest difference {diff:.2f}")
    print(f"worst position {stuck}: {short[stuck]:.2f}; 'bites' at {train_len - 1}: {edge:.2f}")
    claim(_mean([abs(short[p] - long[p]) for p in short]) < 0.05,
          f"learned (64 rows): 16- and 64-token sentences agree at positions 1..14, largest difference {diff:.2f}")
    claim(edge < 0.5, f"learned (64 rows) with 'bites' at {train_len - 1}: {edge:.2f}")
    glue("ch5_l64_len_diff", f"{diff:.2f}", tol=0.1, spread="glue_spread", margin=2)
    glue("ch5_l64_stuck_pos", stuck, tol="any")            # which position gets stuck depends on the machine's numbers
    glue("ch5_l64_stuck_acc", f"{short[stuck]:.0%}", tol="any")
    glue("ch5_l64_edge_acc", f"{edge:.0%}", tol="any")


@torch.no_grad()
def attention_weights(model, x: torch.Tensor) -> torch.Tensor:
    """(B, T) ids -> (B, T, T): the attention weights of the chapter's OrderModel layer (positions, RoPE or none)."""
    h = model.embed(x)
    h = model.positions(h) if model.positions is not None else h
    q, k = model.q_proj(h), model.k_proj(h)
    if model.rope is not None:
        q, k = model.rope(q), model.rope(k)
    return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)


def check_and_glue_left_weights(models: dict, train_len: int, long_len: int, device=None) -> dict:
    """Mean weight of 'bites' on the word before it, over 2,000 sentences, in length and beyond, for the RoPE and the
    sinusoidal models; printed, asserted, glued. Returns {(name, "in" | "beyond"): weight}."""
    from ..utils import claim, glue

    def left_weight(model, T, min_verb_pos):
        x, pos, _ = bites_batch(2000, T, min_verb_pos, generator=torch.Generator().manual_seed(99))
        w, rows = attention_weights(model, x.to(device)).cpu(), torch.arange(len(x))
        return w[rows, pos, pos - 1].mean().item()

    left = {(name, where): left_weight(models[name], *args) for name in ("RoPE", "sinusoidal")
            for where, args in (("in", (train_len, 1)), ("beyond", (long_len, train_len)))}
    print("weight on the word before 'bites':")
    print("  " + ", ".join(f"{n} {w} {v:.3f}" for (n, w), v in left.items()))
    claim(min(left["RoPE", "in"], left["RoPE", "beyond"]) > 0.9, f"RoPE: bites attends to its left neighbour: {left}")
    claim(left["sinusoidal", "beyond"] < left["RoPE", "beyond"] - 0.2, f"sinusoidal loses the rule beyond: {left}")
    for (name, where), v in left.items():
        glue(f"ch5_{dict(RoPE='rope', sinusoidal='sin')[name]}_left_{where}", f"{v:.2f}", tol=0.05,
             spread="glue_spread", margin=2)
    return left


def copy_back_record() -> dict:
    """benchmarks/copy_back.py's record at each scheme's chosen rate: {"prov", "schemes", "k_max", "ranges",
    "curve": {scheme: (seed, k) accuracies}, "lr": {scheme: chosen rate}, "swept": the rates tried,
    "per_seed": {(scheme, range name): per-seed mean over the range}}."""
    from ..results import provenance, read_rows

    rows = read_rows("copy_back")
    recorded = [r for r in rows if r["chosen"] == "1"]
    schemes = ("sinusoidal", "learned", "rope", "alibi")
    k_max = max(int(r["k"]) for r in recorded)
    seeds = sorted({int(r["seed"]) for r in recorded})
    curve = {s: torch.zeros(len(seeds), k_max) for s in schemes}
    for r in recorded:
        curve[r["scheme"]][seeds.index(int(r["seed"])), int(r["k"]) - 1] = float(r["accuracy"])
    ranges = {"1-16": (1, 16), "17-24": (17, 24), "25-32": (25, 32), "33-48": (33, 48)}
    return {"prov": provenance("copy_back"), "schemes": schemes, "k_max": k_max, "ranges": ranges, "curve": curve,
            "lr": {r["scheme"]: float(r["lr"]) for r in recorded}, "swept": sorted({float(r["lr"]) for r in rows}),
            "per_seed": {(s, n): curve[s][:, lo - 1:hi].mean(1) for s in schemes for n, (lo, hi) in ranges.items()}}


def print_copy_back(rec: dict) -> None:
    from ..results import seed_span

    prov = rec["prov"]
    print(f"recorded by {prov['script']}, seeds {prov['seeds']}, {prov['wall_s']:.0f} s on one thread")
    print(f"of {prov['cpu']}; accuracy, mean over the seeds (range), each scheme at its chosen rate")
    print(f"{'scheme':10s} {'lr':>5s} | " + " | ".join(f"k {n:14s}" for n in rec["ranges"]))
    for s in rec["schemes"]:
        print(f"{s:10s} {rec['lr'][s]:5g} | " + " | ".join(
            f"{seed_span(rec['per_seed'][s, n].tolist(), '{:.2f}'):16s}" for n in rec["ranges"]).rstrip())


def check_and_glue_copy_back(rec: dict) -> None:
    """The recorded copy-back claims (asserted) and the table's numbers glued, with each rate chosen and whether it
    sat at the top of the sweep."""
    from ..results import seed_span
    from ..utils import claim, glue

    per_seed, schemes = rec["per_seed"], rec["schemes"]
    claim(all(per_seed[s, "1-16"].min() > 0.85 for s in schemes), "every seed learns the training range")
    claim(per_seed["rope", "25-32"].max() < 0.1 and per_seed["rope", "33-48"].max() < 0.1, "RoPE at chance beyond 24")
    far, near = per_seed["alibi", "33-48"], per_seed["alibi", "17-24"]
    claim(far.max() < 0.05 and bool((far < near).all()), "ALiBi collapses beyond 32 on every seed")
    claim(all(per_seed["sinusoidal", "33-48"].min() > per_seed[s, "33-48"].max() for s in ("rope", "alibi")),
          "sinusoidal ahead of RoPE and ALiBi beyond 32 on every seed")
    claim(per_seed["sinusoidal", "33-48"].min() < per_seed["learned", "33-48"].max(),
          "no win of sinusoidal over learned")
    for s in schemes:
        for n in rec["ranges"]:
            glue(f"ch5_copy_{s}_{n.replace('-', '_')}", seed_span(per_seed[s, n].tolist(), "{:.2f}"))
    glue("ch5_copy_alibi_far_best", f"{per_seed['alibi', '33-48'].max():.2f}")
    glue("ch5_copy_wall_min", f"{rec['prov']['wall_s'] / 60:.0f}")
    glue("ch5_copy_lr", copy_lr_sentence(rec))
    glue("ch5_copy_sweep", ", ".join(f"{lr:g}" for lr in rec["swept"]))


def copy_lr_sentence(rec: dict) -> str:
    """The sentence on the rates chosen, whole: each scheme's rate and whether the sweep brackets it."""
    names = dict(sinusoidal="sinusoidal", learned="learned", rope="RoPE", alibi="ALiBi")
    swept, chosen = rec["swept"], rec["lr"]
    rates = ", ".join(f"{names[s]} {lr:g}" for s, lr in chosen.items())
    sweep = ", ".join(f"{lr:g}" for lr in swept)
    edge = [names[s] for s, lr in chosen.items() if lr in (swept[0], swept[-1])]
    if not edge:
        return (f"Each scheme's best rate on the training range ({rates}) lies inside the sweep ({sweep}), "
                "so every optimum is bracketed")
    return (f"The best rates on the training range are {rates}, of the sweep {sweep}; for {', '.join(edge)} "
            "the best sits at an edge of the sweep, so that optimum is not bracketed")


def copy_plot(rec: dict, live: Optional[dict] = None):
    """The recorded copy-back curves (mean of the seeds, band from worst to best) at each scheme's chosen rate, and
    the live run's curves dotted when `live` ({scheme: (k_max,) accuracies}) is given."""
    from .. import plots

    colors = dict(sinusoidal="tab:blue", learned="tab:green", rope="tab:red", alibi="tab:purple")
    curve, ks = rec["curve"], torch.arange(1, rec["k_max"] + 1)
    means = lambda c: ", ".join(f"{c[lo - 1:hi].mean().item():.2f} for k {n}" for n, (lo, hi) in rec["ranges"].items())
    alt = ("Copy k back, accuracy against k; each scheme's mean of the recorded seeds with a band from worst to best "
           "seed: " + "; ".join(f"{s} {means(curve[s].mean(0))}" for s in rec["schemes"]) + ". "
           + ("Dotted: the live run (seed 0, 400 steps): " + "; ".join(f"{s} {means(live[s])}" for s in live) + ". "
              if live is not None else "")
           + "A dashed line after k = 16, the largest k in training; a grey line at chance, 1 in 16.")
    fig, ax = plots.new_figure(figsize=(7.5, 3.4), alt=alt)
    for s in rec["schemes"]:
        ax.fill_between(ks, curve[s].min(0).values, curve[s].max(0).values, color=colors[s], alpha=0.2, lw=0)
        ax.plot(ks, curve[s].mean(0), color=colors[s], label=f"{s} (lr {rec['lr'][s]:g})")
        if live is not None:
            ax.plot(ks, live[s], color=colors[s], ls=":", lw=1.2)
    if live is not None:
        ax.plot([], [], color="0.3", ls=":", label="live run (seed 0)")
    ax.axvline(16.5, color="0.4", ls="--", label="largest k in training")
    ax.axhline(1 / 16, color="0.6", lw=0.6)
    ax.set(xlabel="k (distance to the letter to copy)", ylabel="accuracy", ylim=(-0.02, 1.02),
           title=f"Copy k back: mean of {curve[rec['schemes'][0]].shape[0]} seeds, band from worst to best seed")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def check_copy_live(live: dict, ranges: dict) -> None:
    """The live copy-back run (seed 0, each scheme at its recorded rate) points the way the recorded seeds do."""
    from ..utils import claim

    span = lambda s, lo, hi: live[s][lo - 1:hi].mean().item()
    for s in live:
        print(f"{s:10s} " + "  ".join(f"k {n}: {span(s, lo, hi):.2f}" for n, (lo, hi) in ranges.items()))
    claim(min(span(s, 1, 16) for s in ("sinusoidal", "learned", "rope")) > 0.9 and span("alibi", 1, 16) > 0.6,
          f"every scheme learns the training range: {[round(span(s, 1, 16), 2) for s in live]}")
    claim(span("rope", 25, 48) < 0.15, f"RoPE at chance beyond 24, as recorded: {span('rope', 25, 48):.2f}")
    claim(span("alibi", 33, 48) < span("alibi", 17, 24) and span("alibi", 33, 48) < 0.1,
          f"ALiBi collapses far back, as recorded: {[round(span('alibi', lo, hi), 2) for lo, hi in ranges.values()]}")
    claim(span("learned", 17, 48) < span("learned", 1, 16) - 0.3,
          f"learned fails beyond: {span('learned', 17, 48):.2f}")
    claim(span("sinusoidal", 33, 48) > max(span("rope", 33, 48), span("alibi", 33, 48)) + 0.2,
          f"sinusoidal ahead of RoPE and ALiBi beyond 32, as recorded: {span('sinusoidal', 33, 48):.2f}")


@torch.no_grad()
def alibi_letter_weights(model, device=None) -> dict:
    """ALiBi's heads: the weight of '?' on the four letters, for k = 8 and 40 (300 sequences each), printed and
    asserted (the steepest head loses the letters far back, the flattest keeps them). Returns {k: (H,) weights}."""
    from ..tasks import copy_back_batch
    from ..utils import claim

    on_letters = {}
    for k in (8, 40):
        x, _, _ = copy_back_batch(300, max(20, k + 4), k, generator=torch.Generator().manual_seed(k))
        w = model.weights(x.to(device))[:, :, -1].cpu()             # (B, H, T)
        on_letters[k] = (w * (x < 16)[:, None, :]).sum(-1).mean(0)   # (H,)
    print("ALiBi, weight on the letters per head (slopes 1/4 .. 1/256):")
    for k, ws in on_letters.items():
        print(f"  k = {k:2d}: {[round(v, 2) for v in ws.tolist()]}")
    claim(on_letters[40][0] < 0.5 * on_letters[8][0] and on_letters[40][-1] > 0.8,
          f"the steep head loses the letters far back, the flattest keeps them: {on_letters}")
    return on_letters


PI_ARMS = {"plain": "RoPE as trained", "pi": "interpolated, no training", "pi_ft": "interpolated + fine-tune",
           "direct_ft": "not interpolated + fine-tune"}


def _copy_fine_tune(model, steps: int, lr: float, seed: int, length: int, k_max: int, device=None):
    """`steps` Adam steps (batches of 64, constant rate) on copy-k-back with k uniform in 1..k_max, `length` tokens."""
    import torch.nn.functional as F

    from ..optim import build_optimizer
    from ..tasks import copy_back_batch
    from ..train import fit

    gen = torch.Generator().manual_seed(seed)

    def batch():
        x, y, _ = copy_back_batch(64, length, torch.randint(1, k_max + 1, (64,), generator=gen), generator=gen)
        return x.to(device), y.to(device)
    fit(model.train(), batch, loss_fn=lambda m, b: F.cross_entropy(m(b[0]), b[1]), steps=steps, schedule="constant",
        optimizer=build_optimizer(model, "adam", lr=lr), progress=False)
    return model.eval()


@torch.no_grad()
def _copy_curve(model, k_max: int, n: int, seed0: int, device=None) -> torch.Tensor:
    """Accuracy at k = 1..k_max, n sequences each of max(20, k + 4) tokens (generator seed seed0 + k)."""
    from ..tasks import copy_back_batch

    out = []
    for k in range(1, k_max + 1):
        x, y, _ = copy_back_batch(n, max(20, k + 4), k, generator=torch.Generator().manual_seed(seed0 + k))
        out.append((model(x.to(device)).argmax(-1).cpu() == y).float().mean().item())
    return torch.tensor(out)


def interpolation_runs(train_copy: Callable, trained: dict, seeds=(0, 1, 2), trained_len: int = 20,
                       k_max: int = 48, steps: int = 50, lrs=(1e-3, 3e-3, 1e-2, 3e-2), device=None) -> dict:
    """Position interpolation on the copy-k-back RoPE model, per seed: as trained; with every position divided by
    s = (k_max + 4) / trained_len and no training; and `steps` fine-tuning steps on sequences of k_max + 4 tokens
    (k uniform in 1..k_max), with and without interpolation. Each fine-tuned arm gets the same sweep over `lrs` and
    keeps the rate with the best mean accuracy on held-out sequences (k 1..k_max, other data than the test).
    `train_copy(scheme, seed)` trains a fresh copy model; `trained` maps seeds already trained to their model.
    Returns {"s", "lrs", "lr": {arm: rate}, "curve": {arm: (seeds, k_max) test accuracy}}."""
    import copy

    positive_int(trained_len=trained_len, k_max=k_max, steps=steps)
    if not seeds or not lrs:
        raise ValueError(f"seeds and lrs must be non-empty, got seeds={seeds!r}, lrs={lrs!r}")
    length = k_max + 4
    s = length / trained_len
    models = {seed: trained[seed] if seed in trained else train_copy("rope", seed=seed) for seed in seeds}
    test = lambda m: _copy_curve(m, k_max, 300, 0, device)              # the chapter's test sequences (seed k)

    def interpolated(m):
        m = copy.deepcopy(m)
        m.rope.set_interpolation(s)
        return m
    curve = {"plain": torch.stack([test(models[seed]) for seed in seeds]),
             "pi": torch.stack([test(interpolated(models[seed])) for seed in seeds])}
    chosen = {}
    for arm, start in (("pi_ft", interpolated), ("direct_ft", copy.deepcopy)):
        tuned = {lr: [_copy_fine_tune(start(models[seed]), steps, lr, 100 + seed, length, k_max, device)
                      for seed in seeds] for lr in lrs}
        held_out = {lr: sum(_copy_curve(m, k_max, 100, 20_000, device).mean().item() for m in ms)
                    for lr, ms in tuned.items()}
        chosen[arm] = max(held_out, key=held_out.get)
        curve[arm] = torch.stack([test(m) for m in tuned[chosen[arm]]])
    return {"s": s, "lrs": tuple(lrs), "lr": chosen, "curve": curve, "seeds": tuple(seeds), "trained_len": trained_len}


def _pi_span(res: dict, arm: str, lo: int, hi: int) -> list:
    return res["curve"][arm][:, lo - 1:hi].mean(1).tolist()


def print_interpolation(res: dict) -> None:
    from ..results import seed_span

    k_max = res["curve"]["plain"].shape[1]
    print(f"RoPE copy model, seeds {list(res['seeds'])}: accuracy, mean (worst-best seed); s = {res['s']:.2f}")
    print(f"{'':38s} {'k 1-16':>17s} {'k 17-' + str(k_max):>17s}")
    for arm, label in PI_ARMS.items():
        lr = f" (lr {res['lr'][arm]:g})" if arm in res["lr"] else ""
        print(f"{label + lr:38s} " + " ".join(f"{seed_span(_pi_span(res, arm, lo, hi), '{:.2f}'):>17s}"
                                             for lo, hi in ((1, 16), (17, k_max))))


def check_and_glue_interpolation(res: dict) -> None:
    """Position interpolation's claims, asserted on every seed, and its numbers glued (seed spans)."""
    from ..results import seed_span
    from ..utils import claim, glue

    k_max = res["curve"]["plain"].shape[1]
    inside = {arm: _pi_span(res, arm, 1, 16) for arm in PI_ARMS}
    beyond = {arm: _pi_span(res, arm, 17, k_max) for arm in PI_ARMS}
    claim(min(beyond["pi"]) > max(beyond["plain"]) + 0.3,
          f"interpolation alone lifts every seed beyond the trained distances: {beyond}")
    claim(max(inside["pi"]) < min(inside["plain"]) - 0.05,
          f"and costs every seed some accuracy inside them: {inside}")
    claim(min(inside["pi_ft"]) > max(inside["pi"]),
          f"fine-tuning with interpolation wins back accuracy inside the trained distances: {inside}")
    claim(min(beyond["pi_ft"]) > max(beyond["direct_ft"]) + 0.1,
          f"after the same fine-tuning, interpolation wins beyond on every seed: {beyond}")
    reach = 16 * res["s"]                    # k / s <= 16: a distance the model was trained to answer
    near = res["curve"]["pi"][:, 16:int(reach) - 1].mean(1)     # k = 17 .. reach - 1
    far = res["curve"]["pi"][:, int(reach) + 2:].mean(1)        # k = reach + 3 .. k_max
    claim(bool((near > 0.7).all() and (far < 0.5).all()),
          f"interpolated without training: holds up to k = 16 s = {reach:.1f}, falls beyond: {near}, {far}")
    glue("ch5_pi_reach", f"{reach:.0f}")
    for arm in ("pi_ft", "direct_ft"):
        claim(res["lr"][arm] not in (res["lrs"][0], res["lrs"][-1]),
              f"{arm}: its best rate {res['lr'][arm]:g} is inside the sweep {res['lrs']}")
    for arm in PI_ARMS:
        glue(f"ch5_pi_{arm}_in", seed_span(inside[arm], "{:.2f}"), spread="glue_spread", margin=2)
        glue(f"ch5_pi_{arm}_beyond", seed_span(beyond[arm], "{:.2f}"), spread="glue_spread", margin=2)
    glue("ch5_pi_s", f"{res['s']:.1f}")
    glue("ch5_pi_len", f"{res['trained_len'] * res['s']:.0f}")
    glue("ch5_pi_lrs", ", ".join(f"{lr:g}" for lr in res["lrs"]))


def draw_interpolation(res: dict):
    """Accuracy against k for the four arms: the mean over seeds, with a band from the worst to the best seed."""
    from .. import plots

    k_max = res["curve"]["plain"].shape[1]
    ks = torch.arange(1, k_max + 1)
    reach = 16 * res["s"]
    fig, ax = plots.new_figure(figsize=(7.5, 3.2), alt=(
        "Copy k back with the RoPE model: accuracy against k, mean of the seeds with a band from worst to best, for "
        "four versions: " + "; ".join(f"{label} {res['curve'][arm][:, :16].mean():.2f} for k up to 16 and "
                                      f"{res['curve'][arm][:, 16:].mean():.2f} beyond"
                                      for arm, label in PI_ARMS.items())
        + f". A dashed line after k = 16, the largest k in training; a dotted one at 16 s = {reach:.1f}, where the "
        "interpolated model without training falls."))
    styles = {"plain": dict(color="tab:red"), "pi": dict(color="tab:orange", ls="--"),
              "pi_ft": dict(color="tab:green"), "direct_ft": dict(color="0.4", ls=":")}
    for arm, label in PI_ARMS.items():
        c = res["curve"][arm]
        ax.fill_between(ks, c.min(0).values, c.max(0).values, color=styles[arm]["color"], alpha=0.15, lw=0)
        ax.plot(ks, c.mean(0), label=label, **styles[arm])
    ax.axvline(16.5, color="0.5", ls="--", lw=0.8)
    ax.axvline(reach, color="tab:orange", ls=":", lw=0.8)
    ax.text(reach, 0.5, " 16 × s", color="tab:orange", fontsize=7)
    ax.axhline(1 / 16, color="0.6", lw=0.6)
    ax.set(xlabel="k (distance to the letter to copy)", ylabel="accuracy", ylim=(-0.02, 1.02),
           title=f"RoPE with position interpolation: mean of {len(res['seeds'])} seeds, band worst to best")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig
