#!/usr/bin/env python3
"""The speedrun's throughput rungs: the modern recipe's step at other batch shapes, threads, and through torch.compile.

    python benchmarks/speedrun/throughput.py          # the measurement (about 3 minutes on an IDLE 2-core CPU)
    python benchmarks/speedrun/throughput.py --quick  # a smoke test of the harness, writes nothing

A change that only makes steps cheaper does not change what a step learns, so its effect on the time to the target
is its effect on the cost of a step (the number of steps stays the same, as long as the batch does). This measures
that cost for chapter 10's modern recipe (the speedrun's record 2, entries.MODERN_CH10) in every configuration of:
  - batch: 16, 32 (the recipe's) and 64 windows of 64 characters, eager, 1 thread;
  - threads: 1 and 2 torch threads, eager and compiled, batch 32;
  - torch.compile: the model compiled (book.train.RecipeRun with recipe.compile; compiled and warmed up before the
    first step, its wall seconds kept apart).
Every configuration is a RecipeRun in this one process; they take turns, 10 steps each, for ROUNDS rounds after one
warm-up round, each setting its thread count before its turn, so a busy spell of the machine falls on all of them
alike. A configuration's cost is the median over the rounds of wall ms per step (perf_counter: with 2 threads, the
CPU time would double count), and its CPU ms per step beside it (time.process_time). Timings mean something only on
an otherwise idle machine with 2 free cores.

Writes book/results/speedrun_throughput.csv (config, batch, threads, compiled, ms_per_step, cpu_ms_per_step,
tokens_per_s, compile_s) and its provenance speedrun_throughput.json (bench_common.record). The last line reads
    eager_1t_ms=<...> compiled_1t_ms=<...> compiled_speedup=<eager/compiled, 1 thread> threads_speedup=<1t/2t, eager>
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))   # benchmarks/: bench_common
sys.path.insert(0, str(HERE))
from bench_common import char_corpus, record  # noqa: E402
from book.results import RESULTS_DIR  # noqa: E402
from book.train import RecipeRun  # noqa: E402
from entries import MODERN_CH10  # noqa: E402

ROUNDS, CHUNK = 6, 10
FIELDS = ["config", "batch", "threads", "compiled", "ms_per_step", "cpu_ms_per_step", "tokens_per_s", "compile_s"]
CONFIGS = [  # (batch, threads, compiled)
    (16, 1, False), (32, 1, False), (64, 1, False), (32, 2, False), (32, 1, True), (32, 2, True)]


def label(batch: int, threads: int, compiled: bool) -> str:
    return f"batch {batch}, {threads} thread{'s' if threads > 1 else ''}, {'compiled' if compiled else 'eager'}"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=ROUNDS)
    p.add_argument("--quick", action="store_true", help="one round of 2-step turns, no compiling; writes nothing")
    args = p.parse_args(argv)
    started = time.perf_counter()
    train, _, tok = char_corpus()
    configs, chunk = CONFIGS, CHUNK
    if args.quick:
        configs, chunk, args.rounds = [c for c in CONFIGS if not c[2]], 2, 1
    runs = []
    for batch, threads, compiled in configs:
        torch.set_num_threads(threads)        # compiled kernels are generated for the thread count at hand
        recipe = dataclasses.replace(MODERN_CH10, batch_size=batch, compile=compiled, steps=10_000)
        runs.append(RecipeRun(recipe, tok.vocab_size, train, seed=0))
        print(f"{label(batch, threads, compiled)}: built" + (f", compiled in {runs[-1].compile_s:.1f} s"
                                                             if compiled else ""), flush=True)
    wall, cpu = [[] for _ in runs], [[] for _ in runs]
    for rnd in range(args.rounds + 1):
        for run, (_, threads, _), w, c in zip(runs, configs, wall, cpu):
            torch.set_num_threads(threads)
            t0, c0 = time.perf_counter(), time.process_time()
            run.advance(chunk)
            if rnd:                                      # round 0 warms every configuration up
                w.append((time.perf_counter() - t0) / chunk)
                c.append((time.process_time() - c0) / chunk)
    rows = []
    for run, (batch, threads, compiled), w, c in zip(runs, configs, wall, cpu):
        ms, cms = 1e3 * statistics.median(w), 1e3 * statistics.median(c)
        rows.append(dict(config=label(batch, threads, compiled), batch=batch, threads=threads, compiled=compiled,
                         ms_per_step=round(ms, 2), cpu_ms_per_step=round(cms, 2),
                         tokens_per_s=round(batch * run.recipe.context_len / (ms / 1e3)),
                         compile_s=round(run.compile_s, 1)))
        print(f"{rows[-1]['config']:34s} {ms:7.1f} ms/step wall, {cms:7.1f} CPU ms/step, "
              f"{rows[-1]['tokens_per_s']:7,} tokens/s", flush=True)
    at = {(r["batch"], r["threads"], r["compiled"]): r["ms_per_step"] for r in rows}
    if not args.quick:
        record("speedrun_throughput", rows, FIELDS, argparse.Namespace(out=RESULTS_DIR / "speedrun_throughput.csv",
                                                                       **vars(args)),
               [0], started, __file__, argv, extra={"recipe": dataclasses.asdict(MODERN_CH10), "chunk": chunk})
    eager, compiled, two = at[(32, 1, False)], at.get((32, 1, True), float("nan")), at[(32, 2, False)]
    print(f"eager_1t_ms={eager:.2f} compiled_1t_ms={compiled:.2f} compiled_speedup={eager / compiled:.3f} "
          f"threads_speedup={eager / two:.3f}")


if __name__ == "__main__":
    main()
