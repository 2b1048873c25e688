#!/usr/bin/env python3
"""BERT, GPT and T5 at equal tokens, trained past T5's plateau; and a decoder-only GPT against the encoder-decoder
on Chapter 8's toy translation, at equal parameters. Chapter 9.

    python benchmarks/three_families.py --jobs 2   # the recorded run (about 80 minutes of one idle thread in all)
    python benchmarks/three_families.py --quick    # a smoke test of the harness, writes nothing

Part 1, three families. Chapter 9 trains its BERT, GPT and T5 (book.pretrain.family_configs: within 5 % in
parameters, the chapter's batch of 32 windows of 64 characters, its recipe) for 500 steps, where T5 still sits on
a plateau. Here T5 is trained for --steps steps (the schedule stretched over all of them), with --seeds seeds,
long enough to leave its plateau on every seed (at 2,500 steps one seed of three had not: the only change since is
more steps; no other hyper-parameter changed); BERT and GPT run the first --stop steps of the same schedule (the
same learning rates step by step), which keeps the run within about 80 minutes of one thread. The three families
of one seed read the same windows, so up to step --stop all three have read the same tokens. Every --every steps:
the chapter's fill-in-the-blank test (the middle character of the same 256 validation windows,
book.pretrain.fill_blank; the GPT scores 16 candidates) and, for GPT and T5, the bits/char of each window's last 8
characters (continuation_bits).
No learning-rate sweep for any family: all three at the chapter's 8e-3.

Part 2, decoder-only translation. Chapter 8's encoder-decoder (book.transformer.Transformer, 2 + 2 pre-norm
layers of width 64) against a GPT of the same width reading "source <BOS> target" as one stream
(book.pretrain.StreamTranslator), with the depth that gives it equal parameters (within 5 %). Both are trained by
book.seq2seq.train_seq2seq for --tr-steps steps on the same batches (the same generator), loss on the target
only, Chapter 8's recipe and rate (3e-3) for both, no sweep for either; then greedy decoding on held-out sentences
of every length bucket: exact match and token accuracy.

Writes book/results/three_families.csv (family, seed, step, seconds, fill, cont_bits), three_families_translation.csv
(model, seed, params, bucket, exact, token, seconds) and the provenance three_families.json (bench_common.record).
The last line reads
    guess=<the commonest character's share> t5_leaves=<the step at which each seed's T5 leaves its plateau,
    -1 if never: book.results.left_plateau, the first of two evaluations in a row that fill at least MARGIN
    (5 points) above the guess> fill_last=<each family's mean fill at step --stop>
    encdec_exact=<mean exact match> gpt_exact=<mean exact match>
"""
from __future__ import annotations

import multiprocessing
import time

import torch

from bench_common import ROOT, char_corpus, parser, record
from book.data import get_batch
from book.generate import greedy_translate
from book.gpt import GPT, GPTConfig
from book.objectives import PretrainVocab
from book.pretrain import StreamTranslator, build, continuation_bits, family_configs, fill_blank, pretrain
from book.results import left_plateau
from book.seq2seq import train_seq2seq
from book.tasks import LENGTH_BUCKETS, ToyTranslation, evaluate_translation
from book.transformer import Transformer, TransformerConfig
from book.utils import count_params, seed_everything

RESULTS = ROOT / "book" / "results" / "three_families.csv"
FIELDS = ["family", "seed", "step", "seconds", "fill", "cont_bits"]
TR_FIELDS = ["model", "seed", "params", "bucket", "exact", "token", "seconds"]
CTX, BATCH, POS = 64, 32, 32          # chapter 9's window, batch and blank
MARGIN = 0.05                         # T5 left its plateau: two evaluations in a row this far above the guess
WIDTH = 64                            # chapter 8's encoder-decoder width (CPU size)
DATA = {}                             # the corpus and the validation windows, set in main() (forked jobs share it)


def family_run(job):
    """One family and seed -> its rows: trained for --steps steps, measured every --every steps."""
    args, name, seed = job
    train, vocab, vx, truth = DATA["train"], DATA["vocab"], DATA["vx"], DATA["truth"]
    family = name.lower()
    seed_everything(seed)
    model = build(name, family_configs(vocab.size, CTX)[name])

    def measure(m):
        fill = (fill_blank(m, family, vx, POS, vocab) == truth).float().mean().item()
        return fill, None if family == "bert" else continuation_bits(m, family, vx, CTX - 8, vocab)

    stop = None if family == "t5" else args.stop    # BERT and GPT: the first --stop steps of the same schedule
    hist = pretrain(model, family, train, vocab, steps=args.steps, batch_size=args.batch, context_len=CTX,
                    generator=torch.Generator().manual_seed(seed), progress=False, eval_every=args.every,
                    eval_fn=measure, stop_after=stop)  # the generator: one seed's three families read the same windows
    done = len(hist.train_loss)
    secs = hist.train_seconds / done
    print(f"{name:4s} seed {seed} | {done} steps in {hist.train_seconds:5.0f} s | blanks filled "
          + " ".join(f"{f:.2f}" for _, (f, _) in hist.val), flush=True)
    return [dict(family=name, seed=seed, step=step, seconds=round(step * secs, 1), fill=round(fill, 4),
                 cont_bits="" if cont is None else round(cont, 4)) for step, (fill, cont) in hist.val]


