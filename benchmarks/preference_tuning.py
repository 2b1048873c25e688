#!/usr/bin/env python3
"""DPO after chapter 9's fine-tuning, against more fine-tuning on the right answers (recorded, 3 seeds). Chapter 9.

    python benchmarks/preference_tuning.py          # the recorded result (about 25 minutes of one idle thread)
    python benchmarks/preference_tuning.py --quick  # a smoke test of the harness, writes nothing

The model is chapter 9's: its GPT (book.pretrain.family_configs, width 96, 2 layers, RoPE) pre-trained for 500
steps and fine-tuned for 300 (book.chapters.ch09.finetune, lr 1e-3) on both kinds of question, as the chapter trains
it; each seed of --seeds trains its own (initialisation and batches; the chapter's is seed 0), so the seeds show how
much the outcome depends on the model DPO starts from. Then, from each, on the "first letter?" questions only (the
kind it still gets wrong):

- DPO (ch09.preference_tune): triples from every training question, (prompt, the right letter, the fine-tuned
  model's own likeliest wrong letter) (ch09.preference_pairs); --steps steps of batches of 32 triples at every rate
  of --lrs and every beta of --betas;
- the control: ch09.finetune on the same questions with their right answers, --steps steps at every rate of --lrs.

Both start from the seed's fine-tuned model, with the seed's batches. Scored on every held-out "first letter?"
question (ch09.first_char_accuracy), on the held-out "ends a sentence?" questions (does the tuning break the other
skill?), and on the held-out triples: the mean log-probability margin, log p(right) - log p(wrong letter), and how
much each of the two moved from the fine-tuned model's.

Writes book/results/preference_tuning.csv (method, lr, beta, seed, first, ends, margin, d_chosen, d_rejected,
seconds; the rows "sft" are each seed's starting model) and its provenance. The last line:
    sft=<first-letter accuracy> dpo=<best mean> more_sft=<best mean>
"""
from __future__ import annotations

import copy
import time

import torch

from bench_common import ROOT, parser, record
from book.chapters.ch09 import (answer_logp, finetune, first_char_accuracy, instruction_pairs, preference_pairs,
                                preference_tune)
from book.data import load_shakespeare, shakespeare_split
from book.objectives import PretrainVocab
from book.pretrain import build, family_configs, pretrain
from book.tokenizers import CharTokenizer
from book.utils import seed_everything

RESULTS = ROOT / "book" / "results" / "preference_tuning.csv"
FIELDS = ["method", "lr", "beta", "seed", "first", "ends", "margin", "d_chosen", "d_rejected", "seconds"]
CTX, BATCH, WIDTH = 64, 32, 96                     # chapter 9's window, batch and CPU width


def chapter_model(steps: int, sft_steps: int, seed: int):
    """Chapter 9's fine-tuned GPT, trained as the chapter trains it, with `seed` for the initialisation and both
    runs' batches (the chapter's is seed 0); with the tokenizer, vocabulary and texts."""
    text = load_shakespeare()
    train_text, val_text = shakespeare_split(text)
    tok = CharTokenizer.from_text(text)
    vocab = PretrainVocab(tok.vocab_size, n_sentinels=8)
    seed_everything(seed)
    gpt = build("GPT", family_configs(vocab.size, CTX, WIDTH)["GPT"])
    pretrain(gpt, "gpt", torch.tensor(tok.encode(train_text)), vocab, steps=steps, batch_size=BATCH,
             context_len=CTX, generator=torch.Generator().manual_seed(seed), progress=False)
    finetune(gpt, instruction_pairs(train_text), tok.encode, vocab.pad, steps=sft_steps, batch_size=BATCH, lr=1e-3,
             generator=torch.Generator().manual_seed(seed))
    return gpt, tok, vocab, train_text, val_text


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--lrs", type=float, nargs="+", default=[3e-5, 1e-4, 3e-4, 1e-3])
    p.add_argument("--betas", type=float, nargs="+", default=[0.5, 2.0, 8.0, 32.0])
    args = p.parse_args(argv)
    started = time.perf_counter()
    torch.set_num_threads(args.threads)
    pre_steps, sft_steps = (20, 10) if args.quick else (500, 300)
    if args.quick:
        args.seeds, args.steps, args.lrs, args.betas = [0, 1], 3, args.lrs[:1], args.betas[:1]
    rows = []
    for seed in args.seeds:
        rows += tune_one(seed, pre_steps, sft_steps, args)
    print(f"{time.perf_counter() - started:.0f} s", flush=True)
    if not args.quick:
        record("preference_tuning", rows, FIELDS, args, args.seeds, started, __file__, argv)
    mean = lambda method, lr, beta: sum(r["first"] for r in rows if (r["method"], r["lr"], r["beta"]) ==
                                        (method, lr, beta)) / len(args.seeds)
    top = lambda m: max(mean(m, lr, b) for lr in args.lrs for b in (args.betas if m == "dpo" else [""]))
    print(f"sft={mean('sft', '', ''):.3f} dpo={top('dpo'):.3f} more_sft={top('more sft'):.3f}")


