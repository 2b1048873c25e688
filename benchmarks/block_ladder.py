#!/usr/bin/env python3
"""Chapter 6's ladder at four layers, the warmup test, and one layer against two (recorded, 3 seeds each).

    python benchmarks/block_ladder.py            # the recorded result (about 10 minutes on one idle thread)
    python benchmarks/block_ladder.py --quick    # a smoke test of the harness, writes nothing

Three experiments, each with seeds 0, 1, 2 (--seeds), on one thread:

1. The ladder (book/results/block_ladder.csv). book.blocks.BlockLM with --layers blocks of width --d-model on the
   book's characters (32-character windows, batches of 32, --steps steps of AdamW with --warmup warmup steps and a
   cosine decay to a tenth, gradient clipping at 1): one head -> multi-head (--heads heads, same parameters)
   -> + FFN -> + residual -> + LayerNorm (Pre-Norm, the full block), and beside it the full block with ONE head
   of width d_model ("wide head": the same parameters as the full block). Equal tuning effort: every rung runs
   seed 0 at each learning rate of --lrs and keeps the one with the lower loss on a dev split (the last
   --dev-chars characters of the training text, never trained on); seeds 1 and 2 then run at that rate. Rows:
   rung, lr, seed, params, dev and validation bits/char, chosen (1 = the rung's chosen rate).
   block_ladder_stream.csv: the RMS of the residual stream after the embeddings and after each block (64
   validation windows), for every chosen run.
2. Warmup (block_ladder_warmup.csv). A --warm-layers-deep stack, Post-Norm without warmup, Post-Norm with a linear
   warmup over --warm-warmup steps, Pre-Norm without warmup, and residual blocks without any LayerNorm (no
   warmup), each at every peak rate of --warm-lrs (the same for all; not tuned: rates chosen high, where the
   placement of the norm should matter), --warm-steps steps, cosine decay; validation bits/char every
   --warm-steps / 10 steps.
3. One layer or two (block_ladder_copy.csv). book.tasks.repeat_batch: a random segment of 4..10 of 32 symbols
   written twice at a random place in 32 random tokens; the loss is on the second copy only. Full Pre-Norm blocks
   (--heads heads, width --d-model), 1 or 2 layers, AdamW at --copy-lr (the same for both, not tuned), --copy-steps
   steps with --warmup warmup steps and a cosine decay;
   accuracy on 2,000 fresh sequences every --copy-steps / 10 steps.

The last line: ladder:<rung>=<mean validation bits/char, chosen rate> warm:<run>@<lr>=<mean final bits/char>
copy:<layers>=<mean final copy accuracy>.
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from bench_common import ROOT, char_corpus, parser, record
from book.blocks import BlockLM
from book.data import get_batch
from book.optim import build_optimizer, fit
from book.tasks import repeat_batch
from book.train import evaluate_lm, nats_to_bits, train_lm
from book.utils import seed_everything

RESULTS = ROOT / "book" / "results" / "block_ladder.csv"
FIELDS = ["rung", "lr", "seed", "params", "dev_bpc", "val_bpc", "chosen"]
WARM_FIELDS = ["run", "lr", "seed", "step", "val_bpc"]
COPY_FIELDS = ["layers", "seed", "step", "accuracy"]
STREAM_FIELDS = ["rung", "seed", "layer", "rms"]
CONTEXT, BATCH = 32, 32


def rungs(heads: int) -> dict:
    """rung -> TransformerBlock flags (the chapter's LADDER, plus the full block with one wide head)."""
    return {"one head": dict(n_heads=1, use_ffn=False, residual=False, use_norm=False),
            "multi-head": dict(n_heads=heads, use_ffn=False, residual=False, use_norm=False),
            "+ FFN": dict(n_heads=heads, use_ffn=True, residual=False, use_norm=False),
            "+ residual": dict(n_heads=heads, use_ffn=True, residual=True, use_norm=False),
            "+ LayerNorm": dict(n_heads=heads, use_ffn=True, residual=True, use_norm=True, norm="pre"),
            "wide head": dict(n_heads=1, use_ffn=True, residual=True, use_norm=True, norm="pre")}


def train_rung(flags, lr, seed, args, train, dev, val, V):
    gen = seed_everything(seed)
    lm = BlockLM(V, CONTEXT, args.d_model, args.layers, **flags)
    train_lm(lm, train, val, steps=args.steps, batch_size=BATCH, context_len=CONTEXT, lr=lr, warmup=args.warmup,
             grad_clip=1.0, eval_batches=1, generator=gen, progress=False)
    bits = lambda data: nats_to_bits(evaluate_lm(lm, data, 64, CONTEXT, args.eval_batches,
                                                 generator=torch.Generator().manual_seed(1234)))
    x, _ = get_batch(val, 64, CONTEXT, torch.Generator().manual_seed(1234))
    with torch.no_grad():
        stream = lm(x, return_stream=True)[1]          # the residual stream after the embeddings and each block
    rms = [round(h.pow(2).mean().sqrt().item(), 4) for h in stream]
    return dict(params=sum(p.numel() for p in lm.parameters()), dev_bpc=round(bits(dev), 4),
                val_bpc=round(bits(val), 4)), rms


def ladder(args, train, dev, val, V):
    rows, stream = [], []
    for rung, flags in rungs(args.heads).items():
        first = {lr: train_rung(flags, lr, args.seeds[0], args, train, dev, val, V) for lr in args.lrs}
        best = min(first, key=lambda lr: first[lr][0]["dev_bpc"])     # the dev split chooses, never validation
        runs = [(lr, args.seeds[0], first[lr]) for lr in args.lrs]
        runs += [(best, s, train_rung(flags, best, s, args, train, dev, val, V)) for s in args.seeds[1:]]
        for lr, seed, (row, rms) in runs:
            rows.append(dict(rung=rung, lr=lr, seed=seed, chosen=int(lr == best), **row))
            if lr == best:
                stream += [dict(rung=rung, seed=seed, layer=i, rms=v) for i, v in enumerate(rms)]
        first = {lr: r[0] for lr, r in first.items()}
        print(f"{rung:12s} dev by lr: " + ", ".join(f"{lr:g}: {r['dev_bpc']:.3f}" for lr, r in first.items())
              + f" -> {best:g}; val " + " ".join(f"{r['val_bpc']:.3f}" for r in rows if r["rung"] == rung
                                                  and r["chosen"]), flush=True)
    return rows, stream


WARM_RUNS = {"Post-Norm, no warmup": ("post", False), "Post-Norm, warmup": ("post", True),
             "Pre-Norm, no warmup": ("pre", False), "no LayerNorm, no warmup": (None, False)}


def warmup(args, train, val, V):
    rows = []
    for lr in args.warm_lrs:
        for run, (norm, warm) in WARM_RUNS.items():
            for seed in args.seeds:
                gen = seed_everything(seed)
                flags = dict(norm=norm) if norm else dict(use_norm=False)
                lm = BlockLM(V, CONTEXT, args.d_model, args.warm_layers, args.heads, **flags)
                hist = train_lm(lm, train, val, steps=args.warm_steps, batch_size=BATCH, context_len=CONTEXT, lr=lr,
                                warmup=args.warm_warmup if warm else 0, grad_clip=1.0,
                                eval_every=max(1, args.warm_steps // 10), eval_batches=max(1, args.eval_batches // 2),
                                generator=gen, progress=False)
                rows += [dict(run=run, lr=lr, seed=seed, step=s, val_bpc=round(nats_to_bits(v), 4))
                         for s, v in hist.val]
            print(f"lr {lr:g} {run:24s} final val " + " ".join(
                f"{r['val_bpc']:.3f}" for r in rows if r["run"] == run and r["lr"] == lr
                and r["step"] == hist.val[-1][0]), flush=True)
    return rows


@torch.no_grad()
def copy_accuracy(lm, n=2000, seed=10_000):
    x, y, copy = repeat_batch(n, CONTEXT, 32, 4, 10, generator=torch.Generator().manual_seed(seed))
    return (lm(x).argmax(-1) == y)[copy].float().mean().item()


def composition(args):
    rows = []
    for layers in (1, 2):
        for seed in args.seeds:
            seed_everything(seed)
            gen = torch.Generator().manual_seed(seed)
            lm = BlockLM(32, CONTEXT, args.d_model, layers, args.heads)

            def loss_fn(m, batch):
                x, y, copy = batch
                return F.cross_entropy(m(x)[copy], y[copy])

            hist = fit(lm, lambda: repeat_batch(BATCH, CONTEXT, 32, 4, 10, generator=gen), loss_fn=loss_fn,
                       optimizer=build_optimizer(lm, "adamw", lr=args.copy_lr), steps=args.copy_steps,
                       warmup=args.warmup, grad_clip=1.0, eval_fn=copy_accuracy,
                       eval_every=max(1, args.copy_steps // 10), progress=False)
            rows += [dict(layers=layers, seed=seed, step=s, accuracy=round(a, 4)) for s, a in hist.val]
        print(f"{layers} layer(s): final copy accuracy " + " ".join(
            f"{r['accuracy']:.3f}" for r in rows if r["layers"] == layers and r["step"] == hist.val[-1][0]),
            flush=True)
    return rows


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS, eval_batches=20)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--lrs", type=float, nargs="+", default=[3e-3, 1e-2])
    p.add_argument("--dev-chars", type=int, default=50_000)
    p.add_argument("--warm-layers", type=int, default=6)
    p.add_argument("--warm-lrs", type=float, nargs="+", default=[1e-2, 2e-2])
    p.add_argument("--warm-steps", type=int, default=250)
    p.add_argument("--warm-warmup", type=int, default=60)
    p.add_argument("--copy-steps", type=int, default=800)
    p.add_argument("--copy-lr", type=float, default=3e-3)
    p.add_argument("--parts", nargs="+", default=["ladder", "warmup", "copy"], choices=["ladder", "warmup", "copy"])
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.quick:
        args.seeds, args.steps, args.warm_steps, args.copy_steps, args.eval_batches = [0, 1], 3, 3, 3, 1
        args.layers, args.warm_layers = 2, 2
    torch.set_num_threads(args.threads)
    train_all, val, tok = char_corpus()
    train, dev = train_all[:-args.dev_chars], train_all[-args.dev_chars:]

    lad, stream = ladder(args, train, dev, val, tok.vocab_size) if "ladder" in args.parts else ([], [])
    tables = {"block_ladder.csv": (FIELDS, lad),
              "block_ladder_warmup.csv": (WARM_FIELDS, warmup(args, train, val, tok.vocab_size)
                                          if "warmup" in args.parts else []),
              "block_ladder_copy.csv": (COPY_FIELDS, composition(args) if "copy" in args.parts else []),
              "block_ladder_stream.csv": (STREAM_FIELDS, stream)}
    print(f"{time.perf_counter() - started:.0f} s", flush=True)
    if not args.quick:
        record("block_ladder", tables, None, args, args.seeds, started, __file__, argv)
    mean = lambda v: sum(v) / max(1, len(v))
    warm, cop = tables["block_ladder_warmup.csv"][1], tables["block_ladder_copy.csv"][1]
    last_warm = max((r["step"] for r in warm), default=0)
    last_copy = max((r["step"] for r in cop), default=0)
    print(" ".join(
        [f"ladder:{k.replace(' ', '_')}={mean([r['val_bpc'] for r in lad if r['rung'] == k and r['chosen']]):.3f}"
         for k in rungs(args.heads)]
        + [f"warm:{k.split(',')[0].replace(' ', '_')}{'+w' if w else ''}@{lr:g}="
           f"{mean([r['val_bpc'] for r in warm if r['run'] == k and r['lr'] == lr and r['step'] == last_warm]):.3f}"
           for lr in args.warm_lrs for k, (_, w) in WARM_RUNS.items()]
        + [f"copy:{n}={mean([r['accuracy'] for r in cop if r['layers'] == n and r['step'] == last_copy]):.3f}"
           for n in (1, 2)]))


if __name__ == "__main__":
    main()
