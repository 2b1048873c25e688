"""Chapter 10, the modern GPT: the needle task, the ladder's tables and verdicts, the speedrun's table, the live
race read at equal steps and at equal seconds, the INT8 cache comparison and the recorded budget leaderboard.
"""
from __future__ import annotations

import dataclasses
import math
import textwrap
from typing import Callable, Optional

import torch
import torch.nn.functional as F

from ..checks import optional_positive_int, positive_int
from ..results import range_verdict, seed_span
from ..utils import claim, glue

__all__ = ["needle_batch", "range_verdict", "probe_figure", "VARIANT", "machine_line", "ladder_seconds", "seed_range",
           "scaling_record", "check_and_glue_scaling", "SCALING_CHOICES", "scaling_question",
           "check_and_glue_scaling_long",
           "gpu_recipe_on_the_fit", "long_leaderboard_row", "check_and_glue_scaling_gap",
           "scaling_figure", "ladder_verdicts", "print_ladder", "print_speedrun",
           "glue_speedrun", "curve_at", "race_report",
           "race_curves_figure", "train_needle_finder", "with_window", "needle_accuracy", "cache_comparison",
           "budget_summary_lines"]

VARIANT = "  variant: ReLU^2 instead of SwiGLU"   # the ladder's eleventh configuration: ReLU^2 where SwiGLU was


def needle_batch(batch_size: int, seq_len: int, n_values: int = 8,
                 distance: Optional[int] = None, generator: Optional[torch.Generator] = None):
    """A needle in filler: name the one value token, k steps before the end. Chapter 10.

    Every position holds the filler token (id n_values) except one, which holds a value 0..n_values-1
    k = distance steps before the end (k = 1: the last token). The answer is that value: a model can give
    it only if its last position can see that far back (one attention layer reads it in one step).
    Returns x (B, T) ids, y (B,) answers, k (B,) distances; k is uniform in 1..T unless given.
    """
    positive_int(batch_size=batch_size, seq_len=seq_len, n_values=n_values)
    if n_values < 2:
        raise ValueError(f"need n_values >= 2 (a value and something else), got {n_values}")
    if distance is not None and optional_positive_int(distance=distance) > seq_len:
        raise ValueError(f"distance must be in 1..{seq_len} (1 = the last token), got {distance}")
    x = torch.full((batch_size, seq_len), n_values)
    y = torch.randint(0, n_values, (batch_size,), generator=generator)
    if distance is None:
        k = torch.randint(1, seq_len + 1, (batch_size,), generator=generator)
    else:
        k = torch.full((batch_size,), distance)
    x[torch.arange(batch_size), seq_len - k] = y
    return x, y, k


def machine_line(prov: dict) -> str:
    """A recorded result's provenance -> "CPU with N cores, on YYYY-MM-DD" (which machine its seconds belong to)."""
    return f"{prov['cpu'].replace('(R)', '')} with {prov['cpu_cores']} cores, on {prov['date'][:10]}"


def ladder_machines(prov: dict) -> str:
    """Where a ladder was recorded, oldest run first: its provenance and the runs it keeps under "earlier"
    (modern_ladder.py --bracket appends runs). The first run also timed the cost per step."""
    chain = [prov]
    while isinstance(chain[-1].get("earlier"), dict):
        chain.append(chain[-1]["earlier"])
    first, *later = chain[::-1]
    added = list(dict.fromkeys(machine_line(p) for p in later))    # the same machine and day once
    return machine_line(first) + " (its first runs, and the cost per step)" + "".join(
        f", and {m} (the runs it added)" for m in added)


def ladder_seconds(best_rung: dict, ms_per_step: float) -> list:
    """One rung's seeds at its best rate -> seconds to the target (steps x CPU ms per step); None: never reached."""
    return [None if s is None else s * ms_per_step / 1e3 for s in best_rung["steps"]]


def seed_range(values, fmt: str = "{:.0f}") -> str:
    """"mean (lowest–highest)" over the seeds, or "k of n seeds" when only k reached the target."""
    hit = [v for v in values if v is not None]
    return seed_span(hit, fmt) if len(hit) == len(values) else f"{len(hit)} of {len(values)} seeds"


def ladder_verdicts(best: dict, cost: dict) -> dict:
    """Each rung against the one before it (the variant against SwiGLU's rung): (steps verdict, time verdict),
    each "pays", "costs" or "within the spread" by range_verdict."""
    names = list(best)
    before = {n: names[i - 1] for i, n in enumerate(names[:-1]) if i}
    before[VARIANT] = "+ SwiGLU (8C/3 hidden)"
    return {n: (range_verdict(best[n]["steps"], best[b]["steps"]),
                range_verdict(ladder_seconds(best[n], cost[n]), ladder_seconds(best[b], cost[b])))
            for n, b in before.items()}


SWEEP = (0.004, 0.008, 0.016, 0.025, 0.05, 0.1)   # the ladder's first sweep: AdamW's three rates, then Muon's


def glue_bracketing(rows: list, best: dict) -> int:
    """The rates the ladder added beyond its first sweep (benchmarks/modern_ladder.py --bracket: half the lowest
    rate, where a rung's best sat there; a rung named for Muon or the WSD schedule is a Muon rung) and whether
    every best rate now has a tried rate on each side. Glues ch10_lad_bracket (what was added) and
    ch10_lad_edge_words (a sentence chosen by the count). Returns the number of rungs whose best rate is still an
    edge of its sweep."""
    extra = {}                                         # optimiser -> {added rate: runs}
    for r in rows:
        if float(r["rate"]) not in SWEEP:
            opt = "Muon" if "Muon" in r["rung"] or "stable" in r["rung"] else "AdamW"
            extra.setdefault(opt, {}).setdefault(float(r["rate"]), 0)
            extra[opt][float(r["rate"])] += 1
    edges = sum(b["edge"] for b in best.values())
    glue("ch10_lad_bracket", "; ".join(f"{opt}: " + ", then ".join(
        f"{n} run{'s' * (n != 1)} at {rate:g}" for rate, n in sorted(runs.items(), reverse=True))
        for opt, runs in sorted(extra.items())) if extra else "none was needed")
    glue("ch10_lad_edge_words", "Every rung's best rate now has a rate tried on each side of it." if not edges else
         f"In {edges} of the {len(best)} configurations the best rate is still at an edge of the rates tried, so "
         "another rate might do better still.")
    return edges


