#!/usr/bin/env python3
"""Equal compute: Chapter 2's char LSTM against Chapter 7's GPT, trained for the same seconds. Chapter 7.

    python benchmarks/lstm_vs_gpt.py            # the comparison (about 6 minutes on 2 CPU cores)
    python benchmarks/lstm_vs_gpt.py --quick    # a smoke test of the harness, no claims

The GPT is the course recipe (book.train.COURSE_CPU, its cosine stretched to --gpt-steps); the LSTM is
Chapter 2's (book.rnn.CharRNN: 32-dim embedding, 128 LSTM units, AdamW at a constant 5e-3 as
book.train.train_lm builds it, batches of 32 windows of 64 characters). Both train with book.train.fit. They
train in turns in one process: the GPT runs a chunk of steps, then the
LSTM runs until its own training clock has caught up with the GPT's. So both get the same training seconds
under the same machine load; the clock runs only during training steps. After every turn both are evaluated
(untimed) on the same fixed validation windows.

The results are written to book/results/lstm_vs_gpt.csv (seconds, steps and validation bits/char of both,
one row per turn), so that Chapter 7 can plot them wherever the package is installed, and their provenance to
lstm_vs_gpt.json (bench_common.record). The last line reads
    seconds=<...> gpt_bpc=<...> lstm_bpc=<...> gpt_steps=<...> lstm_steps=<...>
"""
from __future__ import annotations

import dataclasses
import time

import torch

from bench_common import ROOT, char_corpus, parser, record
from book.data import get_batch
from book.optim import build_optimizer
from book.rnn import CharRNN
from book.train import COURSE_CPU, History, RecipeRun, evaluate_lm, fit, nats_to_bits

RESULTS = ROOT / "book" / "results" / "lstm_vs_gpt.csv"
FIELDS = ["seconds", "gpt_steps", "gpt_bpc", "lstm_steps", "lstm_bpc"]


class LSTMRun:
    """Chapter 2's char LSTM, trained a step at a time with its own clock (training steps only)."""

    def __init__(self, vocab: int, train: torch.Tensor, seed: int):
        torch.manual_seed(seed)
        self.model = CharRNN(vocab, d_emb=32, d_hidden=128, cell="lstm")
        self.opt = build_optimizer(self.model, lr=5e-3, weight_decay=0.01, betas=(0.9, 0.999))  # train_lm's
        self.train, self.gen = train, torch.Generator().manual_seed(seed)
        self.history = History()            # its steps and training seconds

    def advance_to(self, seconds: float) -> None:
        """Train at a constant rate until the LSTM's training clock reaches `seconds`."""
        spent = self.history.train_seconds
        if spent < seconds:
            fit(self.model, lambda: get_batch(self.train, 32, 64, self.gen), optimizer=self.opt,
                time_budget=seconds - spent, schedule="constant", history=self.history, progress=False)


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--gpt-steps", type=int, default=1500, help="the GPT's schedule length (Chapter 7's on a CPU)")
    p.add_argument("--chunk", type=int, default=50, help="GPT steps per turn")
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.quick:
        args.gpt_steps, args.chunk, args.eval_batches = 6, 3, 1
    torch.set_num_threads(args.threads)

    train, val, tok = char_corpus()
    recipe = dataclasses.replace(COURSE_CPU, steps=args.gpt_steps)
    gpt = RecipeRun(recipe, tok.vocab_size, train, seed=args.seed)
    lstm = LSTMRun(tok.vocab_size, train, seed=args.seed)

    def val_bpc(model, context_len):
        return nats_to_bits(evaluate_lm(model, val, 64, context_len, args.eval_batches,
                                        generator=torch.Generator().manual_seed(1234)))

    rows = []
    while not gpt.done:
        gpt.advance(args.chunk)
        lstm.advance_to(gpt.train_s)
        row = dict(seconds=round(gpt.train_s, 2), gpt_steps=gpt.step, gpt_bpc=round(val_bpc(gpt.model, 64), 4),
                   lstm_steps=lstm.history.steps, lstm_bpc=round(val_bpc(lstm.model, 64), 4))
        rows.append(row)
        print(f"  {row['seconds']:7.1f} s | GPT step {row['gpt_steps']:5d} val {row['gpt_bpc']:.3f} bits/char"
              f" | LSTM step {row['lstm_steps']:5d} val {row['lstm_bpc']:.3f}"
              f" (LSTM clock {lstm.history.train_seconds:.1f} s)",
              flush=True)
    if not args.quick:
        record("lstm_vs_gpt", rows, FIELDS, args, [args.seed, 1234], started, __file__, argv)
    last = rows[-1]
    print(f"seconds={last['seconds']:.2f} gpt_bpc={last['gpt_bpc']:.4f} lstm_bpc={last['lstm_bpc']:.4f} "
          f"gpt_steps={last['gpt_steps']} lstm_steps={last['lstm_steps']}")


if __name__ == "__main__":
    main()
