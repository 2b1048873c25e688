#!/usr/bin/env python3
"""When does the copying circuit form? Chapter 9's quoter, one change at a time, 3 seeds (exercise 7).

    python benchmarks/quoter_formation.py          # the recorded result (about 12 minutes of one idle thread)
    python benchmarks/quoter_formation.py --quick  # a smoke test of the harness, writes nothing

Chapter 9 trains a GPT (book.pretrain.family_configs, width 96, 2 layers, RoPE) for 500 steps at lr 8e-3 on
book.pretrain.quote_windows with passages of 16 to 31 characters, and finds the step at which the copy of a passage
first saves more than 0.3 bits/char (ch09.copy_test on the chapter's 200 validation rows, 20-character passages).
Here each run changes one thing: "chapter" (as the chapter), "short passages" (6 to 20 characters), "from the plain
GPT" (the chapter's plain GPT, pre-trained 500 steps on ordinary windows, then trained on the quoting windows with
the same recipe), "lr 4e-3" and "lr 1.6e-2" (half and twice the rate). Seeds --seeds: the initialisation and the
windows. The test runs every --every steps.

Writes book/results/quoter_formation.csv (change, seed, step, saving) and its provenance. The last line:
    <change>=<the step the saving first passes 0.3 bits/char, each seed; never: -1>
"""
from __future__ import annotations

import time

import torch

from bench_common import ROOT, char_corpus, parser, record
from book.chapters.ch09 import copy_formed as formed, copy_test, repeated_passages
from book.objectives import PretrainVocab
from book.pretrain import build, family_configs, pretrain, quote_windows
from book.utils import seed_everything

RESULTS = ROOT / "book" / "results" / "quoter_formation.csv"
FIELDS = ["change", "seed", "step", "saving"]
CTX, BATCH, WIDTH, P = 64, 32, 96, 20     # chapter 9's window, batch, width and test passage
CHANGES = {"chapter": dict(lens=(16, 31), lr=8e-3, plain=False),
           "short passages": dict(lens=(6, 20), lr=8e-3, plain=False),
           "from the plain GPT": dict(lens=(16, 31), lr=8e-3, plain=True),
           "lr 4e-3": dict(lens=(16, 31), lr=4e-3, plain=False),
           "lr 1.6e-2": dict(lens=(16, 31), lr=1.6e-2, plain=False)}


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--every", type=int, default=25)
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.quick:
        args.seeds, args.steps, args.every = [0], 4, 2
    torch.set_num_threads(args.threads)
    train_ids, val_ids, tok = char_corpus()
    vocab = PretrainVocab(tok.vocab_size, n_sentinels=8)
    cfg = family_configs(vocab.size, CTX, WIDTH)["GPT"]
    rows = repeated_passages(val_ids, P, 200, torch.tensor(tok.encode("\n\n")), torch.Generator().manual_seed(3))
    test = lambda m: (lambda r: r["once"] - r["twice"])(copy_test(m, rows, P))
    out = []
    for change, c in CHANGES.items():
        for seed in args.seeds:
            seed_everything(seed)
            model = build("GPT", cfg)
            if c["plain"]:                   # the chapter's plain GPT first: ordinary windows, the same recipe
                pretrain(model, "gpt", train_ids, vocab, steps=args.steps, batch_size=BATCH, context_len=CTX,
                         generator=torch.Generator().manual_seed(seed), progress=False)
            lo, hi = c["lens"]
            h = pretrain(model, "gpt", train_ids, vocab, steps=args.steps, batch_size=BATCH, context_len=CTX,
                         lr=c["lr"], generator=torch.Generator().manual_seed(seed), eval_fn=test,
                         eval_every=args.every, progress=False,
                         windows_fn=lambda g, lo=lo, hi=hi: quote_windows(train_ids, BATCH, CTX, g, lo, hi))
            out += [dict(change=change, seed=seed, step=s, saving=round(d, 4)) for s, d in h.val]
            print(f"{change:20s} seed {seed}: formed at {formed(h.val)}, final saving {h.val[-1][1]:+.2f}",
                  flush=True)
    print(f"{time.perf_counter() - started:.0f} s", flush=True)
    if not args.quick:
        record("quoter_formation", out, FIELDS, args, args.seeds, started, __file__, argv)
    curve = lambda ch, s: [(r["step"], r["saving"]) for r in out if r["change"] == ch and r["seed"] == s]
    print(" ".join(f"{ch.replace(' ', '_')}=" + ",".join(str(formed(curve(ch, s)) or -1) for s in args.seeds)
                   for ch in CHANGES))


if __name__ == "__main__":
    main()
