#!/usr/bin/env python3
"""Chapter 7's four recipe changes, one at a time: steps and time to the target, 3 seeds each. Chapter 7.

    python benchmarks/course_ladder.py          # recorded (about 25 minutes of one idle thread)
    python benchmarks/course_ladder.py --quick  # a smoke test of the harness, writes nothing

The course recipe (book.train.COURSE_CPU) changes four of nanoGPT's CPU settings (book.train.NANOGPT_CPU). This
ladder adds them one at a time (gpt_time_to_loss.ladder_recipes): nanoGPT's recipe -> + peak rate 8e-3 with 30
warmup steps -> + 2 layers instead of 4 -> + batches of 32 windows instead of 12 (the same tokens: 750 steps) ->
+ a 600-step schedule (= the course recipe). Every rung trains 3 seeds (1337-1339) with the course speedrun's
training and evaluation (benchmarks/speedrun/run.py, train_to_target: the same fixed validation windows, stop at the
first evaluation at or below the target) but on a coarser grid: every EVERY steps, never finer, so a run's steps are
exact to EVERY (the speedrun's fine grid would evaluate some of these runs a hundred times). The two ends are the
speedrun's entries `nanogpt` and `course`. The course recipe is trained again here on this grid; nanoGPT's recipe is
read from the speedrun's recorded seeds when none of them reached the target (then its steps and its last loss,
all 2,000 steps evaluated at the end, are the same on any grid), and trained here otherwise.

Time is measured apart from the runs, as chapter 10's ladder does: every rung trains 10 steps at a time in turns in
ONE process (one thread), six rounds after a warm-up round, so load hits every rung alike; a rung's cost is its
median CPU ms per step, and its time to the target is its steps times that cost (a run that never reaches the
target counts all its steps).

Writes book/results/course_ladder.csv (rung, seed, reached, steps, last_val), course_ladder_cost.csv (rung,
ms_per_step) and their provenance course_ladder.json. The last line reads
    <rung>=<mean steps>@<ms per step> ... for each rung, in order
"""
from __future__ import annotations

import dataclasses
import sys
import time

import torch

from bench_common import ROOT, char_corpus, parser, record

sys.path.insert(0, str(ROOT / "benchmarks" / "speedrun"))
from gpt_time_to_loss import ladder_recipes  # noqa: E402
from modern_ladder import _init, step_costs  # noqa: E402
from protocol import EVAL_BATCHES, SEEDS  # noqa: E402
from run import train_to_target  # noqa: E402

RESULTS = ROOT / "book" / "results" / "course_ladder.csv"
FIELDS = ["rung", "seed", "reached", "steps", "last_val"]
EVERY = 50                             # steps between evaluations: a run's steps are exact to this


def _never_reached_record(recipe, seeds):
    """Rows for `recipe` from the speedrun's recorded entry `nanogpt` when it is the same recipe with the same seeds
    and none of them reached the target (their steps and last losses are then independent of the grid); else None."""
    from book.results import read_rows
    from entries import entry, result_name

    if dataclasses.replace(entry("nanogpt").recipe, name="") != dataclasses.replace(recipe, name=""):
        return None
    rec = read_rows(result_name("nanogpt"))
    if [int(r["seed"]) for r in rec] != list(seeds) or any(r["reached"] == "True" for r in rec):
        return None
    return [dict(rung=recipe.name, seed=int(r["seed"]), reached=False, steps=int(r["steps"]), last_val=r["last_val"])
            for r in rec]


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    args = p.parse_args(argv)
    started = time.perf_counter()
    torch.set_num_threads(args.threads)
    train, val, tok = char_corpus()
    recipes = ladder_recipes()
    seeds = [args.seed + i for i in range(SEEDS)]
    if args.quick:
        recipes = [dataclasses.replace(r, steps=12, warmup=min(r.warmup, 2)) for r in recipes]
        seeds = seeds[:1]
    rows = []
    for i, recipe in enumerate(recipes):
        reused = _never_reached_record(recipe, seeds) if i == 0 and not args.quick else None
        if reused:
            rows += reused
            print(f"{recipe.name:32s} read from the speedrun's entry nanogpt: never reached in {len(reused)} seeds")
            continue
        for seed in seeds:
            grid = (4, 4, 1) if args.quick else (EVERY, EVERY, EVAL_BATCHES)
            row, _ = train_to_target(recipe, (train, val, tok.vocab_size), seed, *grid, log=lambda line: None)
            rows.append(dict(rung=recipe.name, seed=seed, reached=row["reached"], steps=row["steps"],
                             last_val=row["last_val"]))
            print(f"{recipe.name:32s} seed {seed}: {'target at step' if row['reached'] else 'not reached, step'} "
                  f"{row['steps']}, val {row['last_val']:.4f}", flush=True)
    _init(args.threads)
    costs = step_costs(recipes, rounds=1, chunk=2) if args.quick else step_costs(recipes)
    cost = {c["rung"]: c["ms_per_step"] for c in costs}
    if not args.quick:
        record("course_ladder", {args.out.name: (FIELDS, rows),
                                 "course_ladder_cost.csv": (["rung", "ms_per_step"],
                                                            [dict(rung=k, ms_per_step=v) for k, v in cost.items()])},
               None, args, seeds, started, __file__, argv,
               extra={"recipes": [dataclasses.asdict(r) for r in recipes], "every": EVERY,
                      "eval_windows": 64 * EVAL_BATCHES})
    means = {r.name: sum(x["steps"] for x in rows if x["rung"] == r.name) / max(1, sum(x["rung"] == r.name
                                                                                        for x in rows))
             for r in recipes}
    print(" ".join(f"{name.replace(' ', '_')}={m:.0f}@{cost[name]:.1f}" for name, m in means.items()))


if __name__ == "__main__":
    main()
