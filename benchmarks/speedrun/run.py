#!/usr/bin/env python3
"""The course speedrun: train one entry with several seeds to validation loss 1.8857 nats, on one CPU thread.

    python benchmarks/speedrun/run.py modern            # an entry by name (entries.py), 3 seeds, recorded
    python benchmarks/speedrun/run.py --record 2        # the entry that is record 2 on the time track
    python benchmarks/speedrun/run.py --record current  # the standing record (CI runs it with --quick)
    python benchmarks/speedrun/run.py --list            # the entries and whether each is recorded
    python benchmarks/speedrun/run.py modern --quick    # a smoke test of the harness: tiny runs, writes nothing

Every seed trains the entry's recipe with book.train.RecipeRun (the book's one training loop, book.optim.fit) on
the book's corpus, split and tokenizer, and is evaluated (untimed) on the same EVAL_BATCHES x 64 fixed validation
windows every COARSE steps, and every FINE steps once the next COARSE steps could reach the target (`next_stride`:
the loss is within MARGIN nats of it, or the last stride's drop, scaled to COARSE steps, is at least its distance
to it; once on the fine grid, a run stays there); it stops at the first evaluation at or below the target, or at
the end of its schedule (then its whole time and all its steps count). Two measures per seed: CPU seconds of the
training steps (time.process_time around them, one torch thread: the process's own CPU time, which leaves out the
time other processes hold the core, though not their pressure on caches and memory), and steps.
Wall seconds (fit's perf_counter) are kept beside them.

Writes book/results/speedrun_<entry>.csv (one row per seed: seed, reached, steps, cpu_s, wall_s, tokens,
last_val, resolution = steps since the evaluation before, evals), speedrun_<entry>_curves.csv (every evaluation)
and the provenance speedrun_<entry>.json with the recipe (bench_common.record). Then regenerate the records
table with `python benchmarks/speedrun/rules.py`. The last line reads
    entry=<slug> seeds=<n> reached=<k> cpu_s_mean=<...> cpu_s_sd=<...> steps_mean=<...>
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
from bench_common import char_corpus, record  # noqa: E402
from book.results import RESULTS_DIR  # noqa: E402
from book.train import RecipeRun, evaluate_lm  # noqa: E402
from entries import ENTRIES, entry, result_name  # noqa: E402
from protocol import (COARSE, EVAL_BATCH, EVAL_BATCHES, FINE, FIRST_SEED, GRID_RULE, MARGIN, SEEDS, TARGET,  # noqa: E402,F401
                      next_stride)

FIELDS = ["seed", "reached", "steps", "cpu_s", "wall_s", "tokens", "last_val", "resolution", "evals"]


def train_to_target(recipe, data, seed: int, coarse: int = COARSE, fine: int = FINE, eval_batches: int = EVAL_BATCHES,
                    log=print):
    """Train one seed of `recipe` until the target or the schedule's end; (row, curve [(step, cpu_s, val)])."""
    train, val, vocab = data
    run = RecipeRun(recipe, vocab, train, seed=seed)
    cpu, curve, v, evals = 0.0, [], math.inf, 0
    while not run.done:
        before = run.step
        t0 = time.process_time()
        run.advance(next_stride([(s, x) for s, _, x in curve], coarse, fine))
        cpu += time.process_time() - t0
        v = evaluate_lm(run.model, val, EVAL_BATCH, recipe.context_len, eval_batches)
        evals += 1
        curve.append((run.step, round(cpu, 3), v))
        log(f"  seed {seed} step {run.step:5d}  cpu {cpu:7.2f} s  wall {run.train_s:7.2f} s  val {v:.4f}")
        if v <= TARGET:
            break
    reached = v <= TARGET
    row = dict(seed=seed, reached=reached, steps=run.step, cpu_s=round(cpu, 2), wall_s=round(run.train_s, 2),
               tokens=run.step * recipe.batch_size * recipe.context_len, last_val=round(v, 4),
               resolution=run.step - before, evals=evals)
    return row, [(s, c, round(x, 4)) for s, c, x in curve]


