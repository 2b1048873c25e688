#!/usr/bin/env python3
"""The vanilla RNN trained fairly: recall at distance k, RNN and LSTM, uniform distances or a short-k curriculum.
Chapter 2.

    python benchmarks/recall_curriculum.py            # the recorded run (several minutes on one thread)
    python benchmarks/recall_curriculum.py --quick    # a smoke test of the harness, no claims

Chapter 2 trains both models on recall with k uniform in 1..64 (sequences of 65 tokens), so most of the vanilla
RNN's examples lie beyond its reach. Here each cell (64 units, chapter 2's CharRNN) is trained --steps steps with
book.rnn.train_recall in two ways: "uniform" (chapter 2's) and "curriculum" (the longest distance asked grows from 2
to 64 over the first half of the steps, book.rnn.curriculum_max_distance), both at --lr (Adam at a constant rate,
gradients clipped to 1: chapter 2's setting, the same for both cells, no sweep for either), once per seed in
--seeds. Accuracy is measured on sequences of --test-len tokens at every distance in --distances (up to four times
the longest trained distance, as in the chapter), on 512 fresh sequences each.

Writes book/results/recall_curriculum.csv: cell, schedule, seed, k, acc, grad (book.rnn.gradient_by_distance: the
mean input-gradient norm at the digit to recall, 256 sequences), train_s; and its provenance
recall_curriculum.json. The last line reads
    rnn_uniform_k1=<lowest seed's accuracy at k = 1> rnn_curriculum_k1=<...> rnn_curriculum_k<4th distance>=<...>
"""
from __future__ import annotations

import time

import torch

from bench_common import ROOT, parser, record
from book.rnn import CharRNN, gradient_by_distance, recall_accuracy, train_recall
from book.utils import seed_everything

RESULTS = ROOT / "book" / "results" / "recall_curriculum.csv"
FIELDS = ["cell", "schedule", "seed", "k", "acc", "grad", "train_s"]


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--cells", nargs="+", default=["rnn", "lstm"])
    p.add_argument("--schedules", nargs="+", default=["uniform", "curriculum"], choices=["uniform", "curriculum"])
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--seq-len", type=int, default=65, help="training sequences: distances 1..seq_len-1")
    p.add_argument("--test-len", type=int, default=257, help="test sequences: distances up to test_len-1")
    p.add_argument("--distances", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.quick:
        args.steps, args.seeds, args.seq_len, args.test_len, args.distances = 3, [0], 9, 17, [1, 2, 4, 8, 16]
    torch.set_num_threads(args.threads)

    rows = []
    for cell in args.cells:
        for schedule in args.schedules:
            for seed in args.seeds:
                gen = seed_everything(seed)
                model = CharRNN(vocab_size=9, d_emb=16, d_hidden=64, cell=cell)
                t0 = time.perf_counter()
                train_recall(model, steps=args.steps, seq_len=args.seq_len, lr=args.lr,
                             curriculum=schedule == "curriculum", generator=gen, progress=False)
                train_s = round(time.perf_counter() - t0, 1)
                acc = recall_accuracy(model, args.test_len, args.distances,
                                      generator=torch.Generator().manual_seed(10_000 + seed))
                grad = gradient_by_distance(model, args.test_len, args.distances,
                                            generator=torch.Generator().manual_seed(20_000 + seed))
                rows += [dict(cell=cell, schedule=schedule, seed=seed, k=k, acc=round(a, 4), grad=f"{grad[k]:.3e}",
                              train_s=train_s) for k, a in acc.items()]
                print(f"{cell:4s} {schedule:10s} seed {seed} | " + " ".join(f"k={k}: {a:.2f}" for k, a in acc.items())
                      + f" | {train_s:.0f} s", flush=True)
    if not args.quick:
        record("recall_curriculum", rows, FIELDS, args, args.seeds, started, __file__, argv)

    def worst(schedule, k):
        return min((r["acc"] for r in rows if (r["cell"], r["schedule"], r["k"]) == ("rnn", schedule, k)),
                   default=float("nan"))
    k4 = args.distances[min(3, len(args.distances) - 1)]
    print(f"rnn_uniform_k1={worst('uniform', 1):.4f} rnn_curriculum_k1={worst('curriculum', 1):.4f} "
          f"rnn_curriculum_k{k4}={worst('curriculum', k4):.4f}")

if __name__ == "__main__":
    main()