def print_ladder(best: dict, cost: dict, verdict: dict, prov: dict) -> None:
    """The recorded ladder's two tables: the sweep (seeds at the target and mean steps per rate), then each rung at
    its best rate, with its verdicts against the rung before."""
    short = {"pays": "pays", "costs": "costs", "within the spread": "within"}
    print("The sweep: seeds at the target, and their mean steps, at each peak rate")
    adamw, muon = sorted(prov["rates"]), sorted(prov["muon_rates"])
    width = max(len(adamw), len(muon))
    print(f"{'rung':30s}" + "".join(f"{r:g}".center(11) for r in adamw) + "  best rate")
    for n, b in best.items():
        column = muon if max(b["by_rate"]) > max(adamw) else adamw       # a Muon rung: Muon's rates
        cells = [(f"{k}/{b['seeds']} {m:4.0f}" if m else f"{k}/{b['seeds']}  ---").center(11)
                 if r in b["by_rate"] else "".center(11)
                 for r in column for k, m, _ in [b["by_rate"].get(r, (0, None, None))]]
        print(f"{n.replace('variant: ', ''):30.30s}{''.join(cells).ljust(11 * width)}  {b['rate']:g}")
    print("Muon rungs: Muon's rate, in the same columns:", ", ".join(f"{r:g}" for r in muon))
    print("\nAt the best rate: to the target, and against the rung before (beyond the seeds' spread or within)")
    print(f"{'rung':30s}{'steps':>15s}{'ms/step':>9s}{'seconds':>14s}   steps / time")
    for n, b in best.items():
        v = " / ".join(short[x] for x in verdict[n]) if n in verdict else ""
        print(f"{n.replace('variant: ', ''):30.30s}{seed_range(b['steps']):>15s}{cost[n]:9.0f}"
              f"{seed_range(ladder_seconds(b, cost[n])):>14s}   {v}")


def print_speedrun(speedrun: list, rules: dict, width: int = 100) -> None:
    """The speedrun's records table (book/results/speedrun_records.csv), each entry's verdict on its own line."""
    print(f"a record: every seed below the standing record's mean, one-sided Welch p < {rules['alpha']}, "
          f"at least {rules['min_seeds']} seeds")
    name_w = max(len(r["entry"]) for r in speedrun) + 1          # the longest entry name, and a space
    print(f"{'':4s}{'entry':{name_w}s}|{'CPU s to target':>26s}|{'steps':>6s}| reached")
    for r in speedrun:
        mark = f"R{r['time_record']}" if r["time_record"] else "-"
        cpu = f"{float(r['cpu_mean']):.1f} ± {float(r['cpu_sd']):.1f} ({r['seeds']} seeds)"
        print(f"{mark:4s}{r['entry']:{name_w}s}|{cpu:>26s}|{float(r['steps_mean']):6.0f}| "
              f"{r['reached']} of {r['seeds']}")
        print(textwrap.fill(r["time_verdict"], width, initial_indent=" " * 8, subsequent_indent=" " * 8))


def glue_speedrun(speedrun: list, machine: str, rules: dict) -> None:
    """The glues of the speedrun's table (recorded data, read): the standing record, its ratio to record 0, the
    negative results, the ReLU^2 entry against SwiGLU's (exercise 3), the rule's p and false-record rate, and
    what record 0's step costs against nanoGPT's own (benchmarks/speedrun/nanogpt_parity.py)."""
    from ..results import provenance, read_rows

    records = [r for r in speedrun if r["time_record"]]
    glue("ch10_sr_alpha", f"{rules['alpha']:g}")
    (equal, worst), judged = rules["false_record_rate"], rules["judged"]
    claim(judged == len(speedrun) - 1, f"every entry after record 0 was judged once: {judged}")
    glue("ch10_sr_frr", f"{100 * equal:.1f} %–{100 * worst:.1f} %")
    glue("ch10_sr_judged", judged)
    glue("ch10_sr_false_expected", f"{judged * equal:.2f}–{judged * worst:.2f}")
    old_equal, old_worst = rules["false_record_rate_at_0.05"]
    glue("ch10_sr_false_expected_old", f"{judged * old_equal:.1f}–{judged * old_worst:.1f}")
    parity = {r["implementation"]: float(r["ms_per_step"]) for r in read_rows("speedrun_nanogpt_parity")
              if r["section"] == "process"}
    ng, bk = parity["nanoGPT train.py"], parity["book record 0"]
    glue("ch10_parity_nanogpt_ms", f"{ng:.1f}")
    glue("ch10_parity_book_ms", f"{bk:.1f}")
    glue("ch10_parity_ratio", f"{bk / ng:.2f}")
    glue("ch10_parity_commit", provenance("speedrun_nanogpt_parity")["nanogpt_commit"][:8])
    claim(records[0]["entry"] == "nanogpt" and int(records[0]["reached"]) == 0,
          f"record 0 is the nanoGPT recipe, which never reached the target: {records[0]}")
    glue("ch10_sr_machine", machine)
    glue("ch10_sr_best", records[-1]["entry"])
    glue("ch10_sr_best_ratio", f"{float(records[-1]['cpu_mean']) / float(records[0]['cpu_mean']):.3f}")
    glue("ch10_sr_negatives", sum(not r["time_record"] for r in speedrun))
    relu2, swiglu = (next(r for r in speedrun if r["entry"] == e) for e in ("modern-relu2", "modern"))
    glue("ch10_sr_relu2", f"{float(relu2['cpu_mean']):.1f} ± {float(relu2['cpu_sd']):.1f}")
    glue("ch10_sr_swiglu", f"{float(swiglu['cpu_mean']):.1f} ± {float(swiglu['cpu_sd']):.1f}")
    glue("ch10_sr_relu2_steps", f"{float(relu2['steps_mean']):.0f}")
    glue("ch10_sr_swiglu_steps", f"{float(swiglu['steps_mean']):.0f}")
    claim(not relu2["time_record"], "the ReLU^2 entry is not a time record (recorded verdict, exercise 3)")
    glue("ch10_sr_relu2_verdict", "a record" if relu2["time_record"] else "in the log of negative results")


