#!/usr/bin/env python3
"""The book's language models at equal compute: validation bits/char after 15 s, 1 min and 4 min of one CPU thread.

    python benchmarks/budget_leaderboard.py             # the recorded result (about 95 CPU-minutes; 2 workers)
    python benchmarks/budget_leaderboard.py --quick     # a smoke test of the harness, writes nothing

Every neural language model of the book (Chapter 2's LSTM, Chapter 6's block LM, Chapter 7's GPT, Chapter 9's
RoPE GPT, Chapter 10's modern GPT) is trained for each budget in --budgets, in seconds of one CPU thread, with
three seeds. The two count models (the bigram and the strongest count model, Kneser-Ney with n and D tuned on a dev
split) are counted once; their "budget" is their counting time.

Equal compute, reproducibly. A budget is turned into a number of steps: at the start, each model's cost per step is
measured in CPU seconds of this process (time.process_time, one torch thread; other processes on the machine do
not count), and budget x steps-per-second is the step count its schedule is stretched to. So the results do not
depend on the machine's load while the runs train, and the csv keeps each model's measured rate.

Equal tuning effort. Each model keeps its chapter's architecture, batch and context. Every model trains with a
learning-rate warmup (30 steps, or its recipe's) then decays (cosine to a tenth, or Chapter 10's warmup-stable-decay),
gradients clipped at 1.0; the LSTM, which Chapter 2 trained at a constant rate, gets the same warmup and cosine.
The peak rate of every model (all of its groups, Muon's included) is swept over 0.5x, 1x and 2x its chapter's at the
middle budget with seed 0; the best of the three is used for every budget and seed.

Validation: 2,048 fixed windows of each model's own context length (32 for Chapter 6's, 64 for the rest), the
mean over every position (the leaderboard's number), and the loss at each position in the window (a model that
uses long context gains at late positions; the count table's bits do not depend on the position).

The long-context axis: the same recipes (the 1-minute budget, the best rates) trained on text that quotes itself
(book.pretrain.quote_windows: a passage of 16-31 characters appears twice in every 65-character window), three
seeds, then scored on fixed validation windows with a 20-character passage: bits/char on the passage's first
appearance and on its second (from its second character on). Kneser-Ney, scored on the same characters, is the
count model's reference.

Writes book/results/budget_leaderboard.csv (model, chapter, phase, budget_s, seed, lr, steps, steps_per_s, params,
val_bpc), budget_leaderboard_positions.csv (model, budget_s, seed, position, bits) and budget_leaderboard_quote.csv
(model, seed, lr, steps, first_bits, second_bits), with provenance in budget_leaderboard.json. The last line reads
    <model>=<mean val bits/char at the largest budget> ... kn=<bits>
"""
from __future__ import annotations

import dataclasses
import math
import multiprocessing as mp
import time

import torch
import torch.nn.functional as F

from bench_common import ROOT, char_corpus, parser, record
from book import ngram
from book.data import get_batch
from book.gpt import GPT, GPTConfig
from book.optim import build_optimizer, fit
from book.pretrain import quote_windows
from book.rnn import CharRNN
from book.train import COURSE_CPU, MODERN_CPU
from book.utils import count_params

RESULTS = ROOT / "book" / "results" / "budget_leaderboard.csv"
FIELDS = ["model", "chapter", "phase", "budget_s", "seed", "lr", "steps", "steps_per_s", "params", "val_bpc"]
POS_FIELDS = ["model", "budget_s", "seed", "position", "bits"]
QUOTE_FIELDS = ["model", "seed", "lr", "steps", "first_bits", "second_bits"]
LN2 = math.log(2)

# name -> chapter, and how it is built: a GPTRecipe (its own optimiser and schedule), or a model with AdamW
SPECS = {
    "LSTM (ch. 2)": dict(chapter=2, lr=5e-3, batch=32, ctx=64),
    "block LM (ch. 6)": dict(chapter=6, lr=8e-3, batch=32, ctx=32),
    "GPT (ch. 7)": dict(chapter=7, recipe=COURSE_CPU),
    "RoPE GPT (ch. 9)": dict(chapter=9, lr=8e-3, batch=32, ctx=64),
    "modern GPT (ch. 10)": dict(chapter=10, recipe=MODERN_CPU),
}
FACTORS = (0.5, 1.0, 2.0)
QUOTE_MODELS = ("LSTM (ch. 2)", "GPT (ch. 7)")
QUOTE_LEN, EVAL_WINDOWS = 20, 2048


