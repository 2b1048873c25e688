#!/usr/bin/env python3
"""Recall at distance k: Chapter 2's RNN and LSTM against Chapter 4's one attention layer, on one budget. Chapter 4.

    python benchmarks/recall_models.py            # the recorded run (about 8 minutes on one idle thread)
    python benchmarks/recall_models.py --quick    # a smoke test of the harness, no claims

The task is chapters 2 and 4's recall (book.tasks.recall_batch): random digits 0-7 with one marker; the answer is
the digit right after the marker, k steps before the end. The models: book.rnn.CharRNN (16-dim embedding, 64
units) as "rnn" and "lstm", and book.attention.OneLayerAttention (d = 32) as "attention". The budget rule is the
same for all three: book.rnn.train_recall, --steps steps of 64 sequences of 65 tokens (the same number of
examples), Adam at a constant rate, gradients clipped to 1; the same tuning effort: each model at each rate of
--lrs, with the same seeds. Every trained model is measured on 512 fresh sequences of 65 tokens with random k
(the validation accuracy, which picks each model's rate) and on 512 sequences of 257 tokens at each distance k
of --distances (the test: up to 4 times the training length).

Writes book/results/recall_models.csv (model, lr, seed, k, acc; k = 0 is the validation accuracy) and its
provenance recall_models.json (bench_common.record), and recall_models_curves.csv (model, lr, seed, step,
train_loss: the mean training loss over the --every steps that end at step). The last line reads, for each
model at its best rate,
    rnn_lr=<...> rnn_far=<mean accuracy at k >= 16> lstm_lr=<...> lstm_far=<...> attention_lr=<...> attention_far=<...>
"""
from __future__ import annotations

import time

import torch

from bench_common import ROOT, parser, record
from book.attention import OneLayerAttention
from book.rnn import CharRNN, recall_accuracy, train_recall
from book.tasks import recall_batch

RESULTS = ROOT / "book" / "results" / "recall_models.csv"
FIELDS = ["model", "lr", "seed", "k", "acc"]
CURVE_FIELDS = ["model", "lr", "seed", "step", "train_loss"]
MODELS = ("rnn", "lstm", "attention")
T_TRAIN, T_TEST = 65, 257


def build(kind: str) -> torch.nn.Module:
    if kind == "attention":
        return OneLayerAttention(9)                                     # digits 0-7 and the marker
    return CharRNN(vocab_size=9, d_emb=16, d_hidden=64, cell=kind)      # Chapter 2's recall models


@torch.no_grad()
def val_accuracy(model, seed: int) -> float:
    x, y, _ = recall_batch(512, T_TRAIN, generator=torch.Generator().manual_seed(seed))
    return (model(x)[:, -1].argmax(-1) == y).float().mean().item()


def best_rates(rows):
    """{model: the rate with the best mean validation accuracy over the seeds}."""
    def val(kind, lr):
        accs = [r["acc"] for r in rows if r["model"] == kind and r["lr"] == lr and r["k"] == 0]
        return sum(accs) / len(accs)
    return {kind: max(sorted({r["lr"] for r in rows}), key=lambda lr: val(kind, lr)) for kind in MODELS}


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--steps", type=int, default=800, help="training steps of every run (chapter 2's)")
    p.add_argument("--every", type=int, default=50, help="steps per point of the training-loss curve")
    p.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3, 1e-2], help="Adam rates, every model")
    p.add_argument("--n-seeds", type=int, default=3, help="seeds --seed, --seed + 1, ... for every rate")
    p.add_argument("--distances", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.quick:
        args.steps, args.every, args.lrs, args.n_seeds, args.distances = 4, 2, [3e-3], 1, [1, 256]
    torch.set_num_threads(args.threads)
    seeds = [args.seed + i for i in range(args.n_seeds)]
    rows, curves = [], []
    for kind in MODELS:
        for lr in args.lrs:
            for seed in seeds:
                torch.manual_seed(seed)
                model = build(kind)
                losses = train_recall(model, steps=args.steps, seq_len=T_TRAIN, lr=lr,
                                      generator=torch.Generator().manual_seed(seed), progress=False)
                for end in range(args.every, len(losses) + 1, args.every):
                    chunk = losses[end - args.every:end]
                    curves.append(dict(model=kind, lr=lr, seed=seed, step=end,
                                       train_loss=round(sum(chunk) / len(chunk), 4)))
                acc = {0: val_accuracy(model, 10_000 + seed)}
                acc.update(recall_accuracy(model, T_TEST, args.distances,
                                           generator=torch.Generator().manual_seed(20_000 + seed)))
                rows += [dict(model=kind, lr=lr, seed=seed, k=k, acc=round(a, 4)) for k, a in acc.items()]
                print(f"  {kind:9s} lr {lr:g} seed {seed}: validation {acc[0]:.2f} | k: "
                      + " ".join(f"{acc[k]:.2f}" for k in args.distances)
                      + f" | {time.perf_counter() - started:.0f} s", flush=True)
    if not args.quick:
        record("recall_models", {"recall_models.csv": (FIELDS, rows),
                                 "recall_models_curves.csv": (CURVE_FIELDS, curves)},
               FIELDS, args, seeds, started, __file__, argv)
    best = best_rates(rows)
    far = {kind: [r["acc"] for r in rows if r["model"] == kind and r["lr"] == best[kind] and r["k"] >= 16]
           for kind in MODELS}
    print(" ".join(f"{kind}_lr={best[kind]:g} {kind}_far={sum(far[kind]) / max(len(far[kind]), 1):.4f}"
                   for kind in MODELS))


if __name__ == "__main__":
    main()
