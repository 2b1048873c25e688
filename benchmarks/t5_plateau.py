#!/usr/bin/env python3
"""How long T5's span corruption sits on its plateau: chapter 9's BERT and T5, trained many times longer. Chapter 9.

    python benchmarks/t5_plateau.py            # the recorded run (about 20 minutes on 2 CPU cores)
    python benchmarks/t5_plateau.py --quick    # a smoke test of the harness, no claims

In chapter 9, after 500 steps, T5 fills a one-character blank no better than guessing the commonest character,
while BERT of the same size fills about half. Is T5 broken, or slow? This trains the chapter's two models
(book.pretrain.family_configs, the chapter's batch, window and recipe) for --steps steps, with the schedule
stretched over all of them, and measures the chapter's test every --every steps: the blank in the middle of
the same 256 validation windows (book.pretrain.fill_blank).

Writes book/results/t5_plateau.csv: model, step, seconds (training steps only), fill (share of blanks filled),
and its provenance t5_plateau.json (bench_common.record).
The last line reads
    t5_first_above=<first step at which T5 beats the baseline by 5 points, or -1> t5_last=<fill> bert_last=<fill>
"""
from __future__ import annotations

import time

import torch

from bench_common import ROOT, char_corpus, parser, record
from book.data import get_batch
from book.objectives import PretrainVocab
from book.pretrain import build, family_configs, fill_blank, pretrain
from book.utils import seed_everything

RESULTS = ROOT / "book" / "results" / "t5_plateau.csv"
FIELDS = ["model", "step", "seconds", "fill"]
CTX, BATCH, POS = 64, 32, 32          # chapter 9's window, batch and blank


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--steps", type=int, default=8000, help="training steps of each model (the schedule's length)")
    p.add_argument("--every", type=int, default=100, help="steps between two measurements")
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.quick:
        args.steps, args.every = 4, 2
    torch.set_num_threads(args.threads)

    train, val, tok = char_corpus()
    vocab = PretrainVocab(tok.vocab_size, n_sentinels=8)
    vx, _ = get_batch(val, 256, CTX, torch.Generator().manual_seed(7))      # the chapter's validation windows
    truth = vx[:, POS]
    baseline = (truth == int(torch.bincount(train).argmax())).float().mean().item()
    configs = family_configs(vocab.size, CTX)
    rows = []
    for name, family in [("BERT", "bert"), ("T5", "t5")]:
        seed_everything(0)
        model = build(name, configs[name])
        t0 = time.perf_counter()
        hist = pretrain(model, family, train, vocab, steps=args.steps, batch_size=BATCH, context_len=CTX,
                        generator=torch.Generator().manual_seed(0), progress=False, eval_every=args.every,
                        eval_fn=lambda m, f=family: (fill_blank(m, f, vx, POS, vocab) == truth).float().mean().item())
        secs = hist.train_seconds / args.steps
        for step, fill in hist.val:
            rows.append(dict(model=name, step=step, seconds=round(step * secs, 1), fill=round(fill, 4)))
            print(f"{name:4s} step {step:5d} | blanks filled {fill:6.1%}", flush=True)
        print(f"{name}: {args.steps} steps in {time.perf_counter() - t0:.0f} s", flush=True)
    if not args.quick:
        record("t5_plateau", rows, FIELDS, args, [0, 7], started, __file__, argv)
    t5 = [r for r in rows if r["model"] == "T5"]
    first = next((r["step"] for r in t5 if r["fill"] >= baseline + 0.05), -1)
    bert_last = [r for r in rows if r["model"] == "BERT"][-1]["fill"]
    print(f"baseline={baseline:.4f} t5_first_above={first} t5_last={t5[-1]['fill']:.4f} bert_last={bert_last:.4f}")


if __name__ == "__main__":
    main()
