#!/usr/bin/env python3
"""From chapter 7's recipe to a modern one, one change at a time, raced side by side. Chapter 10.

    python benchmarks/modern_ladder.py            # the ladder (about 10 minutes on 2 CPU cores)
    python benchmarks/modern_ladder.py --quick    # a smoke test of the harness, no claims

Every rung is the rung before plus one change (book.train.GPTRecipe options): RMSNorm, SwiGLU at equal
parameters, RoPE, QK-norm, an untied output head, zero-initialised output projections, soft-capped logits,
Muon for the hidden matrices, and the warmup-stable-decay schedule. (No biases is not a rung: chapter 7's
recipe, like nanoGPT's, already has none.) ReLU^2 runs beside SwiGLU as a variant. All rungs train in one
process, a few steps each in turn (book.train.race), so they share the machine's load; the clock runs only
during training steps, and every evaluation uses the same fixed validation windows. A rung stops once it
reaches the target, nanoGPT's final validation loss (book.train.NANOGPT_CPU_FINAL_VAL).

Writes book/results/modern_ladder.csv, one row per rung: name, parameters, steps, seconds and tokens to the
target (empty if not reached), tokens per second, and the last validation loss; and modern_ladder_curves.csv beside
it, every evaluation of every rung (rung, step, seconds, val); and their provenance, modern_ladder.json
(bench_common.record). The last line reads
    rungs=<n> first_s=<course recipe's seconds> last_s=<modern recipe's seconds> last_ratio=<last/first>
"""
from __future__ import annotations

import dataclasses
import time

import torch

from bench_common import ROOT, char_corpus, parser, record
from book.gpt import GPT
from book.train import COURSE_CPU, NANOGPT_CPU_FINAL_VAL, race, time_to
from book.utils import count_params

RESULTS = ROOT / "book" / "results" / "modern_ladder.csv"
CURVES_NAME = "modern_ladder_curves.csv"   # beside the results: every evaluation of every rung, for the chapter's plot
FIELDS = ["rung", "params", "steps_to_target", "seconds_to_target", "tokens_to_target", "tokens_per_s", "last_val"]


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


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--steps", type=int, default=600, help="every rung's schedule length")
    p.add_argument("--every", type=int, default=20, help="steps per turn, then an evaluation")
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.quick:
        args.steps, args.every, args.eval_batches = 4, 2, 1
    torch.set_num_threads(args.threads)

    train, val, tok = char_corpus()
    rungs = ladder(args.steps)
    target = NANOGPT_CPU_FINAL_VAL
    print(f"target val {target} nats | {len(rungs)} runs | {args.steps} steps each at most | "
          f"torch threads {torch.get_num_threads()}", flush=True)
    runs, curves = race(rungs, tok.vocab_size, train, val, target, every=[args.every] * len(rungs),
                        eval_windows=args.eval_batches * 64, stop_at_target=[r.name for r in rungs],
                        seed=args.seed, log=lambda line: print(line, flush=True))
    rows = []
    for run, curve in zip(runs, curves):
        r = run.recipe
        hit = time_to(curve, target)
        tokens_per_step = r.batch_size * r.context_len
        rows.append(dict(rung=r.name, params=count_params(GPT(r.config(tok.vocab_size))),
                         steps_to_target=hit[1] if hit else "", seconds_to_target=round(hit[0], 2) if hit else "",
                         tokens_to_target=hit[1] * tokens_per_step if hit else "",
                         tokens_per_s=round(run.step * tokens_per_step / run.train_s),
                         last_val=round(curve[-1][2], 4)))
        print(f"{r.name:38s} | params {rows[-1]['params']:8,} | to target: "
              + (f"step {hit[1]:4d}, {hit[0]:6.1f} s" if hit else "not reached") +
              f" | {rows[-1]['tokens_per_s']:7,} tokens/s | last val {rows[-1]['last_val']:.4f}", flush=True)
    if not args.quick:
        points = [dict(rung=run.recipe.name, step=step, seconds=round(secs, 2), val=round(v, 4))
                  for run, curve in zip(runs, curves) for step, secs, v in curve]
        tables = {args.out.name: (FIELDS, rows), CURVES_NAME: (["rung", "step", "seconds", "val"], points)}
        record("modern_ladder", tables, None, args, [args.seed], started, __file__, argv)
    first = rows[0]["seconds_to_target"] or runs[0].train_s
    last = rows[len(rungs) - 2]["seconds_to_target"] or runs[len(rungs) - 2].train_s   # the full modern rung
    print(f"rungs={len(rungs) - 1} first_s={float(first):.2f} last_s={float(last):.2f} "
          f"last_ratio={float(last) / float(first):.3f}")


if __name__ == "__main__":
    main()