def curve_at(curve: list, seconds: float) -> tuple:
    """A race curve [(step, train seconds, loss), ...] -> (steps, loss) at `seconds` of training, both read off the
    curve by linear interpolation between its evaluations (the last point past its end, the first before it)."""
    if not curve:
        raise ValueError("curve_at needs at least one (step, seconds, loss) point")
    if seconds <= curve[0][1]:
        return float(curve[0][0]), curve[0][2]
    for (n0, s0, v0), (n1, s1, v1) in zip(curve, curve[1:]):
        if s0 <= seconds <= s1:
            f = (seconds - s0) / (s1 - s0) if s1 > s0 else 1.0
            return n0 + f * (n1 - n0), v0 + f * (v1 - v0)
    return float(curve[-1][0]), curve[-1][2]


def race_report(runs: list, curves: list) -> dict:
    """The live race (course recipe, modern recipe), read twice: at equal steps (the end of both runs, and step 100)
    and at equal seconds (the shorter run's training time, read off both curves). Prints, asserts and glues."""
    (course, modern), (course_c, modern_c) = runs, curves
    course_end, modern_end = course_c[-1][2], modern_c[-1][2]
    common = sorted({s for s, _, _ in course_c} & {s for s, _, _ in modern_c})
    equal_step = max([s for s in common if s <= 100] or common[:1])
    course_at, modern_at = (next(v for s, _, v in c if s == equal_step) for c in curves)
    for n, c_v, m_v in ((equal_step, course_at, modern_at), (course.step, course_end, modern_end)):
        print(f"equal steps, {n:4d} each: course recipe {c_v:.3f} nats, modern recipe {m_v:.3f} nats")
    claim(course.step == modern.step, f"an equal-steps race: {course.step} and {modern.step} steps")
    claim(modern_at < course_at - 0.1 and modern_end < course_end - 0.1,
          f"at equal steps the modern recipe is clearly ahead: {modern_at:.3f} vs {course_at:.3f} after "
          f"{equal_step}, {modern_end:.3f} vs {course_end:.3f} after {course.step}")
    equal_s = min(course.train_s, modern.train_s)            # the shorter run's training time
    (course_n, course_v), (modern_n, modern_v) = (curve_at(c, equal_s) for c in curves)
    print(f"equal seconds ({equal_s:.1f} s): course recipe {course_n:.0f} steps, {course_v:.3f} nats | "
          f"modern recipe {modern_n:.0f} steps, {modern_v:.3f} nats")
    claim(max(course_n, modern_n) == course.step, f"the shorter run is read at its end: {course_n}, {modern_n}")
    glue("ch10_race_equal_step", equal_step, tol="any")   # 100 wherever both runs get that far
    glue("ch10_race_course_at", f"{course_at:.2f}", tol=0.1, spread="glue_spread", margin=2)
    glue("ch10_race_modern_at", f"{modern_at:.2f}", tol=0.1, spread="glue_spread", margin=2)
    glue("ch10_race_course_end", f"{course_end:.2f}", tol="any")      # asserted above: modern ahead by > 0.1
    glue("ch10_race_modern_end", f"{modern_end:.2f}", tol="any")
    glue("ch10_race_equal_s", f"{equal_s:.0f}", timing=True)          # seconds and steps in them: this machine
    glue("ch10_race_course_s", f"{course.train_s:.0f}", timing=True)
    glue("ch10_race_modern_s", f"{modern.train_s:.0f}", timing=True)
    glue("ch10_race_course_steps", f"{course_n:.0f}", timing=True)
    glue("ch10_race_modern_steps", f"{modern_n:.0f}", timing=True)
    glue("ch10_race_course_v", f"{course_v:.2f}", tol="any")          # at equal seconds: depends on the machine
    glue("ch10_race_modern_v", f"{modern_v:.2f}", tol="any")
    glue("ch10_race_time_lead", "also ahead" if modern_v < course_v else "behind" if modern_v > course_v
         else "level", tol="any")
    return {"equal_s": equal_s, "course": (course_n, course_v), "modern": (modern_n, modern_v)}


PROBE_QUANTITIES = [("attn_logit_max", "largest attention logit", (1, 3000)),
                    ("ffn_act_rms", "FFN activation RMS", (0.05, 100)),
                    ("update_rel", "change of the hidden\nmatrices per 20 steps", (0.02, 5))]   # the same axes always