def _model(name: str, V: int):
    spec = SPECS[name]
    if "recipe" in spec:
        return GPT(spec["recipe"].config(V))
    if name.startswith("LSTM"):
        return CharRNN(V, d_emb=32, d_hidden=128, cell="lstm")            # Chapter 2's
    if name.startswith("block"):                                           # Chapter 6's top rung: Pre-Norm blocks
        return GPT(GPTConfig(V, 32, d_model=64, n_heads=4, n_layers=2, tie_weights=False))
    return GPT(GPTConfig(V, 64, d_model=96, n_heads=4, n_layers=2, positions="rope"))   # Chapter 9's


def shape(name: str):
    """(batch size, context length) the model trains on."""
    spec = SPECS[name]
    r = spec.get("recipe")
    return (r.batch_size, r.context_len) if r else (spec["batch"], spec["ctx"])


def base_lr(name: str) -> float:
    spec = SPECS[name]
    return spec["recipe"].lr if "recipe" in spec else spec["lr"]


def _logits(model, x):
    out = model(x)
    return out[0] if isinstance(out, tuple) else out


def _loss(model, batch):
    x, y = batch
    logits = _logits(model, x)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


def train(name: str, V: int, batches, steps: int, factor: float, seed: int):
    """Build `name` with seed `seed` and train it for `steps` steps at `factor` x its chapter's peak rate."""
    torch.manual_seed(seed)
    model = _model(name, V)
    spec = SPECS[name]
    if "recipe" in spec:
        r = spec["recipe"]
        r = dataclasses.replace(r, steps=steps, lr=r.lr * factor, min_lr=r.min_lr * factor,
                                muon_lr=r.muon_lr * factor)
        opt, schedule, warmup, clip = r.make_optimizer(model), r.lr_factor, 0, r.grad_clip
    else:
        opt = build_optimizer(model, "adamw", lr=spec["lr"] * factor, weight_decay=0.01, betas=(0.9, 0.999))
        schedule, warmup, clip = "warmup_cosine", 30, 1.0
    fit(model, batches, loss_fn=_loss, optimizer=opt, steps=steps, schedule=schedule, warmup=warmup,
        min_lr_ratio=0.1, grad_clip=clip, progress=False)
    return model


def steps_per_second(name: str, V: int, train_ids, n: int = 30) -> float:
    """Training steps per CPU second of this process (after 5 warm-up steps)."""
    B, T = shape(name)
    gen = torch.Generator().manual_seed(0)
    batches = lambda: get_batch(train_ids, B, T, gen)
    train(name, V, batches, 5, 1.0, 0)
    start = time.process_time()
    train(name, V, batches, n, 1.0, 0)
    return n / (time.process_time() - start)


@torch.no_grad()
def per_position_bits(model, windows: torch.Tensor) -> torch.Tensor:
    """Mean bits at each position of (N, T + 1) windows: (T,)."""
    model.eval()
    total = 0
    for w in windows.split(256):
        logits = _logits(model, w[:, :-1])
        total = total + F.cross_entropy(logits.transpose(1, 2), w[:, 1:], reduction="none").sum(0)
    return total / len(windows) / LN2


def quote_eval_windows(val_ids: torch.Tensor, n: int, T: int, seed: int = 99):
    """(N, T + 1) validation windows with one QUOTE_LEN-character passage twice; the two start positions."""
    g = torch.Generator().manual_seed(seed)
    x, y = get_batch(val_ids, n, T, g)
    w = torch.cat([x, y[:, -1:]], dim=1)
    p = QUOTE_LEN
    first = torch.randint(7, T + 1 - 2 * p - 4, (n,), generator=g)
    second = first + p + 2 + torch.randint(0, 3, (n,), generator=g)
    src = torch.randint(0, len(val_ids) - p, (n,), generator=g)
    for row, a, b, s in zip(w, first.tolist(), second.tolist(), src.tolist()):
        row[a:a + p] = row[b:b + p] = val_ids[s:s + p]
    return w, first, second


def passage_bits(bits_at, first, second):
    """Mean over windows of bits_at (N, T+1; bits of predicting token j, NaN where unscored) on each passage,
    from its second character on."""
    idx = torch.arange(1, QUOTE_LEN)
    pick = lambda start: bits_at.gather(1, start[:, None] + idx).mean().item()
    return pick(first), pick(second)


