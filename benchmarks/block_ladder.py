#!/usr/bin/env python3
"""Chapter 6's ladder at two layers, as the chapter trains it live, and the warmup test at six (recorded, 3 seeds each).

    python benchmarks/block_ladder.py            # the recorded result (about 25 minutes of one idle thread)
    python benchmarks/block_ladder.py --quick    # a smoke test of the harness, writes nothing

Two experiments, each with seeds 0, 1, 2 (--seeds), on one thread:

1. The ladder (book/results/block_ladder.csv). book.blocks.BlockLM with --layers blocks of width --d-model on the
   book's characters (32-character windows, batches of 32, --steps steps of AdamW with --warmup warmup steps and
   a cosine decay to a tenth, gradient clipping at 1): one head -> multi-head (--heads heads, same parameters) ->
   + FFN -> + residual -> + LayerNorm (Pre-Norm, the full block), and beside it the full block with ONE head of
   width d_model ("wide head": the same parameters as the full block). Equal tuning effort: every rung trains at
   every peak rate of --lrs (default 1e-3 to 1e-1) with every seed; the chapter keeps, for each rung, the
   rate with the lowest mean validation bits/char (chosen on the windows it reports: the same optimism for every
   rung) and says when that rate sits at the edge of the sweep. Rows: rung, lr, seed, params, validation
   bits/char (--eval-batches x 64 windows). block_ladder_stream.csv: the RMS of the residual stream after the
   embeddings and after each block (64 validation windows), for every run.
2. Warmup (block_ladder_warmup.csv). A --warm-layers-deep stack: Post-Norm without warmup, Post-Norm with a
   linear warmup over --warm-warmup steps, Pre-Norm without warmup, each at every peak rate of --warm-lrs (the
   same for all; not tuned: a rate chosen high, where the placement of the norm should matter), --warm-steps
   steps, cosine decay; validation bits/char every --warm-steps / 10 steps.

--parts warmup --warm-lrs R ... --append adds runs at more rates to the recorded warmup table.
--parts ladder / --parts warmup run one experiment each (block_ladder.json, block_ladder_warmup.json record them
separately, so the two can run as two processes). The last line:
    ladder:<rung>=<mean validation bits/char at the rung's best rate> warm:<run>@<lr>=<mean final bits/char>
"""
from __future__ import annotations

import argparse
import time

import torch

from bench_common import ROOT, char_corpus, parser, record
from book.blocks import BlockLM
from book.data import get_batch
from book.train import evaluate_lm, nats_to_bits, train_lm
from book.utils import seed_everything

RESULTS = ROOT / "book" / "results" / "block_ladder.csv"
FIELDS = ["rung", "lr", "seed", "params", "val_bpc"]
WARM_FIELDS = ["run", "lr", "seed", "step", "val_bpc"]
STREAM_FIELDS = ["rung", "lr", "seed", "layer", "rms"]
CONTEXT, BATCH = 32, 32


def rungs(heads: int) -> dict:
    """rung -> TransformerBlock flags (the chapter's LADDER, plus the full block with one wide head)."""
    return {"one head": dict(n_heads=1, use_ffn=False, residual=False, use_norm=False),
            "multi-head": dict(n_heads=heads, use_ffn=False, residual=False, use_norm=False),
            "+ FFN": dict(n_heads=heads, use_ffn=True, residual=False, use_norm=False),
            "+ residual": dict(n_heads=heads, use_ffn=True, residual=True, use_norm=False),
            "+ LayerNorm": dict(n_heads=heads, use_ffn=True, residual=True, use_norm=True, norm="pre"),
            "wide head": dict(n_heads=1, use_ffn=True, residual=True, use_norm=True, norm="pre")}


def train_rung(flags, lr, seed, args, train, val, V):
    gen = seed_everything(seed)
    lm = BlockLM(V, CONTEXT, args.d_model, args.layers, **flags)
    train_lm(lm, train, val, steps=args.steps, batch_size=BATCH, context_len=CONTEXT, lr=lr, warmup=args.warmup,
             grad_clip=1.0, eval_batches=1, generator=gen, progress=False,
             on_nonfinite="continue")   # as recorded: a diverged rung trains on and scores NaN, counted diverged
    val_bpc = nats_to_bits(evaluate_lm(lm, val, 64, CONTEXT, args.eval_batches,
                                       generator=torch.Generator().manual_seed(1234)))
    x, _ = get_batch(val, 64, CONTEXT, torch.Generator().manual_seed(1234))
    with torch.no_grad():
        stream = lm(x, return_stream=True)[1]          # the residual stream after the embeddings and each block
    rms = [round(h.pow(2).mean().sqrt().item(), 4) for h in stream]
    return dict(params=sum(p.numel() for p in lm.parameters()), val_bpc=round(val_bpc, 4)), rms


def ladder(args, train, val, V):
    rows, stream = [], []
    for rung, flags in rungs(args.heads).items():
        for lr in args.lrs:
            for seed in args.seeds:
                row, rms = train_rung(flags, lr, seed, args, train, val, V)
                rows.append(dict(rung=rung, lr=lr, seed=seed, **row))
                stream += [dict(rung=rung, lr=lr, seed=seed, layer=i, rms=v) for i, v in enumerate(rms)]
            print(f"{rung:12s} lr {lr:<6g} val " + " ".join(
                f"{r['val_bpc']:.3f}" for r in rows if r["rung"] == rung and r["lr"] == lr), flush=True)
    return rows, stream