def probe_figure(probes: list, best: dict, rung: str, plots, every: int = 20):
    """One rung of the recorded ladder from inside (book/results/modern_ladder_probes.csv): the three probes
    against the step, one colour per rate tried, one line per seed. A line breaks where probes (every `every`
    steps) are missing and ends where the run stopped."""
    fig, axes = plots.new_figure(figsize=(8.4, 2.9), ncols=3)
    for ax, (q, label, ylim) in zip(axes, PROBE_QUANTITIES):
        for i, rate in enumerate(sorted(best[rung]["by_rate"])):
            for seed in sorted({p["seed"] for p in probes}):
                pts = [(int(p["step"]), float(p[q])) for p in probes
                       if p["rung"] == rung and float(p["rate"]) == rate and p["seed"] == seed]
                gaps = [j for j in range(1, len(pts)) if pts[j][0] - pts[j - 1][0] > every]
                for part in (pts[a:b] for a, b in zip([0] + gaps, gaps + [len(pts)])):
                    ax.plot(*zip(*part), color=f"C{i}", lw=1, alpha=0.8,
                            label=f"rate {rate:g}" if seed == "1337" and part[0] == pts[0] else None)
        ax.set(xlabel="step", title=label, yscale="log", ylim=ylim, xlim=(0, 610))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{rung.strip()}: every rate tried, three seeds each (a line ends where the run stopped)",
                 fontsize=10)
    return fig


def race_curves_figure(runs: list, curves: list, target: float, equal_s: float, plots):
    """The live race's two curves against training seconds, the target and the equal-seconds line."""
    fig, ax = plots.new_figure(figsize=(6.4, 3.4))
    for run, curve in zip(runs, curves):
        ax.plot([s for _, s, _ in curve], [v for *_, v in curve], marker="o", ms=3, label=run.recipe.name)
    ax.axhline(target, color="black", lw=0.8, ls=":", label="target (a recorded nanoGPT-recipe run's final loss)")
    ax.axvline(equal_s, color="grey", lw=0.8, label="equal seconds (the shorter run's end)")
    ax.set(xlabel="training seconds", ylabel="validation loss (nats)",
           title="Live race on this machine: the same steps, on the clock",
           ylim=(1.7, max(2.8, 0.05 + max(v for curve in curves for *_, v in curve))))   # every point shown
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def train_needle_finder(seq_len: int = 64, n_layers: int = 1, window: Optional[int] = None, steps: int = 200,
                        seed: int = 0, device=None):
    """A small GPT trained on needle_batch (the answer read at the last position), AdamW at a constant 3e-3."""
    from ..gpt import GPT, GPTConfig
    from ..optim import build_optimizer, fit
    from ..utils import seed_everything
    gen = seed_everything(seed)
    finder = GPT(GPTConfig(vocab_size=9, context_len=seq_len, d_model=32, n_heads=2, n_layers=n_layers,
                           window=window)).to(device)
    fit(finder, lambda: [t.to(device) for t in needle_batch(64, seq_len, generator=gen)],
        loss_fn=lambda m, b: F.cross_entropy(m(b[0])[:, -1], b[1]),
        optimizer=build_optimizer(finder, lr=3e-3, weight_decay=0.01, betas=(0.9, 0.999)), steps=steps,
        schedule="constant", progress=False)
    return finder.eval()


def with_window(finder, window: int, device=None):
    """The trained finder with its attention limited to `window` keys: a config choice, no parameter changes."""
    from ..gpt import GPT
    probe = GPT(dataclasses.replace(finder.config, window=window)).to(device).eval()
    probe.load_state_dict(finder.state_dict())
    return probe


def needle_accuracy(model, k: int, seq_len: int, n: int = 256, device=None) -> float:
    """The share of n needle sequences (needle k steps before the end) whose value the model names."""
    x, y, _ = needle_batch(n, seq_len, distance=k, generator=torch.Generator().manual_seed(k))
    with torch.no_grad():
        return (model(x.to(device))[:, -1].argmax(-1).cpu() == y).float().mean().item()


def cache_comparison(model, ids: torch.Tensor, to_bits: Callable) -> dict:
    """Feed `ids` (1, T) one token at a time through a float32 and an INT8 KV cache: each cache's bytes, the largest
    logit error against the full pass, the share of positions whose top token agrees, and bits per character."""
    with torch.no_grad():
        full = model(ids)
        out = {}
        for kind, int8 in (("float32", False), ("int8", True)):
            cache = model.new_cache(1, int8=int8)
            logits = torch.cat([model(ids[:, t:t + 1], cache=cache) for t in range(ids.shape[1])], dim=1)
            out[kind] = {"bytes": cache.nbytes, "err": (logits - full).abs().max().item(),
                         "agree": (logits.argmax(-1) == full.argmax(-1)).float().mean().item(),
                         "bits": to_bits(F.cross_entropy(logits[0, :-1], ids[0, 1:]).item())}
    return out


def budget_summary_lines(summary: dict, longest: float) -> list:
    """The recorded budget leaderboard at its longest budget: one line per neural model, best first, then the best
    count table, each at most 100 characters."""
    neural = {m: d["budgets"][longest][0] for m, d in summary.items() if not d["count"]}
    counts = {m: min(v[0] for v in d["budgets"].values()) for m, d in summary.items() if d["count"]}
    best_count = min(counts, key=counts.get)
    lines = [f"  {m:24s} {v:.3f} bits/char" for m, v in sorted(neural.items(), key=lambda kv: kv[1])]
    lines.append(f"  {best_count}: {counts[best_count]:.3f} bits/char (counted, no training)")
    return lines


SCALING_MODELS = ("modern GPT (ch. 10)", "LSTM (ch. 2)")


