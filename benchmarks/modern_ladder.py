#!/usr/bin/env python3
"""From chapter 7's recipe to a modern one, one change at a time: 3 seeds and a rate sweep per rung. Chapter 10.

    python benchmarks/modern_ladder.py            # the recorded ladder (about 35 minutes on 2 idle CPU cores)
    python benchmarks/modern_ladder.py --bracket  # add one rate beyond the edge where a rung's best rate sits there
    python benchmarks/modern_ladder.py --quick    # a smoke test of the harness, no claims, writes nothing

Every rung is the rung before plus one change (book.train.GPTRecipe options): RMSNorm, SwiGLU at equal
parameters, RoPE, QK-norm, an untied output head, zero-initialised output projections, soft-capped logits,
Muon for the hidden matrices, and the warmup-stable-decay schedule. (No biases is not a rung: chapter 7's
recipe, like nanoGPT's, already has none.) ReLU^2 runs beside SwiGLU as a variant (the SwiGLU rung with
ReLU^2 at 4C in its place). Every rung's schedule is 600 steps long (chapter 7's).

Equal tuning effort: every rung trains at three peak rates with three seeds (1337, 1338, 1339). AdamW rungs sweep
the peak rate lr in --rates (min_lr a tenth of it); Muon rungs sweep Muon's rate in --muon-rates, with AdamW's part
at chapter 7's 8e-3. The chapter keeps each rung's best rate: most seeds at the target, then fewest mean steps
(then lowest mean last loss), which book.results.ladder_best implements.

The race is the speedrun's (benchmarks/speedrun/run.py): target nanoGPT's final validation loss 1.8857 nats, the
same 1,024 fixed validation windows, one torch thread per run. A run is evaluated (untimed) every --coarse steps,
and every 10 steps once within --margin nats of the target; it stops at the first evaluation at or below the
target, at the schedule's end, or once it has diverged (loss above a uniform guess after 100 steps, or not a
number). Every 20 steps a probe (benchmarks/speedrun/probes.py) logs what explains a failure: the largest
attention logit, the FFN activation's RMS and largest magnitude (largest over the layers), and the relative size
of the hidden matrices' change over those 20 steps. The runs go to --workers processes.

Time is a separate measurement: every rung trains 10 steps at a time in turns in ONE process (one thread), six
rounds after one warm-up round, so load hits every rung alike; a rung's cost is its median CPU milliseconds per
step. A rung's time to the target is its steps times that cost.

--bracket reads the recorded ladder and, for every rung whose best rate is the lowest (highest) it tried, trains
that rung's 3 seeds at half the lowest (twice the highest) rate, with the recorded settings; the runs are added to
the recorded tables (the cost table stays), and the provenance keeps the earlier runs' under "earlier". Run it
again until no rung's best rate sits on an edge.

Writes book/results/modern_ladder.csv (one row per run: rung, rate, seed, params, reached, steps, cpu_s, last_val,
diverged, attn_logit_max, ffn_act_rms_max, update_rel_mean), modern_ladder_curves.csv (every evaluation),
modern_ladder_probes.csv (every probe), modern_ladder_cost.csv (rung, ms_per_step, tokens_per_s) and their
provenance modern_ladder.json. The last line reads
    rungs=<n> runs=<n> first_steps=<course recipe's mean steps at its best rate> last_steps=<modern recipe's>
"""
from __future__ import annotations

import dataclasses
import math
import multiprocessing as mp
import statistics
import sys
import time

import torch

from bench_common import ROOT, char_corpus, parser, record

sys.path.insert(0, str(ROOT / "benchmarks" / "speedrun"))
from book.data import get_batch  # noqa: E402
from book.results import ladder_best  # noqa: E402
from book.train import COURSE_CPU, NANOGPT_CPU_FINAL_VAL, RecipeRun, evaluate_lm  # noqa: E402
from book.utils import count_params  # noqa: E402
from probes import Probe  # noqa: E402

RESULTS = ROOT / "book" / "results" / "modern_ladder.csv"
FIELDS = ["rung", "rate", "seed", "params", "reached", "steps", "cpu_s", "last_val", "diverged",
          "attn_logit_max", "ffn_act_rms_max", "update_rel_mean"]
