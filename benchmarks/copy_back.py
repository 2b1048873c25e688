#!/usr/bin/env python3
"""Copy the token k back: which position scheme still finds it when k grows beyond training? Chapter 5.

    python benchmarks/copy_back.py            # the recorded result (about 12 minutes on one idle thread)
    python benchmarks/copy_back.py --quick    # a smoke test of the harness, writes nothing

The task (book.tasks.copy_back_batch): 4 random letters, then k - 1 dots, then "?"; the answer at "?" is the
last letter, exactly k places back. Training sequences have 20 tokens and k uniform in 1..16, so no distance
above 19 ever occurs in training; the test asks for k = 1..48 in the shortest sequence that holds it
(max(20, k + 4) tokens), so beyond k = 16 both the distance and the length are new.

The model (book.positional.CopyBackModel): one causal attention layer, 4 heads of 8 dims, d_model 32, residual,
read out at "?", with positions "sinusoidal", "learned" (64 rows), "rope" or "alibi" (slopes 1/4 .. 1/256).
Every scheme gets the same tuning effort: Adam at each learning rate of --lrs for --steps steps (batches of 64,
constant rate), and the rate with the best mean accuracy on held-out training-range data (k <= 16) is the one
reported; every seed of every rate is written. book/results/copy_back.csv has one row per (scheme, lr, seed, k):
accuracy on --n-eval fresh sequences, and `chosen` = 1 for the rows of the scheme's chosen rate. The last line:
    <scheme>=<mean accuracy for k 17..48 at its chosen rate> ...
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from bench_common import ROOT, parser, record
from book.optim import build_optimizer, fit
from book.positional import CopyBackModel
from book.tasks import copy_back_batch

RESULTS = ROOT / "book" / "results" / "copy_back.csv"
FIELDS = ["scheme", "lr", "seed", "k", "accuracy", "chosen"]
SCHEMES = ("sinusoidal", "learned", "rope", "alibi")
TRAIN_LEN, TRAIN_K, N_LETTERS, VOCAB = 20, 16, 4, 18          # 16 letters, the dot and "?"


def train(scheme: str, lr: float, seed: int, steps: int) -> CopyBackModel:
    torch.manual_seed(seed)
    model = CopyBackModel(VOCAB, scheme)
    gen = torch.Generator().manual_seed(seed)

    def batch():
        k = torch.randint(1, TRAIN_K + 1, (64,), generator=gen)
        x, y, _ = copy_back_batch(64, TRAIN_LEN, k, N_LETTERS, generator=gen)
        return x, y

    fit(model, batch, loss_fn=lambda m, b: F.cross_entropy(m(b[0]), b[1]),
        optimizer=build_optimizer(model, "adam", lr=lr), steps=steps, schedule="constant", progress=False)
    return model.eval()


@torch.no_grad()
def accuracy(model: CopyBackModel, k: int, n: int, seed: int) -> float:
    x, y, _ = copy_back_batch(n, max(TRAIN_LEN, k + N_LETTERS), k, N_LETTERS,
                              generator=torch.Generator().manual_seed(seed))
    return (model(x).argmax(-1) == y).float().mean().item()


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3, 1e-2, 3e-2, 1e-1])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--n-eval", type=int, default=500, help="test sequences per k")
    p.add_argument("--max-k", type=int, default=48)
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.quick:
        args.seeds, args.lrs, args.steps, args.n_eval, args.max_k = [0], [3e-3], 3, 20, 20
    torch.set_num_threads(args.threads)

    rows, best = [], {}
    for scheme in SCHEMES:
        dev = {}
        for lr in args.lrs:
            for seed in args.seeds:
                model = train(scheme, lr, seed, args.steps)
                dev[lr] = dev.get(lr, 0.0) + sum(accuracy(model, k, 100, 10_000 + k) for k in range(1, TRAIN_K + 1))
                rows += [dict(scheme=scheme, lr=lr, seed=seed, k=k,
                              accuracy=round(accuracy(model, k, args.n_eval, k), 4)) for k in range(1, args.max_k + 1)]
        best[scheme] = max(dev, key=dev.get)          # held-out training-range data only: the test never chooses
        print(f"{scheme:10s} held-out k<=16 accuracy by lr: "
              + ", ".join(f"{lr:g}: {v / len(args.seeds) / TRAIN_K:.3f}" for lr, v in dev.items())
              + f" -> {best[scheme]:g}  ({time.perf_counter() - started:.0f} s)", flush=True)
    for row in rows:
        row["chosen"] = int(row["lr"] == best[row["scheme"]])
    if not args.quick:
        record("copy_back", rows, FIELDS, args, args.seeds, started, __file__, argv)
    beyond = {s: [r["accuracy"] for r in rows if r["scheme"] == s and r["chosen"] and r["k"] > TRAIN_K]
              for s in SCHEMES}
    print(" ".join(f"{s}={sum(v) / len(v):.3f}" for s, v in beyond.items()))


if __name__ == "__main__":
    main()
