#!/usr/bin/env python3
"""Time to a validation loss: nanoGPT's CPU recipe against the course and modern recipes, side by side. Chapters 7, 10.

    python benchmarks/gpt_time_to_loss.py              # the benchmark (a few minutes on 2 CPU cores)
    python benchmarks/gpt_time_to_loss.py --ladder     # also each course change on its own (slow)
    python benchmarks/gpt_time_to_loss.py --quick      # a smoke test of the harness, no claims

Both runs train the same `book.gpt.GPT` code in one process; only the recipe differs
(book.train.NANOGPT_CPU and COURSE_CPU). Their steps are interleaved in short chunks, so both see
the same machine load, and the clock runs only during training steps: evaluation is excluded.
Every chunk ends with the validation loss on the same fixed windows (nanoGPT's estimate_loss
draws new random windows each time, which is noisier); the run's time at the first evaluation at
or below the target is its time to the target. If the baseline never gets there, its whole
training time is used (which favours the baseline). The last line reads
    ratio=<course/baseline> course_s=<...> baseline_s=<...> baseline_final_val=<...> modern_ratio=<...> modern_s=<...>
    modern_eager_ratio=<...> modern_eager_s=<...> compile_s=<...>
(modern: Chapter 10's recipe, book.train.MODERN_CPU, trained through torch.compile as the course speedrun's record
is; modern_eager: the same recipe without compiling; both in the same interleaved race. compile_s: the wall seconds
of compiling it, before its first step and not counted in modern_s, as in the speedrun. nanoGPT's recipe runs as its
README's CPU command does, without compiling.)
On a CUDA machine it also times nanoGPT's GPU recipe to val 1.47 (printed before the last line).
Without --quick it records one row per run (race, recipe, steps, step and seconds to the target, final val,
tokens/s) in book/results/gpt_time_to_loss.csv, everything it printed in gpt_time_to_loss.txt (chapters 7 and 10
parse it), and their provenance in gpt_time_to_loss.json (bench_common.record).
Both CPU runs use `--threads` torch threads (default 1: on a shared machine more threads than free
cores slows every run down many times over). The corpus is found as in book.data (BOOK_DATA_DIR).
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import torch

from bench_common import ROOT, char_corpus, record
from book.train import (COURSE_CPU, MODERN_CPU, NANOGPT_CPU, NANOGPT_CPU_FINAL_VAL, NANOGPT_GPU, evaluate_lm, race,
                        time_to)

TARGET = NANOGPT_CPU_FINAL_VAL  # nanoGPT's CPU recipe after 2000 steps, nats
GPU_TARGET = 1.47  # nanoGPT's GPU recipe (A100, about 3 minutes)
EVAL_BATCH = 64
RESULTS = ROOT / "book" / "results" / "gpt_time_to_loss.csv"
FIELDS = ["race", "recipe", "steps", "step_to_target", "seconds_to_target", "final_val", "tokens_per_s"]


PRINTED = []   # every line printed, for gpt_time_to_loss.txt


def log(line: str = "") -> None:
    print(line, flush=True)
    PRINTED.extend(str(line).splitlines() or [""])


def run_race(recipes, data, args, stop=(), device=None, target=TARGET):
    """Interleaved race of the recipes (book.train.race), each evaluated 40 times over its schedule."""
    train, val, vocab = data
    every = [max(1, r.steps // 40) for r in recipes]
    return race(recipes, vocab, train, val, target, every=every, eval_windows=args.eval_batches * EVAL_BATCH,
                stop_at_target=stop, seed=args.seed, device=device, log=log)


def final_val(run, val, n_batches: int) -> float:
    return evaluate_lm(run.model, val, EVAL_BATCH, run.recipe.context_len, n_batches, device=run.device)


def ladder_recipes():
    """The course recipe built up from the baseline one change at a time."""
    c, b = COURSE_CPU, NANOGPT_CPU
    lr = dataclasses.replace(b, name="+ lr 8e-3, warmup 30", lr=c.lr, min_lr=c.min_lr, warmup=c.warmup)
    depth = dataclasses.replace(lr, name="+ 2 layers", n_layers=c.n_layers)
    batch = dataclasses.replace(depth, name="+ batch 32, same tokens", batch_size=c.batch_size,
                                steps=b.steps * b.batch_size // c.batch_size)
    return [b, lr, depth, batch, dataclasses.replace(c, name="+ 600-step schedule (= course)")]


def report(runs, curves, finals, args, rows: list, race_name: str) -> list:
    """Print each run's time to the target and append its row to `rows`; return those times (whole run if never
    reached)."""
    times = []
    for run, curve, final in zip(runs, curves, finals):
        hit = time_to(curve, TARGET)
        secs = hit[0] if hit else run.train_s
        reached = f"at step {hit[1]}" if hit else "NOT reached: its whole training time is counted"
        log(f"{run.recipe.name}: time to val {TARGET}: {secs:.2f} s ({reached}); "
              f"final val {final:.4f} after {run.step} steps ({args.final_batches * EVAL_BATCH} windows); "
              f"{run.step * run.recipe.batch_size * run.recipe.context_len / run.train_s:,.0f} tokens/s")
        times.append(secs)
        rows.append(dict(race=race_name, recipe=run.recipe.name, steps=run.step, step_to_target=hit[1] if hit else "",
                         seconds_to_target=round(hit[0], 2) if hit else "", final_val=round(final, 4),
                         tokens_per_s=round(run.step * run.recipe.batch_size * run.recipe.context_len / run.train_s)))
    return times


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1, help="torch threads for every run (1: robust when shared)")
    p.add_argument("--eval-batches", type=int, default=16, help="validation windows / 64 per evaluation")
    p.add_argument("--final-batches", type=int, default=40, help="validation windows / 64 for final losses")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--ladder", action="store_true", help="also race each course change on its own")
    p.add_argument("--out", type=Path, default=RESULTS, help="the results table (CSV) to write")
    p.add_argument("--quick", action="store_true", help="tiny runs to test the harness; writes nothing")
    args = p.parse_args(argv)
    started = time.perf_counter()
    torch.set_num_threads(args.threads)
    train, val, tok = char_corpus()
    data = (train, val, tok.vocab_size)

    modern = dataclasses.replace(MODERN_CPU, name="modern recipe, compiled", compile=True)
    base, course, eager = NANOGPT_CPU, COURSE_CPU, MODERN_CPU
    if args.quick:   # tiny runs, and no compiling (tests/test_modern.py tests a compiled RecipeRun)
        base, course, modern, eager = (dataclasses.replace(r, steps=r.steps // 40, warmup=r.warmup // 40,
                                                           compile=False) for r in (base, course, modern, eager))
        args.eval_batches = args.final_batches = 2
    log(f"target val {TARGET} nats | torch threads {torch.get_num_threads()} | "
        f"{args.eval_batches * EVAL_BATCH} fixed validation windows per evaluation")
    for r in (base, course, modern, eager):
        log(f"{r}  -> {r.tokens:,} tokens")
    recipes = [base, course, modern, eager]
    runs, curves = run_race(recipes, data, args, stop=tuple(r.name for r in recipes[1:]))
    log(f"{modern.name}: compiled in {runs[2].compile_s:.1f} s of wall time before its first step (not counted)")
    finals = [final_val(run, data[1], args.final_batches) for run in runs]
    rows = []
    base_s, course_s, modern_s, eager_s = report(runs, curves, finals, args, rows, "cpu")

    if args.ladder:
        log("ladder: the course's changes added one at a time, raced together")
        recipes = ladder_recipes()
        lruns, lcurves = run_race(recipes, data, args, stop=tuple(r.name for r in recipes[1:]))
        report(lruns, lcurves, [final_val(r, data[1], args.final_batches) for r in lruns], args, rows, "ladder")

    if torch.cuda.is_available() and not args.quick:
        (run,), (curve,) = run_race([NANOGPT_GPU], data, args, stop=(NANOGPT_GPU.name,),
                                    device=torch.device("cuda"), target=GPU_TARGET)
        hit = time_to(curve, GPU_TARGET)
        rows.append(dict(race=f"gpu (target {GPU_TARGET})", recipe=NANOGPT_GPU.name, steps=run.step,
                         step_to_target=hit[1] if hit else "", seconds_to_target=round(hit[0], 2) if hit else "",
                         final_val=round(curve[-1][2], 4),
                         tokens_per_s=round(run.step * NANOGPT_GPU.batch_size * NANOGPT_GPU.context_len / run.train_s)))
        log(f"GPU {torch.cuda.get_device_name()}: {NANOGPT_GPU.name}: time to val {GPU_TARGET}: "
              f"{hit[0] if hit else float('nan'):.1f} s (step {hit[1] if hit else '-'}), last val {curve[-1][2]:.4f}")

    log(f"ratio={course_s / base_s:.3f} course_s={course_s:.2f} baseline_s={base_s:.2f} "
        f"baseline_final_val={finals[0]:.4f} modern_ratio={modern_s / base_s:.3f} modern_s={modern_s:.2f} "
        f"modern_eager_ratio={eager_s / base_s:.3f} modern_eager_s={eager_s:.2f} compile_s={runs[2].compile_s:.1f}")
    if not args.quick:
        record("gpt_time_to_loss", rows, FIELDS, args, [args.seed], started, __file__, argv,
               texts={"gpt_time_to_loss.txt": "\n".join(PRINTED) + "\n"})


if __name__ == "__main__":
    main()