@torch.no_grad()
def model_token_bits(model, w):
    """Bits of predicting each token j >= 1 of windows w (N, T+1) -> (N, T+1), column 0 NaN."""
    model.eval()
    out = []
    for chunk in w.split(256):
        logits = _logits(model, chunk[:, :-1])
        out.append(F.cross_entropy(logits.transpose(1, 2), chunk[:, 1:], reduction="none") / LN2)
    bits = torch.cat(out)
    return torch.cat([torch.full((len(w), 1), float("nan")), bits], dim=1)


def kn_token_bits(kn, w):
    n = kn.n
    bits = torch.full(w.shape, float("nan"), dtype=torch.float64)
    for j in range(n - 1, w.shape[1]):
        bits[:, j] = -kn.log_prob(w[:, j - n + 1:j], w[:, j]) / LN2
    return bits


_CORPUS = None


def _corpus():
    global _CORPUS
    if _CORPUS is None:
        _CORPUS = char_corpus()
    return _CORPUS


def _init():
    torch.set_num_threads(1)


def run_job(job: dict) -> dict:
    """One training run: job = model, phase, budget_s, seed, factor, steps, steps_per_s, eval_windows."""
    train_ids, val_ids, tok = _corpus()
    V, name = tok.vocab_size, job["model"]
    B, T = shape(name)
    gen = torch.Generator().manual_seed(1000 + job["seed"])
    if job["phase"] == "quote":
        batches = lambda: (lambda w: (w[:, :-1], w[:, 1:]))(quote_windows(train_ids, B, T, gen, 16, 31))
    else:
        batches = lambda: get_batch(train_ids, B, T, gen)
    t0 = time.process_time()
    model = train(name, V, batches, job["steps"], job["factor"], job["seed"])
    cpu = time.process_time() - t0
    out = dict(job, cpu_s=round(cpu, 1), params=count_params(model), lr=base_lr(name) * job["factor"])
    if job["phase"] == "quote":
        w, first, second = quote_eval_windows(val_ids, job["eval_windows"], T)
        out["first_bits"], out["second_bits"] = passage_bits(model_token_bits(model, w), first, second)
    else:
        g = torch.Generator().manual_seed(1234)
        x, y = get_batch(val_ids, job["eval_windows"], T, g)
        pos = per_position_bits(model, torch.cat([x, y[:, -1:]], dim=1))
        out["positions"], out["val_bpc"] = pos.tolist(), pos.mean().item()
    return out