WARM_RUNS = {"Post-Norm, no warmup": ("post", False), "Post-Norm, warmup": ("post", True),
             "Pre-Norm, no warmup": ("pre", False)}


def warmup(args, train, val, V):
    rows = []
    for lr in args.warm_lrs:
        for run, (norm, warm) in WARM_RUNS.items():
            for seed in args.seeds:
                gen = seed_everything(seed)
                lm = BlockLM(V, CONTEXT, args.d_model, args.warm_layers, args.heads, norm=norm)
                hist = train_lm(lm, train, val, steps=args.warm_steps, batch_size=BATCH, context_len=CONTEXT, lr=lr,
                                warmup=args.warm_warmup if warm else 0, grad_clip=1.0,
                                eval_every=max(1, args.warm_steps // 10), eval_batches=max(1, args.eval_batches // 2),
                                generator=gen, progress=False, on_nonfinite="continue")   # as recorded
                rows += [dict(run=run, lr=lr, seed=seed, step=s, val_bpc=round(nats_to_bits(v), 4))
                         for s, v in hist.val]
            print(f"lr {lr:g} {run:24s} final val " + " ".join(
                f"{r['val_bpc']:.3f}" for r in rows if r["run"] == run and r["lr"] == lr
                and r["step"] == hist.val[-1][0]), flush=True)
    return rows


def append_warmup(args, argv) -> None:
    """--append: train the warmup runs at --warm-lrs with the recorded settings and add them to
    book/results/block_ladder_warmup.csv; the provenance keeps the earlier run's under "earlier"."""
    from book.results import provenance, read_rows

    started = time.perf_counter()
    earlier, old = provenance("block_ladder_warmup"), read_rows("block_ladder_warmup")
    for name in ("seeds", "d_model", "heads", "warm_layers", "warm_steps", "warm_warmup", "eval_batches", "threads"):
        setattr(args, name, earlier["args"][name])
    if set(args.warm_lrs) & {float(r["lr"]) for r in old}:
        raise SystemExit(f"--warm-lrs {args.warm_lrs}: some are recorded already")
    if args.quick:
        args.seeds, args.warm_steps, args.eval_batches, args.warm_layers = [0], 3, 1, 2
    torch.set_num_threads(args.threads)
    train, val, tok = char_corpus()
    rows = warmup(args, train, val, tok.vocab_size)
    if not args.quick:
        out = argparse.Namespace(**{**vars(args), "out": args.out.with_name("block_ladder_warmup.csv")})
        record("block_ladder_warmup", old + rows, WARM_FIELDS, out, args.seeds, started, __file__, argv,
               extra={"warm_lrs": sorted({float(r["lr"]) for r in old} | set(args.warm_lrs)), "earlier": earlier})


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS, eval_batches=20)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--layers", type=int, default=2)   # the live ladder's depth: deeper, its first rungs stall
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--steps", type=int, default=800)   # the live ladder's steps
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3, 1e-2, 3e-2, 1e-1])
    p.add_argument("--warm-layers", type=int, default=6)
    p.add_argument("--warm-lrs", type=float, nargs="+", default=[2e-2])
    p.add_argument("--warm-steps", type=int, default=200)
    p.add_argument("--warm-warmup", type=int, default=50)
    p.add_argument("--parts", nargs="+", default=["ladder", "warmup"], choices=["ladder", "warmup"])
    p.add_argument("--append", action="store_true",
                   help="warmup only: add the runs at --warm-lrs to the recorded warmup table (the recorded settings)")
    args = p.parse_args(argv)
    if args.append:
        return append_warmup(args, argv)
    started = time.perf_counter()
    if args.quick:
        args.seeds, args.steps, args.warm_steps, args.eval_batches, args.lrs = [0, 1], 3, 3, 1, args.lrs[:2]
        args.layers, args.warm_layers = 2, 2
    torch.set_num_threads(args.threads)
    train, val, tok = char_corpus()

    lad, stream = ladder(args, train, val, tok.vocab_size) if "ladder" in args.parts else ([], [])
    warm = warmup(args, train, val, tok.vocab_size) if "warmup" in args.parts else []
    print(f"{time.perf_counter() - started:.0f} s", flush=True)
    if not args.quick and "ladder" in args.parts:
        record("block_ladder", {"block_ladder.csv": (FIELDS, lad), "block_ladder_stream.csv": (STREAM_FIELDS, stream)},
               None, args, args.seeds, started, __file__, argv)
    if not args.quick and "warmup" in args.parts:       # its own provenance: the parts may run as two processes
        out = argparse.Namespace(**{**vars(args), "out": args.out.with_name("block_ladder_warmup.csv")})
        record("block_ladder_warmup", warm, WARM_FIELDS, out, args.seeds, started, __file__, argv)
    mean = lambda v: sum(v) / max(1, len(v))
    bpc = lambda rung, lr: [r["val_bpc"] for r in lad if r["rung"] == rung and r["lr"] == lr]
    last_warm = max((r["step"] for r in warm), default=0)
    print(" ".join(
        [f"ladder:{k.replace(' ', '_')}={min(mean(bpc(k, lr)) for lr in args.lrs):.3f}"
         for k in rungs(args.heads) if lad]
        + [f"warm:{k.split(',')[0].replace(' ', '_')}{'+w' if w else ''}@{lr:g}="
           f"{mean([r['val_bpc'] for r in warm if r['run'] == k and r['lr'] == lr and r['step'] == last_warm]):.3f}"
           for lr in args.warm_lrs for k, (_, w) in WARM_RUNS.items()]))


if __name__ == "__main__":
    main()
