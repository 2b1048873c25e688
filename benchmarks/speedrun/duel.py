#!/usr/bin/env python3
"""A duel: one speedrun entry against another, trained in turns in ONE process, seed by seed.

    python benchmarks/speedrun/duel.py cosine300-compiled nanogpt   # recorded (about 20 minutes of one thread)
    python benchmarks/speedrun/duel.py modern-compiled modern --quick   # a smoke test, writes nothing

The records table (rules.py) compares means that were recorded at different times, and a machine's speed drifts
between sessions and under load: nanoGPT's recipe took 44 CPU ms per step when record 0 was recorded and 38 ms in a
later side-by-side race. A duel removes that bias. For every seed, both entries train in this one process, taking
turns on the speedrun's evaluation schedule (run.py's next_stride: COARSE steps, FINE once near the target), each
with its own clock of process CPU seconds around its training steps (one torch thread). Whatever slows the machine
slows both. Compiling (recipe.compile) happens before the first step and is not timed, as in run.py.

The duel is judged by the speedrun's own rule (rules.accept) on the two entries' CPU seconds. Writes
book/results/speedrun_duel_<a>_vs_<b>.csv (seed, entry, reached, steps, cpu_s, last_val, resolution = steps since
the evaluation before) and its provenance .json
(bench_common.record). The last line reads
    duel=<a>_vs_<b> seeds=<n> a_cpu_s=<mean> b_cpu_s=<mean> ratio=<a/b> p=<Welch p> accepted=<True|False>
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))   # benchmarks/: bench_common
sys.path.insert(0, str(HERE))
import rules  # noqa: E402
from bench_common import char_corpus, record  # noqa: E402
from book.results import RESULTS_DIR  # noqa: E402
from book.train import RecipeRun, evaluate_lm  # noqa: E402
from entries import entry, result_name  # noqa: E402
from protocol import (COARSE, EVAL_BATCH, EVAL_BATCHES, FINE, FIRST_SEED, GRID_RULE, MARGIN, SEEDS, TARGET,  # noqa: E402
                      next_stride)

FIELDS = ["seed", "entry", "reached", "steps", "cpu_s", "last_val", "resolution"]


def duel_seed(recipes, slugs, data, seed: int, coarse: int, fine: int, eval_batches: int, log=print):
    """Both recipes trained with `seed` in turns until each reaches the target or its schedule's end; their rows."""
    train, val, vocab = data
    runs = [RecipeRun(r, vocab, train, seed=seed) for r in recipes]
    cpu, last, done = [0.0] * len(runs), [math.inf] * len(runs), [False] * len(runs)
    curves, gap = [[] for _ in runs], [0] * len(runs)
    while not all(done):
        for i, run in enumerate(runs):
            if done[i]:
                continue
            before = run.step
            t0 = time.process_time()
            run.advance(next_stride(curves[i], coarse, fine))
            cpu[i] += time.process_time() - t0
            last[i] = evaluate_lm(run.model, val, EVAL_BATCH, run.recipe.context_len, eval_batches)
            curves[i].append((run.step, last[i]))
            gap[i] = run.step - before
            done[i] = last[i] <= TARGET or run.done
            log(f"  seed {seed} {slugs[i]:20s} step {run.step:5d}  cpu {cpu[i]:7.2f} s  val {last[i]:.4f}")
    return [dict(seed=seed, entry=s, reached=v <= TARGET, steps=run.step, cpu_s=round(c, 2), last_val=round(v, 4),
                 resolution=g) for s, run, c, v, g in zip(slugs, runs, cpu, last, gap)]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", help="the challenger (an entry of entries.py)")
    p.add_argument("b", help="the entry it is measured against")
    p.add_argument("--seeds", type=int, default=SEEDS)
    p.add_argument("--quick", action="store_true", help="tiny runs to test the harness; writes nothing")
    args = p.parse_args(argv)
    started = time.perf_counter()
    torch.set_num_threads(1)
    a, b = entry(args.a), entry(args.b)
    recipes, coarse, fine, eval_batches = [a.recipe, b.recipe], COARSE, FINE, EVAL_BATCHES
    if args.quick:
        recipes = [dataclasses.replace(r, steps=min(r.steps, 8), warmup=min(r.warmup, 2), compile=False)
                   for r in recipes]
        coarse, fine, eval_batches = 4, 2, 1
    train, val, tok = char_corpus()
    rows = []
    for seed in range(FIRST_SEED, FIRST_SEED + args.seeds):
        got = duel_seed(recipes, [a.slug, b.slug], (train, val, tok.vocab_size), seed, coarse, fine, eval_batches,
                        log=lambda line: print(line, flush=True))
        rows += got
        print(" | ".join(f"{r['entry']}: {r['cpu_s']:.2f} CPU s, step {r['steps']}"
                         + ("" if r["reached"] else " (not reached)") for r in got), flush=True)
    cpu = {s: [r["cpu_s"] for r in rows if r["entry"] == s] for s in (a.slug, b.slug)}
    mean = {s: sum(v) / len(v) for s, v in cpu.items()}
    if len(cpu[b.slug]) >= rules.MIN_SEEDS:
        verdict = rules.accept(cpu[a.slug], cpu[b.slug])
        if verdict.accepted and not all(r["reached"] for r in rows if r["entry"] == a.slug):
            verdict = dataclasses.replace(verdict, accepted=False)
        p_value, accepted = verdict.p, verdict.accepted
    else:
        p_value, accepted = float("nan"), False
    name = f"speedrun_duel_{result_name(a.slug)[9:]}_vs_{result_name(b.slug)[9:]}"
    if not args.quick:
        args.out = RESULTS_DIR / f"{name}.csv"
        record(name, rows, FIELDS, args, list(range(FIRST_SEED, FIRST_SEED + args.seeds)), started, __file__, argv,
               extra={"a": a.slug, "b": b.slug, "recipes": [dataclasses.asdict(r) for r in recipes],
                      "target": TARGET, "eval_windows": eval_batches * EVAL_BATCH, "coarse": coarse, "fine": fine,
                      "margin": MARGIN, "grid_rule": GRID_RULE, "p": p_value, "accepted": accepted})
    print(f"duel={a.slug}_vs_{b.slug} seeds={args.seeds} a_cpu_s={mean[a.slug]:.2f} b_cpu_s={mean[b.slug]:.2f} "
          f"ratio={mean[a.slug] / mean[b.slug]:.3f} p={p_value:.2g} accepted={accepted}")


if __name__ == "__main__":
    main()