def count_rows(train_ids, val_ids, V):
    t0 = time.process_time()
    counts = ngram.bigram_counts(train_ids, V)
    bigram_s = time.process_time() - t0
    bigram = ngram.nll_bits(ngram.bigram_log_probs(counts, smoothing=1.0), val_ids)
    t0 = time.process_time()
    best = ngram.strongest_count_model(train_ids, val_ids, V)
    kn_s = time.process_time() - t0
    rows = [dict(model="bigram (counts, ch. 1)", chapter=1, phase="count", budget_s=round(bigram_s, 3), seed="",
                 lr="", steps="", steps_per_s="", params=V * V, val_bpc=round(bigram, 4)),
            dict(model=f"{best['name']} (ch. 1)", chapter=1, phase="count", budget_s=round(kn_s, 2), seed="",
                 lr="", steps="", steps_per_s="", params=best["params"], val_bpc=round(best["bits"], 4))]
    return rows, best


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--budgets", type=float, nargs="+", default=[15, 60, 240], help="CPU seconds per run")
    p.add_argument("--sweep-budget", type=float, default=60, help="the budget the learning rate is tuned at")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--workers", type=int, default=2, help="single-thread training processes in parallel")
    p.add_argument("--models", nargs="+", default=list(SPECS), choices=list(SPECS))
    args = p.parse_args(argv)
    started = time.perf_counter()
    torch.set_num_threads(1)
    eval_windows = EVAL_WINDOWS
    if args.quick:
        args.budgets, args.sweep_budget, args.seeds, eval_windows = [0.2, 0.4], 0.2, [0, 1], 64

    train_ids, val_ids, tok = _corpus()
    V = tok.vocab_size
    rows, best = count_rows(train_ids, val_ids, V)
    rates = {m: steps_per_second(m, V, train_ids, n=4 if args.quick else 30) for m in args.models}
    for m, r in rates.items():
        print(f"  {m:22s} {r:7.1f} steps per CPU second", flush=True)
    steps = lambda m, budget: max(1, round(budget * rates[m]))
    job = lambda m, phase, budget, seed, factor: dict(model=m, phase=phase, budget_s=budget, seed=seed, factor=factor,
                                                      steps=steps(m, budget), steps_per_s=round(rates[m], 2),
                                                      eval_windows=eval_windows)
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.workers, initializer=_init) as pool:
        sweep = [job(m, "sweep", args.sweep_budget, args.seeds[0], f) for m in args.models for f in FACTORS]
        done = pool.map(run_job, sweep, chunksize=1)
        best_factor = {m: min((d for d in done if d["model"] == m), key=lambda d: d["val_bpc"])["factor"]
                       for m in args.models}
        finals = [job(m, "final", b, s, best_factor[m]) for m in args.models for b in args.budgets for s in args.seeds
                  if not (b == args.sweep_budget and s == args.seeds[0])]
        quotes = [job(m, "quote", args.sweep_budget, s, best_factor[m]) for m in QUOTE_MODELS if m in args.models
                  for s in args.seeds]
        finals.sort(key=lambda j: -j["steps"] / j["steps_per_s"])       # the longest first: the pool ends together
        done += pool.map(run_job, finals + quotes, chunksize=1)
    positions, quote_rows = [], []
    for d in done:
        name = SPECS[d["model"]]
        if d["phase"] == "quote":
            quote_rows.append(dict(model=d["model"], seed=d["seed"], lr=d["lr"], steps=d["steps"],
                                   first_bits=round(d["first_bits"], 4), second_bits=round(d["second_bits"], 4)))
            continue
        is_final = d["phase"] == "final" or d["factor"] == best_factor[d["model"]]
        rows.append(dict(model=d["model"], chapter=name["chapter"], phase="final" if is_final else "sweep",
                         budget_s=d["budget_s"], seed=d["seed"], lr=d["lr"], steps=d["steps"],
                         steps_per_s=d["steps_per_s"], params=d["params"], val_bpc=round(d["val_bpc"], 4)))
        if is_final:
            positions += [dict(model=d["model"], budget_s=d["budget_s"], seed=d["seed"], position=i,
                               bits=round(b, 4)) for i, b in enumerate(d["positions"])]
        print(f"  {d['model']:22s} {d['phase']:6s} {d['budget_s']:6g} s seed {d['seed']} x{d['factor']:<4g} "
              f"{d['steps']:6d} steps ({d['cpu_s']:.0f} CPU s) val {d['val_bpc']:.3f}", flush=True)
    # the count model on the quoted passages: the same windows the neural models were scored on
    w, first, second = quote_eval_windows(val_ids, eval_windows, 64)
    kn_first, kn_second = passage_bits(kn_token_bits(best["model"], w).float(), first, second)
    quote_rows.append(dict(model=f"{best['name']} (ch. 1)", seed="", lr="", steps="", first_bits=round(kn_first, 4),
                           second_bits=round(kn_second, 4)))
    for q in quote_rows:
        print(f"  quote: {q['model']:28s} seed {q['seed']!s:2s} first {q['first_bits']:.3f} "
              f"second {q['second_bits']:.3f} bits/char")
    if not args.quick:
        record("budget_leaderboard", {"budget_leaderboard.csv": (FIELDS, rows),
                                      "budget_leaderboard_positions.csv": (POS_FIELDS, positions),
                                      "budget_leaderboard_quote.csv": (QUOTE_FIELDS, quote_rows)},
               None, args, args.seeds, started, __file__, argv,
               extra={"steps_per_cpu_second": {m: round(r, 3) for m, r in rates.items()},
                      "best_lr_factor": best_factor})
    top = max(args.budgets)
    means = {m: sum(r["val_bpc"] for r in rows if r["model"] == m and r["phase"] == "final" and r["budget_s"] == top)
             / len(args.seeds) for m in args.models}
    print(" ".join(f"{m.split(' (')[0].replace(' ', '_')}={v:.4f}" for m, v in means.items())
          + f" kn={best['bits']:.4f} quote_gpt_second="
          + f"{next((q['second_bits'] for q in quote_rows if q['model'] == 'GPT (ch. 7)'), float('nan')):.4f}")


if __name__ == "__main__":
    main()