def translators(n_src: int, n_tgt: int):
    """Chapter 8's encoder-decoder and a decoder-only GPT of its width with the depth that equalises parameters
    -> {name: (make model, greedy decoder of a model)}."""
    encdec_cfg = TransformerConfig(n_src, n_tgt, context_len=48, norm="pre", d_model=WIDTH, n_heads=4, n_layers=2,
                                   d_ff=2 * WIDTH)                            # chapter 8's CPU model
    with torch.device("meta"):
        target = count_params(Transformer(encdec_cfg))
        depth = min(range(1, 13), key=lambda n: abs(count_params(GPT(gpt_cfg(n_src + n_tgt, n))) - target))
        gpt_params = count_params(GPT(gpt_cfg(n_src + n_tgt, depth)))
    assert abs(gpt_params / target - 1) <= 0.05, (gpt_params, target)
    return {"encoder-decoder": (lambda: Transformer(encdec_cfg), lambda m: lambda s, n: greedy_translate(m, s, n)),
            "decoder-only": (lambda: StreamTranslator(GPT(gpt_cfg(n_src + n_tgt, depth)), n_src, n_tgt),
                             lambda m: lambda s, n: m.greedy(s, n))}


def translation_run(job):
    """One translator and seed -> its rows: trained for --tr-steps steps, then greedy on every length bucket."""
    args, name, seed = job
    task = ToyTranslation()
    make, decoder = translators(len(task.src_vocab), len(task.tgt_vocab))[name]
    gen = seed_everything(seed)                         # the same batches for both models of a seed
    model = make()
    t0 = time.perf_counter()
    train_seq2seq(model, task, steps=args.tr_steps, lr=3e-3, generator=gen, progress=False)
    secs = time.perf_counter() - t0
    acc = evaluate_translation(decoder(model), task.test_sets(LENGTH_BUCKETS, n_per_bucket=args.tr_test))
    print(f"{name:15s} seed {seed} | {count_params(model):,} parameters | {args.tr_steps} steps in {secs:4.0f} s | "
          "exact " + " ".join(f"{e:.2f}" for e, _ in acc.values()), flush=True)
    return [dict(model=name, seed=seed, params=count_params(model), bucket=f"{lo}-{hi}", exact=round(exact, 4),
                 token=round(token, 4), seconds=round(secs, 1)) for (lo, hi), (exact, token) in acc.items()]


def run(job):
    torch.set_num_threads(job[0].threads)
    return (family_run if job[1] in ("BERT", "GPT", "T5") else translation_run)(job)


def gpt_cfg(vocab_size: int, n_layers: int) -> GPTConfig:
    """The decoder-only translator: chapter 8's width and FFN, RoPE, `n_layers` layers, room for both sentences."""
    return GPTConfig(vocab_size, context_len=80, d_model=WIDTH, n_heads=4, n_layers=n_layers, d_ff=2 * WIDTH,
                     positions="rope")


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--steps", type=int, default=5000, help="T5's training steps: the schedule's length for all three")
    p.add_argument("--stop", type=int, default=1000, help="BERT and GPT run the first --stop steps of that schedule")
    p.add_argument("--batch", type=int, default=BATCH, help="windows per step (the chapter's: 32)")
    p.add_argument("--every", type=int, default=250, help="steps between two measurements of the families")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--tr-steps", type=int, default=400, help="training steps of each translation model")
    p.add_argument("--tr-test", type=int, default=100, help="held-out sentences per length bucket")
    p.add_argument("--jobs", type=int, default=1, help="processes, each with --threads threads (results unchanged)")
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.quick:
        args.steps, args.stop, args.every, args.tr_steps, args.tr_test, args.seeds = 6, 4, 2, 3, 4, args.seeds[:2]

    train, val, tok = char_corpus()
    vocab = PretrainVocab(tok.vocab_size, n_sentinels=8)
    vx, _ = get_batch(val, 256, CTX, torch.Generator().manual_seed(7))      # the chapter's validation windows
    DATA.update(train=train, vocab=vocab, vx=vx, truth=vx[:, POS])
    guess = float((vx[:, POS] == int(torch.bincount(train).argmax())).float().mean())
    jobs = [(args, name, seed) for name in ("T5", "BERT", "GPT", "encoder-decoder", "decoder-only")
            for seed in args.seeds]                     # the longest first
    if args.jobs > 1:       # separate processes (forked: they share DATA); each job's result does not depend on it
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            results = pool.map(run, jobs, chunksize=1)
    else:
        results = [run(job) for job in jobs]
    rows = [r for (_, name, _), rs in zip(jobs, results) if name in ("BERT", "GPT", "T5") for r in rs]
    tr_rows = [r for (_, name, _), rs in zip(jobs, results) if name not in ("BERT", "GPT", "T5") for r in rs]
    if not args.quick:
        record("three_families", {"three_families.csv": (FIELDS, rows),
                                  "three_families_translation.csv": (TR_FIELDS, tr_rows)},
               None, args, args.seeds, started, __file__, argv, extra={"guess": round(guess, 4)})
    leaves = []
    for seed in args.seeds:
        t5 = [r for r in rows if r["family"] == "T5" and r["seed"] == seed]
        step = left_plateau([(r["step"], r["fill"]) for r in t5], guess, MARGIN, 2)
        leaves.append(-1 if step is None else step)
    last = {f: sum(r["fill"] for r in rows if r["family"] == f and r["step"] == args.stop) / len(args.seeds)
            for f in ("BERT", "GPT", "T5")}
    exact = {m: sum(r["exact"] for r in tr_rows if r["model"] == m) / max(1, sum(r["model"] == m for r in tr_rows))
             for m in ("encoder-decoder", "decoder-only")}
    print(f"guess={guess:.4f} t5_leaves={','.join(map(str, leaves))} "
          f"fill_last={','.join(f'{f}:{v:.3f}' for f, v in last.items())} "
          f"encdec_exact={exact['encoder-decoder']:.3f} gpt_exact={exact['decoder-only']:.3f}")


if __name__ == "__main__":
    main()