def tune_one(seed: int, pre_steps: int, sft_steps: int, args) -> list:
    """Seed `seed`'s fine-tuned model, then every DPO and every more-SFT setting from it -> its rows."""
    sft, tok, vocab, train_text, val_text = chapter_model(pre_steps, sft_steps, seed)
    kind = lambda pairs, k: [q for q in pairs if q[0].startswith(f"Q: {k}")]
    train_q, val_q = kind(instruction_pairs(train_text), "first letter"), kind(instruction_pairs(val_text), "first")
    ends_q = kind(instruction_pairs(val_text), "ends a sentence")
    if args.quick:
        train_q, val_q, ends_q = train_q[:64], val_q[:64], ends_q[:64]
    enc, pad, nc = tok.encode, vocab.pad, vocab.n_chars
    triples = preference_pairs(sft, train_q, enc, tok.decode, pad, nc)
    held = preference_pairs(sft, val_q, enc, tok.decode, pad, nc)  # the wrong letter the fine-tuned model favours

    @torch.no_grad()
    def logps(m):
        return (answer_logp(m, [(q, c) for q, c, _ in held], enc, pad),
                answer_logp(m, [(q, r) for q, _, r in held], enc, pad))

    ref_c, ref_r = logps(sft)

    def answers_ends(m):   # "yes\n" or "no\n": the likelier whole answer
        yes = answer_logp(m, [(q, "yes\n") for q, _ in ends_q], enc, pad)
        no = answer_logp(m, [(q, "no\n") for q, _ in ends_q], enc, pad)
        return [(q, "yes\n" if y > n else "no\n") for (q, _), y, n in zip(ends_q, yes, no)]

    def score(m, method, lr, beta, seconds):
        c, r = logps(m)
        ends = sum(a == b for a, b in zip(answers_ends(m), ends_q)) / len(ends_q)
        return dict(method=method, lr=lr, beta=beta, seed=seed,
                    first=round(first_char_accuracy(m, val_q, enc, pad, nc), 4), ends=round(ends, 4),
                    margin=round((c - r).mean().item(), 4), d_chosen=round((c - ref_c).mean().item(), 4),
                    d_rejected=round((r - ref_r).mean().item(), 4), seconds=round(seconds, 2))

    rows = [score(sft, "sft", "", "", 0.0)]
    print(f"seed {seed}: fine-tuned model first letter {rows[0]['first']:.3f}, ends {rows[0]['ends']:.3f}, "
          f"margin {rows[0]['margin']:.2f}; {len(triples)} training triples, {len(held)} held out", flush=True)
    for lr in args.lrs:
        for beta in args.betas:
            m = copy.deepcopy(sft)
            h = preference_tune(m, triples, enc, pad, steps=args.steps, beta=beta, lr=lr, batch_size=BATCH,
                                generator=torch.Generator().manual_seed(seed))
            rows.append(score(m, "dpo", lr, beta, h.train_seconds))
        m = copy.deepcopy(sft)
        h = finetune(m, [(q, a) for q, a in train_q], enc, pad, steps=args.steps, batch_size=BATCH, lr=lr,
                     generator=torch.Generator().manual_seed(seed))
        rows.append(score(m, "more sft", lr, "", h.train_seconds))
        print(f"  lr {lr:g}: " + " ".join(f"{r['method']}{'' if r['beta'] == '' else ' beta ' + format(r['beta'], 'g')}"
                                         f" {r['first']:.3f}" for r in rows if r["lr"] == lr), flush=True)
    return rows


if __name__ == "__main__":
    main()