CURVE_FIELDS = ["rung", "rate", "seed", "step", "cpu_s", "val"]
PROBE_FIELDS = ["rung", "rate", "seed", "step", "attn_logit_max", "ffn_act_rms", "ffn_act_max", "update_rel"]
COST_FIELDS = ["rung", "ms_per_step", "tokens_per_s"]
TARGET = NANOGPT_CPU_FINAL_VAL
SEEDS = (1337, 1338, 1339)
EVAL_WINDOWS = 1024          # the speedrun's fixed validation windows
PROBE_EVERY, FINE = 20, 10
RATES, MUON_RATES = (4e-3, 8e-3, 1.6e-2), (0.025, 0.05, 0.1)


def ladder(steps: int):
    """The rungs, each the previous one plus one change; and the ReLU^2 variant of the SwiGLU rung."""
    r = dataclasses.replace(COURSE_CPU, name="chapter 7 recipe", steps=steps)
    rungs = [r]
    for name, change in [("+ RMSNorm", dict(norm="rms")),
                         ("+ SwiGLU (8C/3 hidden)", dict(activation="swiglu")),
                         ("+ RoPE", dict(positions="rope")),
                         ("+ QK-norm", dict(qk_norm=True)),
                         ("+ untied head", dict(tie_weights=False)),
                         ("+ zero-init projections", dict(zero_init=True)),
                         ("+ logit soft-cap 15", dict(logit_softcap=15.0)),
                         ("+ Muon (hidden matrices)", dict(optimizer="muon", muon_lr=0.05, weight_decay=0.0)),
                         ("+ warmup-stable-decay", dict(schedule="wsd", warmup=10))]:
        r = dataclasses.replace(rungs[-1], name=name, **change)
        rungs.append(r)
    relu2 = dataclasses.replace(rungs[2], name="  variant: ReLU^2 instead of SwiGLU", activation="relu2")
    return rungs + [relu2]


def at_rate(recipe, rate: float):
    """The recipe at peak rate `rate`: Muon's rate for a Muon recipe, else AdamW's (min_lr a tenth of it)."""
    if recipe.optimizer == "muon":
        return dataclasses.replace(recipe, muon_lr=rate)
    return dataclasses.replace(recipe, lr=rate, min_lr=rate / 10)


_DATA = {}


def _init(threads: int) -> None:
    torch.set_num_threads(threads)
    train, val, tok = char_corpus()
    _DATA.update(train=train, val=val, vocab=tok.vocab_size,
                 probe_idx=get_batch(val, 16, COURSE_CPU.context_len, torch.Generator().manual_seed(4321))[0])


