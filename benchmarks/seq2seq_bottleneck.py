#!/usr/bin/env python3
"""Is chapter 2's encoder-decoder limited by its one summary vector, or just small and undertrained? Chapter 2.

    python benchmarks/seq2seq_bottleneck.py            # the recorded run (about eight minutes on one idle thread)
    python benchmarks/seq2seq_bottleneck.py --quick    # a smoke test of the harness, no claims

Chapter 2 trains an encoder-decoder without attention (book.seq2seq: bidirectional GRU encoder, 64 units a
direction, so a summary of 128 numbers; a 96-unit GRU decoder) for 500 steps on book.tasks.ToyTranslation and finds
it fine on short sentences and lost on long ones. Two controls, each trained exactly like it (Adam at 3e-3 with a
cosine decay, batches of 64, chapter 2's setting, no sweep for any of them), once per seed in --seeds:
  "2x sizes": every size doubled (a summary of 256 numbers, a 192-unit decoder), 500 steps;
  "4x steps": the chapter's sizes, 2,000 steps (the cosine stretched over them);
and, on request (--configs ... attention), "attention": the chapter's sizes plus chapter 3's additive attention,
500 steps (chapter 3 measures that one). Every model is tested on the chapter's held-out sentences (200 per
length bucket).

Writes book/results/seq2seq_bottleneck.csv: config, seed, lo, hi, exact, token, token_no_and (token accuracy
without the target's AND tokens, whose place the grammar fixes), final_loss (mean of the last 50 steps, nats/token),
train_s; seq2seq_bottleneck_positions.csv: the accuracy at every target position of the longest bucket (config,
seed, position, acc, acc_no_and, count_no_and); and the provenance seq2seq_bottleneck.json.
The last line reads
    <config>_long_exact_max=<best seed's exact match at 28-32 words> ... for each config
"""
from __future__ import annotations

import time

import torch

from bench_common import ROOT, parser, record
from book.seq2seq import Seq2SeqConfig, build_seq2seq, train_seq2seq
from book.tasks import LENGTH_BUCKETS, ToyTranslation, position_accuracy, sequence_accuracy
from book.utils import seed_everything

RESULTS = ROOT / "book" / "results" / "seq2seq_bottleneck.csv"
FIELDS = ["config", "seed", "lo", "hi", "exact", "token", "token_no_and", "final_loss", "train_s"]
POSITION_FIELDS = ["config", "seed", "position", "acc", "acc_no_and", "count_no_and"]
# name: (d_enc, d_dec, attention, steps multiplier)
CONFIGS = {"chapter": (64, 96, "none", 1), "2x sizes": (128, 192, "none", 1), "4x steps": (64, 96, "none", 4),
           "attention": (64, 96, "additive", 1)}


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--configs", nargs="+", default=["chapter", "2x sizes", "4x steps"], choices=list(CONFIGS))
    p.add_argument("--steps", type=int, default=500, help="the chapter's training steps (4x steps: four times it)")
    p.add_argument("--n-test", type=int, default=200, help="held-out sentences per length bucket")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.quick:
        args.steps, args.seeds, args.n_test = 2, [0], 8
    torch.set_num_threads(args.threads)

    task = ToyTranslation()
    tests = task.test_sets(LENGTH_BUCKETS, n_per_bucket=args.n_test)
    AND = task.tgt_vocab.index(task.conj.upper())
    rows, position_rows = [], []
    for name in args.configs:
        d_enc, d_dec, attention, mult = CONFIGS[name]
        for seed in args.seeds:
            gen = seed_everything(seed)
            model = build_seq2seq(Seq2SeqConfig(len(task.src_vocab), len(task.tgt_vocab), d_enc=d_enc, d_dec=d_dec,
                                                attention=attention))
            t0 = time.perf_counter()
            losses = train_seq2seq(model, task, steps=args.steps * mult, optimizer="adam", warmup=0,
                                   generator=gen, progress=False)
            train_s = round(time.perf_counter() - t0, 1)
            tail = losses[-50:]
            for (lo, hi), batch in tests.items():
                pred = model.greedy(batch.src, batch.tgt_out.shape[1] + 5)[0]
                exact, token = sequence_accuracy(pred, batch.tgt_out)
                acc_no_and, count = position_accuracy(pred, batch.tgt_out, skip=[AND])
                token_no_and = (acc_no_and.nan_to_num() * count).sum().item() / count.sum().item()
                rows.append(dict(config=name, seed=seed, lo=lo, hi=hi, exact=round(exact, 4), token=round(token, 4),
                                 token_no_and=round(token_no_and, 4), final_loss=round(sum(tail) / len(tail), 4),
                                 train_s=train_s))
                if (lo, hi) == LENGTH_BUCKETS[-1]:
                    acc, _ = position_accuracy(pred, batch.tgt_out)
                    position_rows += [dict(config=name, seed=seed, position=i + 1, acc=round(a, 4),
                                           acc_no_and=round(b, 4) if c else "", count_no_and=c)
                                      for i, (a, b, c) in enumerate(zip(acc.tolist(), acc_no_and.tolist(),
                                                                         count.tolist()))]
            long = rows[-1]
            print(f"{name:9s} seed {seed} | loss {long['final_loss']:.3f} | 28-32 words: exact {long['exact']:.3f}, "
                  f"tokens {long['token']:.3f}, without AND {long['token_no_and']:.3f} | {train_s:.0f} s", flush=True)
    if not args.quick:
        record("seq2seq_bottleneck", {"seq2seq_bottleneck.csv": (FIELDS, rows),
                                      "seq2seq_bottleneck_positions.csv": (POSITION_FIELDS, position_rows)},
               None, args, args.seeds, started, __file__, argv)
    hi = LENGTH_BUCKETS[-1][1]
    print(" ".join(f"{name.replace(' ', '_')}_long_exact_max="
                   f"{max(r['exact'] for r in rows if r['config'] == name and r['hi'] == hi):.4f}"
                   for name in args.configs))


if __name__ == "__main__":
    main()