def scaling_record() -> dict:
    """benchmarks/scaling_crossing.py's record: every seed's point (the leaderboard's 15, 60 and 240 s runs and the
    fit's own), the prediction with its provenance, and the long runs if they are recorded. -> {"points": {model:
    {budget: [bits, one per seed]}}, "pred": {(quantity, model, axis): (estimate, low, high)}, "fits": {axis:
    {model: (L_inf, A, alpha)}}, "kn", "spread", "pred_prov", "long": {model: {budget: [bits]}} or None,
    "long_prov": [provenance of each scaling_long_*.csv] or None, "fit_cpu_s", "long_cpu_s": CPU seconds spent}."""
    from ..results import RESULTS_DIR, provenance, read_rows

    points = {m: {} for m in SCALING_MODELS}
    board = [r for r in read_rows("budget_leaderboard") if r["model"] in points and r["phase"] == "final"]
    for r in board + read_rows("scaling_fit"):
        points[r["model"]].setdefault(float(r["budget_s"]), []).append(float(r["val_bpc"]))
    pred_prov = provenance("scaling_prediction")
    pred = {(r["quantity"], r["model"], r["axis"]): tuple(float(r[k]) for k in ("estimate", "low", "high"))
            for r in read_rows("scaling_prediction")}
    fit_cpu_s = sum(float(r["cpu_s"]) for r in read_rows("scaling_fit"))
    long, long_prov, long_cpu_s = None, [], 0.0
    for path in sorted(RESULTS_DIR.glob("scaling_long_*.csv")):      # one table per recorded call, each dated
        prov = provenance(path.stem)
        if prov["date"] <= pred_prov["date"]:
            raise AssertionError(f"{path.name}: the long runs must come after the prediction: re-record them")
        long = long or {m: {} for m in SCALING_MODELS}
        long_prov.append(prov)
        for r in read_rows(path.stem):
            long[r["model"]].setdefault(float(r["budget_s"]), []).append(float(r["val_bpc"]))
            long_cpu_s += float(r["cpu_s"])
    return dict(points={m: dict(sorted(v.items())) for m, v in points.items()}, pred=pred,
                fits={axis: {m: tuple(v) for m, v in f.items()} for axis, f in pred_prov["fits"].items()},
                kn=pred_prov["kn_bits"], spread=pred[("spread", "", "bits/char")][0], pred_prov=pred_prov,
                long=long, long_prov=long_prov or None, fit_cpu_s=fit_cpu_s, long_cpu_s=long_cpu_s)


def _minutes(seconds: float) -> str:
    return "never" if not math.isfinite(seconds) else f"{seconds / 60:.0f}" if seconds >= 600 else f"{seconds / 60:.1f}"


def check_and_glue_scaling(S: dict, plots):
    """The fit and the prediction: printed, glued, drawn (without the long runs: scaling_figure) -> the figure."""
    gpt, lstm = SCALING_MODELS
    print(f"fit, L(C) = L_inf + A C^-alpha, C in CPU seconds (90 % intervals: {S['pred_prov']['args']['boot']} "
          "resamples of the seeds)")
    for m in SCALING_MODELS:
        L, A, a = (S["pred"][(q, m, "cpu_s")] for q in ("L_inf", "A", "alpha"))
        claim(all(lo <= est <= hi for est, lo, hi in (L, A, a)) and a[0] > 0,
              f"{m}: each fitted parameter lies inside its bootstrap interval, alpha > 0: {L}, {A}, {a}")
        print(f"  {m:20s} L_inf {L[0]:.3f} [{L[1]:.3f}, {L[2]:.3f}]  alpha {a[0]:.2f} [{a[1]:.2f}, {a[2]:.2f}]")
    cross = {m: S["pred"][("passes Kneser-Ney", m, "cpu_s")] for m in SCALING_MODELS}
    lead = S["pred"][("lead beyond the spread", gpt, "cpu_s")]
    print(f"predicted: {gpt} passes Kneser-Ney ({S['kn']:.3f}) after {_minutes(cross[gpt][0])} CPU-minutes "
          f"[{_minutes(cross[gpt][1])}, {_minutes(cross[gpt][2])}]")
    print("           the LSTM " + ("never: its floor lies above the line" if not math.isfinite(cross[lstm][0]) else
                                   f"after {_minutes(cross[lstm][0])} CPU-minutes"))
    print(f"           the GPT leads by more than the seeds' spread ({S['spread']:.3f}) from {_minutes(lead[0])} "
          "CPU-minutes")
    print(f"prediction recorded {S['pred_prov']['date'][:16]} (commit {S['pred_prov']['git_commit'][:7]})")
    glue("ch10_sc_kn", f"{S['kn']:.3f}")
    for m, key in ((gpt, "gpt"), (lstm, "lstm")):
        L = S["pred"][("L_inf", m, "cpu_s")]
        glue(f"ch10_sc_{key}_floor", f"{L[0]:.2f} ({L[1]:.2f}–{L[2]:.2f})")
        c = cross[m]
        glue(f"ch10_sc_{key}_cross", _minutes(c[0]) if not math.isfinite(c[0]) else
             f"{_minutes(c[0])} CPU-minutes ({_minutes(c[1])}–{_minutes(c[2])})")
    glue("ch10_sc_lead", f"{_minutes(lead[0])} CPU-minutes ({_minutes(lead[1])}–{_minutes(lead[2])})")
    glue("ch10_sc_pred_date", S["pred_prov"]["date"][:10])
    return scaling_figure(S, plots, with_long=False)


