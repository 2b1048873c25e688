#!/usr/bin/env python3
"""Does a second core help? The RNN loop, nn.RNN and two attentions timed at 1 and 2 threads. Chapter 4.

    python benchmarks/parallel_threads.py                 # the measurement (a few minutes on an idle 2-core CPU)
    python benchmarks/parallel_threads.py --device cuda   # the same, plus a GPU column (on a GPU machine)
    python benchmarks/parallel_threads.py --quick         # a smoke test of the harness, no claims

Chapter 4 counts the steps that must wait: Chapter 2's RNN runs T of them, one after another; self-attention a fixed
few, each as wide as T x T. Counting says what a second core *could* do; this measures what it does. Four
computations of one sequence (batch 1, width d = 64), each as Chapter 4 times them:

- "RNN loop": Chapter 2's book.rnn.RNN, a Python loop over the T steps;
- "nn.RNN": PyTorch's nn.RNN, the same recurrence with the loop in C++;
- "attention": the Q/K/V projections, then book.attention.scaled_dot_product_attention (the teaching version:
  scores, softmax, weighted values, written out);
- "fused": the same projections, then F.scaled_dot_product_attention (PyTorch's fused kernel).

For every length T and every repeat, all thread counts are measured in turn (their order alternating between
repeats), and within a thread count the four computations take turns (book.timing.time_in_turns, on
torch.utils.benchmark's clock), so a busy spell on the machine falls on every configuration alike. A repeat's
reading is the median of its turns; the table keeps every repeat, so the chapter can show the spread.

Timings mean something only on an otherwise idle machine with at least as many free cores as the largest thread
count: run it on one. Writes book/results/parallel_threads.csv (one row per computation, T, device, thread count and
repeat: seconds) and its provenance parallel_threads.json (bench_common.record; CPU model, cores, threads), or
parallel_threads_cuda.csv/.json with --device cuda. The last line reads
    T=<largest T> loop_2v1=<...> nn_rnn_2v1=<...> attention_2v1=<...> fused_2v1=<...>
each the median time at 2 threads divided by the median at 1 (below 1: the second core helped).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench_common import ROOT, record
from book.attention import scaled_dot_product_attention
from book.rnn import RNN
from book.timing import time_in_turns

RESULTS = ROOT / "book" / "results" / "parallel_threads.csv"
FIELDS = ["model", "T", "device", "threads", "repeat", "seconds"]
MODELS = ["RNN loop", "nn.RNN", "attention", "fused"]


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096], help="sequence lengths T")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="CPU thread counts to compare")
    p.add_argument("--repeats", type=int, default=5, help="timing runs of every configuration")
    p.add_argument("--min-run-time", type=float, default=0.3, help="seconds of calls per reading (time_in_turns)")
    p.add_argument("--d", type=int, default=64, help="model width (Chapter 4's)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="cuda: also time on the GPU")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and inputs")
    p.add_argument("--out", type=Path, default=None, help="the results table (CSV) to write")
    p.add_argument("--quick", action="store_true", help="tiny runs to test the harness; writes nothing")
    args = p.parse_args(argv)
    if args.out is None:
        args.out = RESULTS if args.device == "cpu" else RESULTS.with_name("parallel_threads_cuda.csv")
    return args


def computations(d: int, device: str, seed: int):
    """The four computations of Chapter 4's timing, as functions of x (1, T, d)."""
    torch.manual_seed(seed)
    rnn_loop, torch_rnn = RNN(d, d).to(device), nn.RNN(d, d, batch_first=True).to(device)
    projections = [nn.Linear(d, d, bias=False).to(device) for _ in range(3)]

    def self_attention(x, fn):
        return fn(*(p(x) for p in projections))

    return {"RNN loop": rnn_loop, "nn.RNN": torch_rnn,
            "attention": lambda x: self_attention(x, scaled_dot_product_attention),
            "fused": lambda x: self_attention(x, F.scaled_dot_product_attention)}


def measure(args, device: str, thread_counts):
    """Rows of seconds: every T, repeat, thread count (alternating order) and computation (in turns)."""
    fns = computations(args.d, device, args.seed)
    rows = []
    with torch.no_grad():
        for T in args.lengths:
            x = torch.randn(1, T, args.d, generator=torch.Generator().manual_seed(args.seed)).to(device)
            calls = [lambda f=fns[m], x=x: f(x) for m in MODELS]
            for r in range(args.repeats):
                for threads in (thread_counts if r % 2 == 0 else thread_counts[::-1]):
                    secs = time_in_turns(calls, threads=threads, min_run_time=args.min_run_time)
                    rows += [dict(model=m, T=T, device=device, threads=threads, repeat=r, seconds=f"{s:.6g}")
                             for m, s in zip(MODELS, secs)]
            summary = {(m, th): statistics.median(float(row["seconds"]) for row in rows
                                                  if row["model"] == m and row["T"] == T and row["threads"] == th)
                       for m in MODELS for th in thread_counts}
            print(f"{device} T = {T:5d} | " + " | ".join(
                f"{m} " + " ".join(f"{1e3 * summary[m, th]:.2f}" for th in thread_counts) for m in MODELS)
                + f" ms at {thread_counts} threads", flush=True)
    return rows


def main(argv=None) -> None:
    args = parse(argv)
    started = time.perf_counter()
    if args.quick:
        args.lengths, args.repeats, args.min_run_time = [16, 32], 2, 0.01
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no GPU is available here")
    rows = measure(args, "cpu", sorted(set(args.threads)))
    if args.device == "cuda":
        rows += measure(args, "cuda", [1])       # the GPU column: one host thread launches the kernels
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if not args.quick:
        record(args.out.stem, rows, FIELDS, args, [args.seed], started, __file__, argv,
               extra={"cores_available": cores, "thread_counts": sorted(set(args.threads)),
                      "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None})
    T, (one, two) = args.lengths[-1], sorted(set(args.threads))[:2] if len(set(args.threads)) > 1 else (1, 1)
    med = {(m, th): statistics.median(float(r["seconds"]) for r in rows if r["device"] == "cpu" and r["model"] == m
                                      and r["T"] == T and r["threads"] == th) for m in MODELS for th in (one, two)}
    names = {"RNN loop": "loop", "nn.RNN": "nn_rnn", "attention": "attention", "fused": "fused"}
    print(f"T={T} " + " ".join(f"{names[m]}_{two}v{one}={med[m, two] / med[m, one]:.3f}" for m in MODELS))


if __name__ == "__main__":
    main()
