#!/usr/bin/env python3
"""Where a fixed-size state runs out: recall n digits at once after a fixed delay, LSTMs of two state sizes. Chapter 2.

    python benchmarks/recall_capacity.py            # the recorded run (a few minutes on one thread)
    python benchmarks/recall_capacity.py --quick    # a smoke test of the harness, no claims

Chapter 2's recall task asks the state to carry one digit, and a trained LSTM does that to k = 256. Here it must
carry n of them (book.tasks.recall_many_batch): a marker, n random digits 0-7, --delay random filler digits, then n
query tokens; at the i-th query the model names the i-th digit, so every digit waits n + delay steps whatever n is.
Each configuration (state size --hidden, n in --digits) is trained --steps steps with book.rnn.train_recall_many
(Adam at a constant --lr, gradients clipped to 1, batches of 64: chapter 2's recall setting, the same for every
configuration, no sweep), once per seed in --seeds, and tested on 1,024 fresh sequences. A control asks whether
the budget is what runs out: the largest state trained --long-steps steps (four times as many) at the n in
--long-digits.

Writes book/results/recall_capacity.csv: cell, hidden, n_digits, delay, seed, steps, final_loss (mean of the last
50 steps, nats per digit), digit_acc (share of digits named right), train_s; recall_capacity_queries.csv: the
accuracy at every query (hidden, n_digits, seed, steps, query, acc); and the provenance recall_capacity.json.
The last line reads
    worst_digit_acc_<hidden>=<lowest seed's digit accuracy at the largest n> ... for each state size
"""
from __future__ import annotations

import time

import torch

from bench_common import ROOT, parser, record
from book.rnn import CharRNN, recall_many_accuracy, train_recall_many
from book.utils import seed_everything

RESULTS = ROOT / "book" / "results" / "recall_capacity.csv"
FIELDS = ["cell", "hidden", "n_digits", "delay", "seed", "steps", "final_loss", "digit_acc", "train_s"]
QUERY_FIELDS = ["hidden", "n_digits", "seed", "steps", "query", "acc"]
N_VALUES = 8


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--cell", default="lstm", choices=["lstm", "gru", "rnn"])
    p.add_argument("--hidden", type=int, nargs="+", default=[16, 64], help="state sizes")
    p.add_argument("--digits", type=int, nargs="+", default=[1, 2, 4, 8, 16], help="digits to recall at once")
    p.add_argument("--delay", type=int, default=16, help="filler steps between the last digit and the first query")
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--long-steps", type=int, default=6000, help="the control's steps (largest state only)")
    p.add_argument("--long-digits", type=int, nargs="+", default=[4, 8], help="the control's n")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.quick:
        args.hidden, args.digits, args.steps, args.seeds = [8], [1, 2], 3, [0]
        args.long_steps, args.long_digits = 4, [2]
    torch.set_num_threads(args.threads)

    runs = ([(hidden, n, args.steps) for hidden in args.hidden for n in args.digits]
            + [(max(args.hidden), n, args.long_steps) for n in args.long_digits])
    rows, query_rows = [], []
    for hidden, n, steps in runs:
        for seed in args.seeds:
            gen = seed_everything(seed)
            model = CharRNN(N_VALUES + 2, d_emb=16, d_hidden=hidden, cell=args.cell)
            t0 = time.perf_counter()
            losses = train_recall_many(model, steps=steps, n_digits=n, delay=args.delay, lr=args.lr,
                                       n_values=N_VALUES, generator=gen, progress=False)
            train_s = time.perf_counter() - t0
            acc = recall_many_accuracy(model, n, args.delay, N_VALUES, n=1024,
                                       generator=torch.Generator().manual_seed(10_000 + seed))
            tail = losses[-50:]
            rows.append(dict(cell=args.cell, hidden=hidden, n_digits=n, delay=args.delay, seed=seed,
                             steps=len(losses), final_loss=round(sum(tail) / len(tail), 4),
                             digit_acc=round(sum(acc) / n, 4), train_s=round(train_s, 1)))
            query_rows += [dict(hidden=hidden, n_digits=n, seed=seed, steps=steps, query=i + 1, acc=round(a, 4))
                           for i, a in enumerate(acc)]
            r = rows[-1]
            print(f"{args.cell} {hidden:4d} units | n = {n:3d} | {steps} steps | seed {seed} | "
                  f"loss {r['final_loss']:.3f} | digits right {r['digit_acc']:.3f} | {train_s:.0f} s", flush=True)
    if not args.quick:
        record("recall_capacity", {"recall_capacity.csv": (FIELDS, rows),
                                   "recall_capacity_queries.csv": (QUERY_FIELDS, query_rows)},
               None, args, args.seeds, started, __file__, argv)
    top = max(args.digits)
    worst = {h: min(r["digit_acc"] for r in rows if (r["hidden"], r["n_digits"], r["steps"]) == (h, top, args.steps))
             for h in args.hidden}
    print(" ".join(f"worst_digit_acc_{h}={a:.4f}" for h, a in worst.items()))

if __name__ == "__main__":
    main()
