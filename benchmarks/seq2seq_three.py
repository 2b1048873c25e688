#!/usr/bin/env python3
"""The three translators of Chapters 2, 3 and 8 at equal steps (= equal data), several seeds. Chapter 8.

    python benchmarks/seq2seq_three.py            # the comparison (about 10 minutes on one idle CPU thread)
    python benchmarks/seq2seq_three.py --quick    # a smoke test of the harness, no claims

Chapter 8 trains its Transformer for 1,200 steps and puts it beside the two RNN encoder-decoders that Chapter 3
trained for 500: 2.4 times the sentences, one seed each, and both attention models end near 1.0 exact match. This
benchmark gives every model the same budget, at budgets small enough that the models still differ. For each seed it
trains, at each budget of --steps (default 200 and 500 steps, each of 64 random sentences of 3-32 words):

- "RNN": Chapter 2's GRU encoder-decoder with a fixed summary (d_enc = 64 per direction, d_dec = 96);
- "attention RNN": Chapter 3's model, the same with additive attention (d_att = 64);
- "Transformer": Chapter 8's model (Pre-Norm, 2 + 2 layers, C = 64, 4 heads, d_ff = 128, context 48);

and, at --tf-only-steps (default 1200), the Transformer alone: the chapter's own budget, for its unequal row.
A step is one batch of 64 fresh sentences for every model, so equal steps are equal data.

Tuning effort, the same for all three: none in this benchmark. Every model keeps the recipe its chapter uses, with
the same peak learning rate 3e-3 and no sweep: the RNNs Adam with a cosine decay and no warmup (chosen in Chapter 2
for the plain RNN), the Transformer the book's Transformer recipe (AdamW decaying matrices only, 30 warmup steps,
cosine decay to a tenth). The same seed sets the weights and the batches. Each model is then scored by greedy
decoding on Chapter 3's fixed test sets (200 held-out sentences per length bucket): exact match and token accuracy.

Writes book/results/seq2seq_three.csv (one row per model, budget, seed and length bucket) and its provenance
seq2seq_three.json (bench_common.record). The last line reads
    longest=<lo>-<hi> <model>@<steps>=<min>..<max> ...
the exact-match range over seeds on the longest bucket, for each model and budget.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from bench_common import ROOT, record
from book.generate import greedy_translate
from book.seq2seq import Seq2SeqConfig, build_seq2seq, train_seq2seq
from book.tasks import LENGTH_BUCKETS, ToyTranslation, evaluate_translation
from book.transformer import Transformer, TransformerConfig
from book.utils import count_params, seed_everything

RESULTS = ROOT / "book" / "results" / "seq2seq_three.csv"
FIELDS = ["model", "steps", "sentences", "params", "seed", "lo", "hi", "exact", "token", "train_s"]
MODELS = ("RNN", "attention RNN", "Transformer")


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one run of every configuration each")
    p.add_argument("--steps", type=int, nargs="+", default=[200, 500], help="budgets every model trains for")
    p.add_argument("--tf-only-steps", type=int, nargs="*", default=[1200],
                   help="budgets only the Transformer trains for (Chapter 8's own)")
    p.add_argument("--per-bucket", type=int, default=200, help="test sentences per length bucket (Chapter 3's)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: robust on a shared machine)")
    p.add_argument("--out", type=Path, default=RESULTS, help="the results table (CSV) to write")
    p.add_argument("--quick", action="store_true", help="tiny runs to test the harness; writes nothing")
    return p.parse_args(argv)


def build(task, name):
    """A fresh model of one of the three kinds, with its chapter's sizes, and its greedy decoder."""
    V_src, V_tgt = len(task.src_vocab), len(task.tgt_vocab)
    if name == "Transformer":
        model = Transformer(TransformerConfig(V_src, V_tgt, context_len=48, norm="pre", d_model=64, n_heads=4,
                                              n_layers=2, d_ff=128))
        return model, dict(), (lambda src, n: greedy_translate(model, src, n))
    model = build_seq2seq(Seq2SeqConfig(V_src, V_tgt, attention="additive" if name == "attention RNN" else "none"))
    return model, dict(optimizer="adam", warmup=0), (lambda src, n: model.greedy(src, n)[0])


def run(task, tests, name, seed, steps):
    """Train one model with one seed for `steps` steps as its chapter does; its rows (one per length bucket)."""
    gen = seed_everything(seed)
    model, recipe, decode = build(task, name)
    started = time.perf_counter()
    train_seq2seq(model, task, steps=steps, lr=3e-3, generator=gen, progress=False, **recipe)
    train_s = time.perf_counter() - started
    with torch.no_grad():
        acc = evaluate_translation(decode, tests)
    return [dict(model=name, steps=steps, sentences=64 * steps, params=count_params(model), seed=seed, lo=lo, hi=hi,
                 exact=round(exact, 4), token=round(token, 4), train_s=round(train_s, 1))
            for (lo, hi), (exact, token) in acc.items()]


def main(argv=None) -> None:
    args = parse(argv)
    started = time.perf_counter()
    if args.quick:
        args.seeds, args.steps, args.tf_only_steps, args.per_bucket = args.seeds[:1], [2, 3], [4], 4
    torch.set_num_threads(args.threads)
    task = ToyTranslation()
    tests = task.test_sets(LENGTH_BUCKETS, n_per_bucket=args.per_bucket)
    plan = [(name, steps) for steps in args.steps for name in MODELS]
    plan += [("Transformer", steps) for steps in args.tf_only_steps]
    rows = []
    for seed in args.seeds:
        for name, steps in plan:                 # every configuration of a seed in turn: load falls on all alike
            new = run(task, tests, name, seed, steps)
            rows += new
            print(f"seed {seed} | {name:13s} | {steps:5d} steps | {new[0]['params']:,} parameters | exact by length "
                  + " ".join(f"{r['exact']:.3f}" for r in new) + f" | {new[0]['train_s']:.0f} s", flush=True)
    if not args.quick:
        record("seq2seq_three", rows, FIELDS, args, args.seeds, started, __file__, argv)
    lo, hi = LENGTH_BUCKETS[-1]
    longest = {}
    for r in rows:
        if r["lo"] == lo:
            longest.setdefault(f"{r['model'].replace(' ', '_')}@{r['steps']}", []).append(r["exact"])
    print(f"longest={lo}-{hi} " + " ".join(f"{k}={min(v):.3f}..{max(v):.3f}" for k, v in longest.items()))


if __name__ == "__main__":
    main()