def scaling_figure(S: dict, plots, with_long: bool = True):
    """The short runs and the fitted curves, the Kneser-Ney line, the predicted crossing's interval and (with_long)
    the long runs' seeds as squares: the whole range, and zoomed on the prediction -> the figure."""
    gpt, lstm = SCALING_MODELS
    f = S["fits"]["cpu_s"]
    cross = {m: S["pred"][("passes Kneser-Ney", m, "cpu_s")] for m in SCALING_MODELS}
    long = S["long"] if with_long else None
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig, axes = plots.new_figure(figsize=(9.6, 3.8), ncols=2)
    colours = {gpt: "tab:purple", lstm: "tab:red"}
    top = max(max(S["points"][m]) for m in SCALING_MODELS)
    if long:
        top = max(top, max(max(v) for v in long.values()))
    right = max(top * 2, min(cross[gpt][2] * 1.3, 1e4) if math.isfinite(cross[gpt][2]) else top * 4)
    xs = [15 * (right / 15) ** (i / 199) for i in range(200)]
    for ax in axes:
        for m in SCALING_MODELS:
            L, A, a = f[m]
            ax.plot(xs, [L + A * x ** -a for x in xs], color=colours[m], lw=1.2, label=f"{m}: fit")
            pts = [(b, y) for b, v in S["points"][m].items() for y in v]
            ax.plot([b for b, _ in pts], [y for _, y in pts], "o", ms=3, color=colours[m],
                    label=f"{m}: the short runs")
            if long:
                pts = [(b, y) for b, v in long[m].items() for y in v]
                ax.plot([b for b, _ in pts], [y for _, y in pts], "s", ms=5, color=colours[m], mfc="none",
                        label=f"{m}: the long runs")
        ax.axhline(S["kn"], color="tab:orange", ls="--", lw=1.2, label=f"Kneser-Ney 7-gram ({S['kn']:.3f})")
        if math.isfinite(cross[gpt][0]):
            ax.axvspan(cross[gpt][1], min(cross[gpt][2], xs[-1]), color=colours[gpt], alpha=0.12,
                       label="predicted crossing, 90 %")
        ax.set(xscale="log", xlabel="training compute (CPU seconds of one thread)")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(alpha=0.3)
    axes[0].set(ylabel="validation bits/char", title="Fit on the short runs (15 s to 8 min)")
    lo = min(S["kn"], min(L for L, _, _ in f.values())) - 0.02
    hi = max([S["kn"] + 0.12] + [max(v) + 0.02 for m in (long or {}) for v in long[m].values()])
    axes[1].set(xlim=(200, xs[-1]), ylim=(lo, hi), ylabel="validation bits/char",
                title="Zoomed: the prediction" + (" and the long runs" if long else ""))
    axes[1].set_xticks([300, 1000, 3000])
    axes[0].legend(fontsize=7, loc="upper right")
    return fig


# The question before the long runs: what the first long runs show, against the fit's prediction and the 8-minute runs.
SCALING_CHOICES = ("it passes the 7-gram", "it comes closer, not yet past", "it gets worse")


def scaling_question(S: dict) -> str:
    """The predict-then-measure question, its numbers read from the record: the predicted crossing (CPU seconds)
    and the GPT's first long budget."""
    gpt = SCALING_MODELS[0]
    pred = S["pred"][("passes Kneser-Ney", gpt, "cpu_s")][0]
    first = min(S["long"][gpt]) if S["long"] else pred
    return (f"The fit says the modern GPT passes the 7-gram after about {_minutes(pred)} CPU-minutes. What do its "
            f"{first / 60:g}-minute runs show?")


def _span(v) -> str:
    from ..results import value_range
    return value_range(min(v), max(v), "{:.3f}")


