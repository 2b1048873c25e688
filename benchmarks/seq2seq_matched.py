#!/usr/bin/env python3
"""Attention against a plain encoder-decoder with as many parameters, several seeds. Chapter 3.

    python benchmarks/seq2seq_matched.py            # the comparison (about 6 minutes on one idle CPU thread)
    python benchmarks/seq2seq_matched.py --quick    # a smoke test of the harness, no claims

Chapter 3 trains one plain encoder-decoder (Chapter 2's fixed summary) and one with additive attention, one seed
each, and the attention model has 14,400 more parameters (the attention itself). This benchmark asks whether the
gap is the extra parameters or the one seed. It trains, for each seed:

- "plain": Chapter 2's model (d_enc = 64 per direction, d_dec = 96);
- "plain, d_dec raised": the same with the decoder's state raised until it has at least as many parameters as the
  attention model (d_dec = 108);
- "plain, d_enc raised": the same with the encoder's states, and so the summary, raised instead (d_enc = 72, a
  summary of 144 numbers);
- "additive": Chapter 3's attention model (d_enc = 64, d_dec = 96, d_att = 64).

Every model trains exactly as Chapter 3 trains its models: 500 steps of 64 random sentences of 3-32 words, Adam at
3e-3 with a cosine decay and no warmup (the chapter's setting, tuned once for the plain model in Chapter 2), the same
seed for the weights and the batches; no configuration is tuned further. Each is then scored by greedy decoding on
Chapter 3's fixed test sets (200 held-out sentences per length bucket): exact match and token accuracy.

Writes book/results/seq2seq_matched.csv (one row per model, seed and length bucket) and its provenance
seq2seq_matched.json (bench_common.record). The last line reads
    longest=<lo>-<hi> <config>=<min>..<max> ...
the exact-match range over seeds on the longest bucket, for each configuration.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from bench_common import ROOT, record
from book.seq2seq import Seq2SeqConfig, build_seq2seq, train_seq2seq
from book.tasks import LENGTH_BUCKETS, ToyTranslation, evaluate_translation
from book.utils import count_params, seed_everything

RESULTS = ROOT / "book" / "results" / "seq2seq_matched.csv"
FIELDS = ["config", "attention", "d_enc", "d_dec", "params", "seed", "lo", "hi", "exact", "token", "train_s"]
# name -> Seq2SeqConfig fields; the raised sizes are the smallest that give at least the attention model's count
CONFIGS = {
    "plain": dict(attention="none"),
    "plain, d_dec raised": dict(attention="none", d_dec=108),
    "plain, d_enc raised": dict(attention="none", d_enc=72),
    "additive": dict(attention="additive"),
}


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one run of every configuration each")
    p.add_argument("--steps", type=int, default=500, help="training steps per model (Chapter 3's budget)")
    p.add_argument("--per-bucket", type=int, default=200, help="test sentences per length bucket (Chapter 3's)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: robust on a shared machine)")
    p.add_argument("--out", type=Path, default=RESULTS, help="the results table (CSV) to write")
    p.add_argument("--quick", action="store_true", help="tiny runs to test the harness; writes nothing")
    return p.parse_args(argv)


def run(task, tests, name, seed, steps):
    """Train one configuration with one seed as Chapter 3 does; its rows (one per length bucket)."""
    cfg = Seq2SeqConfig(len(task.src_vocab), len(task.tgt_vocab), **CONFIGS[name])
    gen = seed_everything(seed)
    model = build_seq2seq(cfg)
    started = time.perf_counter()
    train_seq2seq(model, task, steps=steps, optimizer="adam", warmup=0, generator=gen, progress=False)
    train_s = time.perf_counter() - started
    acc = evaluate_translation(lambda src, n: model.greedy(src, n)[0], tests)
    return [dict(config=name, attention=cfg.attention, d_enc=cfg.d_enc, d_dec=cfg.d_dec, params=count_params(model),
                 seed=seed, lo=lo, hi=hi, exact=round(exact, 4), token=round(token, 4), train_s=round(train_s, 1))
            for (lo, hi), (exact, token) in acc.items()]


def main(argv=None) -> None:
    args = parse(argv)
    started = time.perf_counter()
    if args.quick:
        args.seeds, args.steps, args.per_bucket = args.seeds[:1], 3, 4
    torch.set_num_threads(args.threads)
    task = ToyTranslation()
    tests = task.test_sets(LENGTH_BUCKETS, n_per_bucket=args.per_bucket)
    rows = []
    for seed in args.seeds:
        for name in CONFIGS:                    # every configuration of a seed in turn: load falls on all alike
            new = run(task, tests, name, seed, args.steps)
            rows += new
            print(f"seed {seed} | {name:20s} | {new[0]['params']:,} parameters | exact by length "
                  + " ".join(f"{r['exact']:.3f}" for r in new) + f" | {new[0]['train_s']:.0f} s", flush=True)
    if not args.quick:
        record("seq2seq_matched", rows, FIELDS, args, args.seeds, started, __file__, argv)
    lo, hi = LENGTH_BUCKETS[-1]
    longest = {name: [r["exact"] for r in rows if r["config"] == name and r["lo"] == lo] for name in CONFIGS}
    print(f"longest={lo}-{hi} " + " ".join(f"{name.replace(', ', '_').replace(' ', '_')}={min(v):.3f}..{max(v):.3f}"
                                          for name, v in longest.items()))


if __name__ == "__main__":
    main()