def _record_entry(which: str):
    """The entry that is record `which` ("current" or a number) on the time track, from the recorded results."""
    import rules

    walk = rules.judge([r for e in ENTRIES if (r := rules.load_result(e)) is not None], "time")
    records = [r.entry for r, v, n, _ in walk if n is not None]
    if not records:
        raise SystemExit("no record is recorded yet: run an entry by name first")
    if which == "current":
        return records[-1]
    if not which.isdigit() or int(which) >= len(records):
        raise SystemExit(f"--record must be 'current' or 0..{len(records) - 1}, got {which!r}")
    return records[int(which)]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("entry", nargs="?", help="the entry's name (see --list)")
    p.add_argument("--record", help="run the entry that is record N (or 'current') on the time track")
    p.add_argument("--seeds", type=int, default=SEEDS, help="how many seeds (1337, 1338, ...)")
    p.add_argument("--list", action="store_true", help="list the entries and stop")
    p.add_argument("--quick", action="store_true", help="tiny runs to test the harness; writes nothing")
    args = p.parse_args(argv)
    if args.list:
        for e in ENTRIES:
            done = (RESULTS_DIR / f"{result_name(e.slug)}.csv").is_file()
            print(f"{e.slug:24s} {'recorded' if done else 'not run '}  {e.change}")
        return
    if (args.entry is None) == (args.record is None):
        p.error("name one entry, or --record N|current")
    if args.seeds < (1 if args.quick else SEEDS):
        p.error(f"--seeds must be at least {SEEDS} for a recorded run")
    e = entry(args.entry) if args.entry else _record_entry(args.record)
    started = time.perf_counter()
    torch.set_num_threads(1)
    train, val, tok = char_corpus()
    recipe, coarse, fine, eval_batches = e.recipe, COARSE, FINE, EVAL_BATCHES
    if args.quick:
        recipe = dataclasses.replace(recipe, steps=min(recipe.steps, 12), warmup=min(recipe.warmup, 2))
        coarse, fine, eval_batches = 4, 2, 1
    seeds = [FIRST_SEED + i for i in range(args.seeds)]
    print(f"speedrun entry {e.slug}: {e.change}\n{recipe}\ntarget val {TARGET} nats | torch threads "
          f"{torch.get_num_threads()} | {eval_batches * EVAL_BATCH} fixed validation windows | seeds {seeds}",
          flush=True)
    rows, points = [], []
    for seed in seeds:
        row, curve = train_to_target(recipe, (train, val, tok.vocab_size), seed, coarse, fine, eval_batches,
                                     log=lambda line: print(line, flush=True))
        rows.append(row)
        points += [dict(seed=seed, step=s, cpu_s=c, val=v) for s, c, v in curve]
        print(f"seed {seed}: {'reached' if row['reached'] else 'NOT reached (whole run counts)'} at step "
              f"{row['steps']}, {row['cpu_s']:.2f} CPU s ({row['wall_s']:.2f} s wall), val {row['last_val']:.4f}",
              flush=True)
    cpu = [r["cpu_s"] for r in rows]
    mean = sum(cpu) / len(cpu)
    sd = math.sqrt(sum((c - mean) ** 2 for c in cpu) / (len(cpu) - 1)) if len(cpu) > 1 else 0.0
    if not args.quick:
        name = result_name(e.slug)
        args.out = RESULTS_DIR / f"{name}.csv"
        tables = {f"{name}.csv": (FIELDS, rows), f"{name}_curves.csv": (["seed", "step", "cpu_s", "val"], points)}
        record(name, tables, None, args, seeds, started, __file__, argv,
               extra={"entry": e.slug, "change": e.change, "recipe": dataclasses.asdict(recipe), "target": TARGET,
                      "eval_windows": EVAL_BATCHES * EVAL_BATCH, "coarse": COARSE, "fine": FINE, "margin": MARGIN,
                             "grid_rule": GRID_RULE})
    print(f"entry={e.slug} seeds={len(rows)} reached={sum(r['reached'] for r in rows)} cpu_s_mean={mean:.2f} "
          f"cpu_s_sd={sd:.2f} steps_mean={sum(r['steps'] for r in rows) / len(rows):.1f}")


if __name__ == "__main__":
    main()