def check_and_glue_scaling_long(S: dict) -> dict:
    """The long runs against the prediction (scaling_record's S): printed, glued (each comparison a whole sentence
    built from the numbers) -> {"answer": the choice of SCALING_CHOICES the modern GPT's first long budget picks
    (against the line and its longest short runs), "quiz": the quiz's answer (q.answer(**quiz)), "crossing": (low,
    high) CPU seconds or None, "miss": {(model, budget): measured mean - the fit's curve}, "worse": bool, "beyond":
    the sentence on the GPT's longest budget past the first, glued as ch10_sc_gpt_beyond; None without one, "lstm": the
    LSTM's sentence at its longest budget (against its first long budget, when there are two), glued as
    ch10_sc_lstm_verdict}."""
    import statistics

    if not S["long"]:
        raise ValueError("no long runs recorded: benchmarks/scaling_crossing.py --part long --budgets 1440")
    gpt, lstm = SCALING_MODELS
    f, kn, spread = S["fits"]["cpu_s"], S["kn"], S["spread"]
    curve = lambda m, c: f[m][0] + f[m][1] * c ** -f[m][2]
    mean = statistics.fmean
    print(f"{'budget':>9} | {'model':20s} | {'seeds':>11} | {'mean':>5} | {'fit said':>8} | miss")
    miss = {}
    for m in SCALING_MODELS:
        for b, v in S["long"][m].items():
            miss[(m, b)] = mean(v) - curve(m, b)
            print(f"{b / 60:5.0f} min | {m:20s} | {_span(v):>11} | {mean(v):.3f} | {curve(m, b):8.3f} | "
                  f"{miss[(m, b)]:+.3f}")
    print(f"Kneser-Ney 7-gram: {kn:.3f}; the seeds' spread in the fit: {spread:.3f}")
    first, prev = min(S["long"][gpt]), max(S["points"][gpt])
    v, pv = S["long"][gpt][first], S["points"][gpt][prev]
    worse = mean(v) > mean(pv)
    answer = SCALING_CHOICES[0] if mean(v) < kn else SCALING_CHOICES[2] if worse else SCALING_CHOICES[1]
    every = {**S["points"][gpt], **S["long"][gpt]}             # the crossing: the last budget above, the first below
    above = [b for b, x in every.items() if mean(x) >= kn]
    below = [b for b, x in every.items() if mean(x) < kn and b > max(above)]
    crossing = (max(above), min(below)) if below else None
    pred = S["pred"][("passes Kneser-Ney", gpt, "cpu_s")]
    said = f"the prediction ({_minutes(pred[0])} CPU-minutes, {_minutes(pred[1])}–{_minutes(pred[2])})"
    gpt_sentence = (f"After {first / 60:g} CPU-minutes the modern GPT scores {mean(v):.3f} bits per character "
                    f"(seeds {_span(v)})")
    if crossing:
        inside = crossing[0] <= pred[2] and crossing[1] >= pred[1]
        gpt_sentence += (f", below the 7-gram's {kn:.3f}" + (" on every seed" if max(v) < kn else " on average")
                         + f": the crossing lies between {crossing[0] / 60:g} and {crossing[1] / 60:g} CPU-minutes, "
                         + ("inside" if inside else "outside") + f" {said}")
    elif worse:
        gpt_sentence += (f", above the 7-gram's {kn:.3f} and worse than its own {prev / 60:g}-minute runs "
                         f"({mean(pv):.3f}, seeds {_span(pv)})" + (" on every seed" if min(v) > max(pv) else "")
                         + f": {said} failed, for the loss went up, which no curve of the fitted form can do")
    else:
        gpt_sentence += (f", closer than its {prev / 60:g}-minute runs ({mean(pv):.3f}) but still above the 7-gram's "
                         f"{kn:.3f}: {said} " + ("failed" if first > pred[2] else "is not yet decided"))
    last = max(S["long"][gpt])
    if last > first:                                        # a run beyond the predicted budget
        w = S["long"][gpt][last]
        further = mean(w) > mean(v)
        apart = min(w) > max(v) if further else max(w) < min(v)
        beyond_sentence = (f"Trained further, for {last / 60:g} CPU-minutes, it scores {mean(w):.3f} "
                           f"(seeds {_span(w)}): " + (f"worse still than at {first / 60:g} minutes" if further else
                              f"better than at {first / 60:g} minutes") + (" on every seed" if apart else "")
                           + ("" if (mean(w) < kn) == (mean(v) < kn) else      # the line only where it was crossed
                              f", and {'below' if mean(w) < kn else 'above'} the 7-gram's {kn:.3f}"))
    else:
        beyond_sentence = None
    lb = max(S["long"][lstm])
    lv, gv = S["long"][lstm][lb], S["long"][gpt][lb]
    lf = min(S["long"][lstm])                                # the LSTM's first long budget, to compare with
    moved = "" if lf == lb else (
        f" ({mean(S['long'][lstm][lf]):.3f} at {lf / 60:g} minutes; " + (
            "every seed " + ("higher" if mean(lv) > mean(S["long"][lstm][lf]) else "lower")
            if min(lv) > max(S["long"][lstm][lf]) or max(lv) < min(S["long"][lstm][lf]) else "the seeds overlap") + ")")
    lstm_sentence = (f"The LSTM ends at {mean(lv):.3f} (seeds {_span(lv)}) after {lb / 60:g} minutes{moved}, "
                     + ("above the line, as its fitted floor said" if min(lv) > kn else
                        "below the line, which its fitted floor said it would never reach"))
    lead = mean(lv) - mean(gv)
    ahead, behind, av, bv = ("GPT", "LSTM", gv, lv) if lead > 0 else ("LSTM", "GPT", lv, gv)
    lead_sentence = (f"there the {ahead} leads the {behind} by {abs(lead):.3f} bits, "
                     + ("more than" if abs(lead) > spread else "within") + f" the seeds' spread ({spread:.3f})"
                     + (f", every {ahead} seed below every {behind} seed" if max(av) < min(bv) else ""))
    worst = max(miss, key=lambda k: abs(miss[k]))
    side = ("above the curve every time" if all(x > 0 for x in miss.values()) else
            "below the curve every time" if all(x < 0 for x in miss.values()) else "on both sides of the curve")
    fit_sentence = (f"The fitted curves missed the long runs' means by up to {abs(miss[worst]):.3f} bits "
                    f"({worst[0].split(' (')[0]}, {worst[1] / 60:g} minutes), "
                    + ("less than the seeds' spread" if abs(miss[worst]) <= spread else
                       "more than the seeds' spread: there the fit fails") + f", {side}")
    glue("ch10_sc_gpt_verdict", gpt_sentence)                # the verdicts are the prose below the cell
    if beyond_sentence:
        glue("ch10_sc_gpt_beyond", beyond_sentence)
    glue("ch10_sc_lstm_verdict", lstm_sentence)
    glue("ch10_sc_lead_verdict", lead_sentence)
    glue("ch10_sc_fit_verdict", fit_sentence)
    glue("ch10_sc_long_cpu_h", f"{S['long_cpu_s'] / 3600:.1f}")
    glue("ch10_sc_fit_cpu_h", f"{S['fit_cpu_s'] / 3600:.1f}")
    glue("ch10_sc_long_minutes", " and ".join(f"{b / 60:g}" for b in sorted(S["long"][gpt])))
    glue("ch10_sc_long_seeds", min(len(x) for m in S["long"] for x in S["long"][m].values()))
    glue("ch10_sc_answer", f"measured: {answer}")
    why = {SCALING_CHOICES[0]: "The fitted curve falls towards a floor below the line, and the runs followed it.",
           SCALING_CHOICES[1]: "The fitted curve flattens towards its floor: each step closer costs more compute.",
           SCALING_CHOICES[2]: "The fitted curve can only fall; trained longer on the same 1-MB text, the GPT's "
                               "validation loss rose instead (the next cell asks why)."}[answer]
    quiz = dict(choice=answer, why=why, measured=gpt_sentence, evidence=["ch10_sc_gpt_verdict"])
    return dict(answer=answer, crossing=crossing, miss=miss, worse=worse, quiz=quiz, beyond=beyond_sentence,
                lstm=lstm_sentence)


