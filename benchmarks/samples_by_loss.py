#!/usr/bin/env python3
"""What a loss looks like: chapter 7's GPT, sampled as its validation loss falls. Chapter 7.

    python benchmarks/samples_by_loss.py            # the recorded run (about 55 minutes on 1 CPU thread)
    python benchmarks/samples_by_loss.py --quick    # a smoke test of the harness, no claims, writes nothing

One run of the book's GPT (`book.gpt.GPT` as chapter 7 builds it: learned positions, LayerNorm, GELU, AdamW with
warmup and cosine decay), wider and deeper than the chapter's 2 minutes allow: 4 layers of width 192, 6 heads,
context 128, batches of 32, 3,600 steps on one torch thread. It is evaluated on fixed validation windows, often
early (the loss falls fast) and less often later. At the first evaluation at or below each level of validation
bits per character (LEVELS: 3.0, 2.5, 2.2, 2.0) it writes SAMPLES characters after each of the PROMPTS, sampled at
temperature 1 (the distribution the loss measures) with a fixed generator per prompt; at the end it does the same
for the lowest evaluation of the run (its weights kept when it was measured), then measures that model on more
windows. A level the run never reaches is recorded as not reached.

Writes book/results/samples_by_loss.csv (one row per level and prompt: reached, step, training seconds, val
bits/char, the prompt, the sample), samples_by_loss_curve.csv (every evaluation) and the provenance
samples_by_loss.json (bench_common.record). Chapter 7 reads them (book.chapters.ch07.samples_by_loss).
"""
from __future__ import annotations

import copy
import math
import time

import torch

from bench_common import ROOT, char_corpus, parser, record
from book.generate import generate
from book.train import GPTRecipe, RecipeRun, evaluate_lm

LEVELS = (3.0, 2.5, 2.2, 2.0)          # validation bits per character
PROMPTS = ("ROMEO:\n", "First Citizen:\nWe", "The king ")
SAMPLES = 160                           # characters written after each prompt
RECIPE = GPTRecipe("chapter 7's GPT, 4 x 192", n_layers=4, d_model=192, n_heads=6, context_len=128, batch_size=32,
                   steps=3600, lr=3e-3, min_lr=3e-4, warmup=100, dropout=0.1)
EVAL_BATCH = 64
RESULTS = ROOT / "book" / "results" / "samples_by_loss.csv"
FIELDS = ["level", "reached", "step", "train_s", "val_bpc", "prompt", "sample"]
CURVE_FIELDS = ["step", "train_s", "val_bpc"]


def every(step: int) -> int:
    """Steps until the next evaluation: the loss falls fast at first."""
    return 10 if step < 200 else 50 if step < 1000 else 100


def write_samples(model, tok, seed: int) -> list:
    """SAMPLES characters after each prompt at temperature 1, one fixed generator per prompt."""
    out = []
    for i, prompt in enumerate(PROMPTS):
        idx = torch.tensor([tok.encode(prompt)])
        g = torch.Generator().manual_seed(seed + i)
        ids = generate(model, idx, SAMPLES, temperature=1.0, generator=g)[0, idx.shape[1]:].tolist()
        out.append((prompt, tok.decode(ids)))
    return out


def main(argv=None) -> None:
    args = parser(__doc__, RESULTS).parse_args(argv)
    started = time.perf_counter()
    torch.set_num_threads(args.threads)
    train, val, tok = char_corpus()
    recipe = RECIPE
    if args.quick:
        import dataclasses
        recipe = dataclasses.replace(RECIPE, steps=40, warmup=4, n_layers=1, d_model=48, n_heads=2)
        args.eval_batches = 1
    bpc = lambda model, n: evaluate_lm(model, val, EVAL_BATCH, recipe.context_len, n) / math.log(2)
    print(f"{recipe} -> {recipe.tokens:,} tokens | torch threads {torch.get_num_threads()}", flush=True)

    run = RecipeRun(recipe, tok.vocab_size, train, seed=args.seed)
    rows, curve, pending = [], [], list(LEVELS)
    best = (float("inf"), 0, 0.0, None)
    while True:
        v = bpc(run.model, args.eval_batches)
        curve.append(dict(step=run.step, train_s=round(run.train_s, 1), val_bpc=round(v, 4)))
        print(f"step {run.step:5d}  train {run.train_s:7.1f} s  val {v:.3f} bits/char", flush=True)
        if v < best[0]:
            best = (v, run.step, run.train_s, copy.deepcopy(run.model.state_dict()))
        while pending and v <= pending[0]:
            level = pending.pop(0)
            for prompt, text in write_samples(run.model, tok, args.seed):
                rows.append(dict(level=f"{level:.1f}", reached=True, step=run.step, train_s=round(run.train_s, 1),
                                 val_bpc=round(v, 4), prompt=prompt, sample=text))
            print(f"  level {level}: sampled at step {run.step}", flush=True)
        if run.done:
            break
        run.advance(every(run.step))
    for level in pending:
        rows.append(dict(level=f"{level:.1f}", reached=False, step="", train_s="", val_bpc="", prompt="", sample=""))
    v, step, secs, state = best
    run.model.load_state_dict(state)
    final = bpc(run.model, 4 * args.eval_batches)
    for prompt, text in write_samples(run.model, tok, args.seed):
        rows.append(dict(level="lowest", reached=True, step=step, train_s=round(secs, 1), val_bpc=round(final, 4),
                         prompt=prompt, sample=text))
    print(f"lowest: {final:.3f} bits/char at step {step} ({secs / 60:.1f} min of training; "
          f"{4 * args.eval_batches * EVAL_BATCH} windows)", flush=True)
    for r in rows:
        print(f"[{r['level']}] {r['prompt']!r}{r['sample']!r}"[:200])
    if not args.quick:
        record("samples_by_loss", {"samples_by_loss.csv": (FIELDS, rows),
                                   "samples_by_loss_curve.csv": (CURVE_FIELDS, curve)}, FIELDS, args, [args.seed],
               started, __file__, extra={"recipe": str(recipe), "train_s": round(run.train_s, 1)})


if __name__ == "__main__":
    main()
