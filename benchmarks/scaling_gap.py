"""Why the long runs broke the fit: the modern GPT's training and validation bits at two budgets. Chapter 10.

    python benchmarks/scaling_gap.py                      # 480 and 1440 CPU seconds, seed 0 (about 32 CPU-minutes)
    python benchmarks/scaling_gap.py --quick              # tiny runs to test the harness; writes nothing

benchmarks/scaling_crossing.py's long runs (1440 CPU seconds) ended *worse* on validation than its 480-second runs.
This script retrains the modern GPT exactly as they did (the same rule: budget_leaderboard's recorded steps per CPU
second and best rate factor, the same batches and seed) at both budgets and scores each final model on the
validation windows the fit used and on as many windows drawn the same way from the *training* text. If the training
bits keep falling while the validation bits rise, the model is learning the training text by heart (overfitting),
not failing to optimise. It also counts the epochs: how many times the run went through the training text.

Writes book/results/scaling_gap.csv (model, budget_s, seed, steps, epochs, cpu_s, train_bpc, val_bpc) and its
provenance. The last line: gap: <budget>=<train bits>/<val bits> ...
"""
from __future__ import annotations

import time

import torch

import budget_leaderboard as bl
import scaling_crossing as sc
from bench_common import ROOT, parser, record
from book.data import get_batch

RESULTS = ROOT / "book" / "results" / "scaling_gap.csv"
FIELDS = ["model", "budget_s", "seed", "steps", "epochs", "cpu_s", "train_bpc", "val_bpc"]


def bits_on(model, ids, windows: int, T: int) -> float:
    """Mean bits per character of `model` on `windows` windows of `ids`, drawn as the leaderboard draws its
    validation windows (generator seed 1234)."""
    x, y = get_batch(ids, windows, T, torch.Generator().manual_seed(1234))
    return bl.per_position_bits(model, torch.cat([x, y[:, -1:]], dim=1)).mean().item()


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--model", default=sc.MODELS[0], choices=sc.MODELS)
    p.add_argument("--budgets", type=float, nargs="+", default=[480, 1440])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = p.parse_args(argv)
    started = time.perf_counter()
    torch.set_num_threads(1)
    train_ids, val_ids, tok = bl._corpus()
    windows = 64 if args.quick else bl.EVAL_WINDOWS
    if args.quick:
        args.budgets, args.seeds = [0.3, 0.6], [0]
    rates, factors = sc.leaderboard_rule()
    B, T = bl.shape(args.model)
    rows = []
    for seed in args.seeds:
        for b in args.budgets:
            steps = max(1, round(b * rates[args.model]))
            gen = torch.Generator().manual_seed(1000 + seed)              # run_job's batches, exactly
            t0 = time.process_time()
            model = bl.train(args.model, tok.vocab_size, lambda g=gen: get_batch(train_ids, B, T, g), steps,
                             factors[args.model], seed)
            cpu = time.process_time() - t0
            row = dict(model=args.model, budget_s=b, seed=seed, steps=steps,
                       epochs=round(steps * B * T / len(train_ids), 2), cpu_s=round(cpu, 1),
                       train_bpc=round(bits_on(model, train_ids, windows, T), 4),
                       val_bpc=round(bits_on(model, val_ids, windows, T), 4))
            rows.append(row)
            print(f"  {args.model} {b:g} s seed {seed}: {steps} steps, {row['epochs']} epochs, "
                  f"train {row['train_bpc']:.4f} val {row['val_bpc']:.4f} ({cpu:.0f} CPU s)", flush=True)
    if not args.quick:
        record("scaling_gap", rows, FIELDS, args, args.seeds, started, __file__, argv)
    print("gap: " + " ".join(f"{r['budget_s']:g}={r['train_bpc']:.4f}/{r['val_bpc']:.4f}" for r in rows))


if __name__ == "__main__":
    main()
