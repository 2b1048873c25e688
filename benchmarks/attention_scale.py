#!/usr/bin/env python3
"""Does the 1/sqrt(d_k) of attention change training? Chapter 4's one-layer attention, scaled and unscaled. Chapter 4.

    python benchmarks/attention_scale.py            # the recorded run (about 5 minutes on one idle thread)
    python benchmarks/attention_scale.py --quick    # a smoke test of the harness, no claims

The model is book.attention.OneLayerAttention at width --d (= d_k, one head): scaled divides the scores by
sqrt(d_k), unscaled does not (its query is multiplied by sqrt(d_k), nothing else changes). The task is chapter 4's
"a line read twice": a random 32-character window of the training text written twice; the loss is on every
character of the second copy. Both settings get the same tuning effort: Adam at a constant rate, each rate of
--lrs, each with the same --seeds seeds (the seed sets the initialisation and the batches), --steps steps of 32
windows. Every --every steps (and at step 0) the model is measured on the same 256 validation windows: the loss
(nats per character of the second copy), the accuracy, and the mean entropy (nats) of the attention weights of
the second copy's queries.

Writes book/results/attention_scale.csv (scaled, lr, seed, step, val_loss, val_acc, entropy) and its provenance
attention_scale.json (bench_common.record). The last line reads, for each setting at its best rate (lowest
mean final loss),
    scaled_lr=<...> scaled_loss=<mean> unscaled_lr=<...> unscaled_loss=<mean> \
    scaled_first=<mean loss at the first measurement after step 0> unscaled_first=<...>
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from bench_common import ROOT, char_corpus, parser, record
from book.attention import OneLayerAttention
from book.data import get_batch
from book.optim import build_optimizer
from book.train import fit

RESULTS = ROOT / "book" / "results" / "attention_scale.csv"
FIELDS = ["scaled", "lr", "seed", "step", "val_loss", "val_acc", "entropy"]
L, BATCH = 32, 32                      # chapter 4's window and batch


def twice(data: torch.Tensor, batch_size: int, generator: torch.Generator):
    """Windows written twice: inputs (B, 2L-1), the second copy (B, L), and the positions that predict it."""
    x, _ = get_batch(data, batch_size, L, generator=generator)
    xx = torch.cat([x, x], 1)
    return xx[:, :-1], xx[:, L:], slice(L - 1, None)


def second_copy_loss(model, batch):
    x, y, at = batch
    return F.cross_entropy(model(x)[:, at].reshape(y.numel(), -1), y.reshape(-1))


@torch.no_grad()
def measure(model, batch) -> tuple[float, float, float]:
    """(loss, accuracy, mean entropy of the second copy's attention weights) on a fixed batch."""
    x, y, at = batch
    logits = model(x)[:, at]
    w = model.weights[:, at]                                        # (B, L, 2L-1)
    entropy = -(w * w.clamp_min(1e-30).log()).sum(-1).mean().item()
    loss = F.cross_entropy(logits.reshape(y.numel(), -1), y.reshape(-1)).item()
    return loss, (logits.argmax(-1) == y).float().mean().item(), entropy


def run(scaled: bool, lr: float, seed: int, args, train, val_batch, vocab: int):
    torch.manual_seed(seed)
    model = OneLayerAttention(vocab, d=args.d, scaled=scaled)
    points = [(0, measure(model, val_batch))]                        # untrained: where each setting starts
    gen = torch.Generator().manual_seed(seed)
    hist = fit(model, lambda: twice(train, BATCH, gen), loss_fn=second_copy_loss, steps=args.steps,
               optimizer=build_optimizer(model, "adam", lr=lr), schedule="constant",
               eval_fn=lambda m: measure(m, val_batch), eval_every=args.every, progress=False)
    points += list(hist.val)
    return [dict(scaled=int(scaled), lr=lr, seed=seed, step=step, val_loss=round(m[0], 4), val_acc=round(m[1], 4),
                 entropy=round(m[2], 4)) for step, m in points]


def summary(rows, scaled: int):
    """(best rate, mean final loss, mean loss at the first measurement after step 0) of one setting."""
    def mean(xs):
        return sum(xs) / len(xs)
    lrs = sorted({r["lr"] for r in rows})
    last = max(r["step"] for r in rows)
    first = min(r["step"] for r in rows if r["step"] > 0)
    at = lambda lr, step: [r["val_loss"] for r in rows if r["scaled"] == scaled and r["lr"] == lr and r["step"] == step]
    best = min(lrs, key=lambda lr: mean(at(lr, last)))
    return best, mean(at(best, last)), mean(at(best, first))


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--d", type=int, default=256, help="model width = d_k (one head)")
    p.add_argument("--steps", type=int, default=300, help="training steps of every run")
    p.add_argument("--every", type=int, default=20, help="steps between two measurements")
    p.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3, 1e-2], help="Adam rates, each setting")
    p.add_argument("--n-seeds", type=int, default=3, help="seeds --seed, --seed + 1, ... for every rate")
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.quick:
        args.d, args.steps, args.every, args.lrs, args.n_seeds = 16, 4, 2, [1e-2], 1
    torch.set_num_threads(args.threads)
    train, val, tok = char_corpus()
    val_batch = twice(val, 256, torch.Generator().manual_seed(1))
    seeds = [args.seed + i for i in range(args.n_seeds)]
    rows = []
    for scaled in (True, False):
        for lr in args.lrs:
            for seed in seeds:
                new = run(scaled, lr, seed, args, train, val_batch, tok.vocab_size)
                rows += new
                print(f"  {'scaled  ' if scaled else 'unscaled'} lr {lr:g} seed {seed}: loss "
                      + " ".join(f"{r['val_loss']:.2f}" for r in new) + f" | entropy at start {new[0]['entropy']:.2f}"
                      f" | {time.perf_counter() - started:.0f} s", flush=True)
    if not args.quick:
        record("attention_scale", rows, FIELDS, args, seeds, started, __file__, argv)
    (s_lr, s_loss, s_first), (u_lr, u_loss, u_first) = summary(rows, 1), summary(rows, 0)
    print(f"scaled_lr={s_lr:g} scaled_loss={s_loss:.4f} unscaled_lr={u_lr:g} unscaled_loss={u_loss:.4f} "
          f"scaled_first={s_first:.4f} unscaled_first={u_first:.4f}")


if __name__ == "__main__":
    main()