def check_and_glue_scaling_gap(S: dict) -> dict:
    """benchmarks/scaling_gap.py's record: the modern GPT retrained at a short and a long budget (the same rule,
    batches and seed as the fit's and the long runs), scored on training and on validation windows. Its validation
    bits are checked equal to the recorded runs' (the same training, redone); printed; the verdict glued as a
    sentence (overfitting only if the training bits fell while the validation bits rose) -> the rows by budget."""
    from ..results import read_rows

    gpt = SCALING_MODELS[0]
    rows = {float(r["budget_s"]): r for r in read_rows("scaling_gap") if r["model"] == gpt}
    if len(rows) < 2:
        raise ValueError("scaling_gap.csv needs a short and a long budget: python benchmarks/scaling_gap.py")
    short, long_ = min(rows), max(rows)
    seed = int(rows[short]["seed"])
    for b, r in rows.items():
        recorded = (S["long"] or {}).get(gpt, {}).get(b) or S["points"][gpt].get(b)
        if recorded is not None and len(recorded) > seed:
            claim(abs(float(r["val_bpc"]) - recorded[seed]) < 2e-3, f"the retrained {b:g}-second run reproduces the "
                  f"recorded one: {r['val_bpc']} vs {recorded[seed]:.4f}")
    tr = {b: float(r["train_bpc"]) for b, r in rows.items()}
    va = {b: float(r["val_bpc"]) for b, r in rows.items()}
    print(f"{'budget':>9} | steps  | epochs | training bits | validation bits | gap")
    for b in sorted(rows):
        print(f"{b / 60:5.0f} min | {rows[b]['steps']:>6} | {float(rows[b]['epochs']):6.1f} | {tr[b]:13.3f} | "
              f"{va[b]:15.3f} | {va[b] - tr[b]:.3f}")
    overfit = tr[long_] < tr[short] and va[long_] > va[short]
    went = lambda before, after: "fell" if after < before else "rose"
    sentence = (f"in {long_ / 60:g} minutes the GPT went through the training text "
                f"{float(rows[long_]['epochs']):.0f} times (in {short / 60:g} minutes, "
                f"{float(rows[short]['epochs']):.0f}). On seed {seed} its training bits {went(tr[short], tr[long_])} "
                f"from {tr[short]:.3f} to {tr[long_]:.3f} while its validation bits {went(va[short], va[long_])} from "
                f"{va[short]:.3f} to {va[long_]:.3f}" + (": it learned the training text by heart (it overfits)"
                                                         if overfit else ""))
    glue("ch10_sc_gap_verdict", sentence)                    # the verdict is the prose below the cell
    glue("ch10_sc_gap_epochs", f"{float(rows[long_]['epochs']):.0f}")
    return dict(rows=rows, overfit=overfit)


def long_leaderboard_row(S: dict):
    """The leaderboard's row for the modern GPT's longest recorded run (the mean of its seeds): display it."""
    from ..results import read_rows
    from ..train import leaderboard_row

    gpt = SCALING_MODELS[0]
    b = max(S["long"][gpt])
    v = S["long"][gpt][b]
    params = int(next(r["params"] for r in read_rows("budget_leaderboard") if r["model"] == gpt))
    return leaderboard_row(f"modern GPT 2x128, {b / 60:g} CPU-min, {len(v)} seeds", 10, sum(v) / len(v),
                           params=params, train_s=b)


def _sci(x: float) -> str:
    """5.3e15 -> '5.3 × 10¹⁵' (for prose)."""
    mant, exp = f"{x:.1e}".split("e")
    return f"{mant} × 10" + str(int(exp)).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))


def gpu_recipe_on_the_fit(S: dict, vocab_size: int) -> dict:
    """What the fit in FLOPs says for nanoGPT's GPU recipe (book.train.NANOGPT_GPU: 6 layers of 384, 5,000 steps of
    64 x 256 tokens; its README reports a validation loss of 1.47 nats after about 3 minutes of an A100): the
    recipe's training FLOPs, counted as the fit's were, and the fitted curve of the 2-layer modern GPT at that
    compute, against the recipe's reported loss. Printed, glued -> the numbers."""
    from ..gpt import GPT
    from ..timing import count_flops
    from ..train import NANOGPT_GPU

    r = NANOGPT_GPU
    model = GPT(r.config(vocab_size))
    x = torch.randint(vocab_size, (1, r.context_len))
    per_window = count_flops(lambda: F.cross_entropy(model(x).flatten(0, 1), x.flatten()).backward())
    flops = per_window * r.batch_size * r.steps
    L, A, a = S["fits"]["flops"][SCALING_MODELS[0]]
    at = L + A * flops ** -a
    reported = 1.47 / math.log(2)
    lo = S["pred"][("L_inf", SCALING_MODELS[0], "flops")][1]
    claim(reported < lo, f"the GPU recipe's reported {reported:.3f} bits lies below the 2-layer model's fitted floor "
          f"(90 % interval from {lo:.3f})")
    cross = S["pred"][("passes Kneser-Ney", SCALING_MODELS[0], "flops")][0]
    print(f"nanoGPT's GPU recipe: {flops:.2e} training FLOPs ({flops / cross:.0f} x the predicted crossing's)\n"
          f"  the 2-layer fit there: {at:.3f} bits/char; the recipe's reported 1.47 nats: {reported:.3f} bits/char")
    glue("ch10_sc_gpu_flops", _sci(flops))
    glue("ch10_sc_gpu_times", f"{flops / cross:.0f}")
    glue("ch10_sc_gpu_fit", f"{at:.3f}")
    glue("ch10_sc_gpu_bits", f"{reported:.2f}")
    glue("ch10_sc_gpu_params", f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}")
    return dict(flops=flops, fit=at, reported=reported)