def train_one(job):
    """One run to the target: (row, curve points, probe points)."""
    recipe, rate, seed, coarse, margin, eval_windows = job
    train, val, vocab = _DATA["train"], _DATA["val"], _DATA["vocab"]
    run = RecipeRun(recipe, vocab, train, seed=seed, on_nonfinite="stop")   # a NaN loss ends the run: diverged
    probe = Probe(run.model, _DATA["probe_idx"])
    cpu, v, curve, probes, diverged = 0.0, math.inf, [], [], False
    key = dict(rung=recipe.name, rate=rate, seed=seed)
    while not run.done:
        n = FINE if v <= TARGET + margin else PROBE_EVERY
        t0 = time.process_time()
        run.advance(n)
        cpu += time.process_time() - t0
        if run.step % PROBE_EVERY == 0 or run.done:
            s = probe(run.model)
            probes.append(dict(key, step=run.step, attn_logit_max=round(max(s["attn_logit_max"]), 3),
                               ffn_act_rms=round(max(s["ffn_act_rms"]), 4),
                               ffn_act_max=round(max(s["ffn_act_max"]), 3), update_rel=round(s["update_rel"], 5)))
        if run.step % coarse == 0 or v <= TARGET + margin or run.done:
            v = evaluate_lm(run.model, val, 64, recipe.context_len, max(1, eval_windows // 64))
            curve.append(dict(key, step=run.step, cpu_s=round(cpu, 2), val=round(v, 4)))
            if v <= TARGET:
                break
            if not math.isfinite(v) or (run.step >= 100 and v > math.log(vocab)):
                diverged = True
                break
    reached = v <= TARGET
    finite = [p for p in probes if math.isfinite(p["attn_logit_max"])]
    row = dict(key, params=count_params(run.model), reached=reached, steps=run.step, cpu_s=round(cpu, 2),
               last_val=round(v, 4) if math.isfinite(v) else "nan", diverged=diverged,
               attn_logit_max=max((p["attn_logit_max"] for p in finite), default="nan"),
               ffn_act_rms_max=max((p["ffn_act_rms"] for p in finite), default="nan"),
               update_rel_mean=round(statistics.fmean(p["update_rel"] for p in probes), 5) if probes else "")
    print(f"{recipe.name:36s} rate {rate:<6g} seed {seed}: "
          + (f"target at step {run.step:4d}" if reached else ("DIVERGED" if diverged else "not reached")
             + f" (step {run.step}, val {v:.4f})") + f" | {cpu:6.1f} CPU s", flush=True)
    return row, curve, probes


def step_costs(rungs, rounds: int = 6, chunk: int = 10):
    """Each rung's median CPU ms per step, measured in turns in this one process (one warm-up round first)."""
    runs = [RecipeRun(r, _DATA["vocab"], _DATA["train"], seed=0) for r in rungs]
    per = [[] for _ in runs]
    for rnd in range(rounds + 1):
        for run, times in zip(runs, per):
            t0 = time.process_time()
            run.advance(chunk)
            if rnd:
                times.append((time.process_time() - t0) / chunk)
    rows = []
    for r, times in zip(rungs, per):
        ms = 1e3 * statistics.median(times)
        rows.append(dict(rung=r.name, ms_per_step=round(ms, 2),
                         tokens_per_s=round(r.batch_size * r.context_len / (ms / 1e3))))
        print(f"cost {r.name:36s} {ms:6.1f} ms/step", flush=True)
    return rows


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS, eval_batches=EVAL_WINDOWS // 64)
    p.add_argument("--steps", type=int, default=600, help="every rung's schedule length")
    p.add_argument("--rates", type=float, nargs="+", default=list(RATES), help="AdamW rungs' peak rates")
    p.add_argument("--muon-rates", type=float, nargs="+", default=list(MUON_RATES), help="Muon rungs' rates")
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    p.add_argument("--coarse", type=int, default=60, help="steps between evaluations far from the target")
    p.add_argument("--margin", type=float, default=0.1, help="evaluate every 10 steps within this of the target")
    p.add_argument("--workers", type=int, default=2, help="processes (each with --threads torch threads)")
    p.add_argument("--bracket", action="store_true", help="add a rate beyond each edge optimum to the recorded ladder")
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.bracket:
        return bracket(args, argv, started)
    if args.quick:
        args.steps, args.coarse, args.eval_batches = 12, 4, 1
        args.rates, args.muon_rates, args.seeds, args.workers = args.rates[:1], args.muon_rates[:1], [1337], 1
    rungs = ladder(args.steps)
    if args.quick:
        rungs = [dataclasses.replace(r, warmup=min(r.warmup, 2)) for r in rungs]
    jobs = [(at_rate(r, rate), rate, seed, args.coarse, args.margin, args.eval_batches * 64)
            for r in rungs for rate in (args.muon_rates if r.optimizer == "muon" else args.rates)
            for seed in args.seeds]
    print(f"target val {TARGET} nats | {len(rungs)} rungs, {len(jobs)} runs | {args.steps} steps at most | "
          f"{args.workers} processes x {args.threads} torch threads", flush=True)
    if args.workers > 1:
        with mp.get_context("spawn").Pool(args.workers, _init, (args.threads,)) as pool:
            out = pool.map(train_one, jobs, chunksize=1)
    else:
        _init(args.threads)
        out = [train_one(j) for j in jobs]
    _init(args.threads)
    costs = step_costs(rungs, rounds=1, chunk=2) if args.quick else step_costs(rungs)
    rows = [o[0] for o in out]
    best = ladder_best(rows)
    mean_steps = {r: statistics.fmean(int(x["steps"]) for x in rows if x["rung"] == r and x["rate"] == b["rate"])
                  for r, b in best.items()}
    for r in rungs:
        b = best[r.name]
        print(f"{r.name:36s} best rate {b['rate']:<6g} reached {b['reached']}/{b['seeds']} "
              f"steps {b['steps']} last val {b['last_val']}", flush=True)
    if not args.quick:
        tables = {args.out.name: (FIELDS, rows),
                  "modern_ladder_curves.csv": (CURVE_FIELDS, [c for o in out for c in o[1]]),
                  "modern_ladder_probes.csv": (PROBE_FIELDS, [q for o in out for q in o[2]]),
                  "modern_ladder_cost.csv": (COST_FIELDS, costs)}
        record("modern_ladder", tables, None, args, args.seeds, started, __file__, argv,
               extra={"target": TARGET, "rates": args.rates, "muon_rates": args.muon_rates})
    print(f"rungs={len(rungs) - 1} runs={len(rows)} first_steps={mean_steps[rungs[0].name]:.1f} "
          f"last_steps={mean_steps[rungs[-2].name]:.1f}")


def bracket(args, argv, started) -> None:
    """--bracket: one more rate beyond the edge for every rung whose best recorded rate is an edge, appended."""

    from book.results import provenance, read_rows

    earlier = provenance("modern_ladder")
    for name in ("steps", "coarse", "margin", "seeds", "eval_batches", "threads"):
        setattr(args, name, earlier["args"][name])   # the recorded settings, whatever the command line says
    old = {f: read_rows(f) for f in ("modern_ladder", "modern_ladder_curves", "modern_ladder_probes",
                                     "modern_ladder_cost")}
    rungs = {r.name: r for r in ladder(args.steps)}
    jobs = []
    for name, b in ladder_best(old["modern_ladder"]).items():
        tried = sorted(b["by_rate"])
        if not b["edge"]:
            continue
        rate = tried[0] / 2 if b["rate"] == tried[0] else tried[-1] * 2
        jobs += [(at_rate(rungs[name], rate), rate, seed, args.coarse, args.margin, args.eval_batches * 64)
                 for seed in args.seeds]
    print(f"bracketing {len(jobs) // len(args.seeds)} rungs: "
          + ", ".join(f"{j[0].name} at {j[1]:g}" for j in jobs[::len(args.seeds)]), flush=True)
    if not jobs:
        return
    if args.quick:   # one tiny run of the first job: the harness, nothing written
        _init(args.threads)
        job = jobs[0]
        train_one((dataclasses.replace(job[0], steps=12, warmup=2), job[1], job[2], 4, job[4], 64))
        return
    with mp.get_context("spawn").Pool(args.workers, _init, (args.threads,)) as pool:
        out = pool.map(train_one, jobs, chunksize=1)
    rows = old["modern_ladder"] + [o[0] for o in out]
    tables = {"modern_ladder.csv": (FIELDS, rows),
              "modern_ladder_curves.csv": (CURVE_FIELDS, old["modern_ladder_curves"] + [c for o in out for c in o[1]]),
              "modern_ladder_probes.csv": (PROBE_FIELDS, old["modern_ladder_probes"] + [q for o in out for q in o[2]]),
              "modern_ladder_cost.csv": (COST_FIELDS, old["modern_ladder_cost"])}
    new_rates = {"rates": {j[1] for j in jobs if j[0].optimizer != "muon"},
                 "muon_rates": {j[1] for j in jobs if j[0].optimizer == "muon"}}
    record("modern_ladder", tables, None, args, args.seeds, started, __file__, argv,
           extra={"target": TARGET, **{k: sorted(set(earlier[k]) | v) for k, v in new_rates.items()},
                  "bracketed": [dict(rung=j[0].name, rate=j[1]) for j in jobs[::len(args.seeds)]],
                  "earlier": earlier})
    best = ladder_best(rows)
    for name, b in best.items():
        print(f"{name:36s} best rate {b['rate']:<6g} edge {b['edge']} reached {b['reached']}/{b['seeds']}")


if __name__ == "__main__":
    main()
