#!/usr/bin/env python3
"""Where a training step's time goes, on one CPU thread: phases, model parts and operators, per recipe.

    python benchmarks/speedrun/step_profile.py                   # nanogpt, course, modern (about a minute)
    python benchmarks/speedrun/step_profile.py --entries modern  # one entry
    python benchmarks/speedrun/step_profile.py --quick           # a smoke test, writes nothing

For each speedrun entry (entries.py) it builds the recipe's model and optimiser with book.train.RecipeRun and
trains it WARMUP steps with the book's loop (RecipeRun.advance, i.e. book.optim.fit), then measures:
  - "loop": CPU ms per step of RecipeRun.advance over STEPS steps (what the speedrun times);
  - "phase": the same step taken apart (batch, forward, zero_grad + backward, clip, each optimiser's step, the loss
    read back; the calls book.utils.train_step makes, in its order), CPU ms per step over STEPS steps;
  - "part": forward and backward CPU ms per step of the model's parts (embedding, norms, attention, FFN, head; the
    rest of the forward is residual adds, soft-cap and loss), timed by forward and full-backward module hooks;
  - "op": the OPS operators with the most self CPU time (torch.profiler over PROFILED steps of the loop).
A compiled entry (recipe.compile) takes its phases through the compiled model (RecipeRun.train_model), and has no
"part" rows: module hooks cannot time the parts of a fused graph; its "op" rows name the compiled kernels.
All times are time.process_time (CPU time of this process) with torch.set_num_threads(1). Writes
book/results/speedrun_profile.csv (recipe, section, name, ms_per_step, share = of the phase sum) and its
provenance speedrun_profile.json (bench_common.record). The last line reads
    <entry>_ms=<loop ms per step> ... <last>_forward=<share> <last>_backward=<share> <last>_optimizer=<share>
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))   # benchmarks/: bench_common
sys.path.insert(0, str(HERE))
from bench_common import char_corpus, record  # noqa: E402
from book.data import get_batch  # noqa: E402
from book.results import RESULTS_DIR  # noqa: E402
from book.train import RecipeRun  # noqa: E402
from entries import entry  # noqa: E402

WARMUP, STEPS, PROFILED, OPS = 10, 30, 10, 12
FIELDS = ["recipe", "section", "name", "ms_per_step", "share"]


def _part_of(name: str):
    """The model part a (sub)module name belongs to, for the modules that are timed (None: not timed)."""
    last = name.split(".")[-1]
    return {"tok_emb": "embedding", "pos_emb": "embedding", "ln1": "norms", "ln2": "norms", "ln_f": "norms",
            "attn": "attention", "ffn": "ffn", "lm_head": "head"}.get(last) if name.count(".") in (0, 2) else None


def hook_parts(model, totals):
    """Time every part's forward and backward into totals[("forward"|"backward", part)] (CPU s); the handles."""
    handles = []
    for name, module in model.named_modules():
        part = _part_of(name)
        if part is None:
            continue
        start = {}

        def begin(key, *_, _start=start):
            _start[key] = time.process_time()

        def end(key, part, *_, _start=start):
            if key in _start:
                totals[(key, part)] += time.process_time() - _start.pop(key)

        handles += [module.register_forward_pre_hook(lambda m, i, b=begin: b("forward")),
                    module.register_forward_hook(lambda m, i, o, e=end, p=part: e("forward", p)),
                    module.register_full_backward_pre_hook(lambda m, g, b=begin: b("backward")),
                    module.register_full_backward_hook(lambda m, gi, go, e=end, p=part: e("backward", p))]
    return handles


def phase_step(run, times):
    """One training step taken apart into its phases (book.utils.train_step's calls, in its order), timed."""
    r, opt, model = run.recipe, run.opt, run.train_model
    clock = time.process_time

    def timed(name, fn):
        t0 = clock()
        out = fn()
        times[name] += clock() - t0
        return out

    x, y = timed("batch", lambda: get_batch(run.train_data, r.batch_size, r.context_len, run.generator))
    loss = timed("forward", lambda: model(x, y)[1])
    timed("backward", lambda: (opt.zero_grad(set_to_none=True), loss.backward()))
    timed("clip", lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), r.grad_clip))
    for sub in getattr(opt, "optimizers", [opt]):
        timed(f"optimizer: {type(sub).__name__}", sub.step)
    timed("loss.item", loss.item)


def profile_entry(slug, data, steps: int, profiled: int, warmup: int):
    train, _, vocab = data
    e = entry(slug)
    run = RecipeRun(e.recipe, vocab, train, seed=1337)
    run.advance(warmup)
    t0 = time.process_time()
    run.advance(steps)
    loop_ms = (time.process_time() - t0) / steps * 1e3

    phases = defaultdict(float)
    for _ in range(steps):
        phase_step(run, phases)
    parts = defaultdict(float)
    if not e.recipe.compile:
        handles = hook_parts(run.model, parts)
        for _ in range(steps):
            phase_step(run, defaultdict(float))
        for h in handles:
            h.remove()

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        run.advance(profiled)
    ops = sorted(prof.key_averages(), key=lambda a: a.self_cpu_time_total, reverse=True)[:OPS]

    total = sum(phases.values())
    rows = [dict(recipe=slug, section="loop", name="RecipeRun.advance", ms_per_step=round(loop_ms, 3),
                 share=round(loop_ms / (total / steps * 1e3), 3))]
    rows += [dict(recipe=slug, section="phase", name=k, ms_per_step=round(v / steps * 1e3, 3),
                  share=round(v / total, 3)) for k, v in phases.items()]
    for kind in ("forward", "backward") if parts else ():
        measured = sum(v for (k, _), v in parts.items() if k == kind)
        for (k, part), v in sorted(parts.items()):
            if k == kind:
                rows.append(dict(recipe=slug, section="part", name=f"{kind}: {part}",
                                 ms_per_step=round(v / steps * 1e3, 3), share=round(v / total, 3)))
        rest = phases[kind] - measured
        rows.append(dict(recipe=slug, section="part", name=f"{kind}: the rest",
                         ms_per_step=round(rest / steps * 1e3, 3), share=round(rest / total, 3)))
    rows += [dict(recipe=slug, section="op", name=a.key,
                  ms_per_step=round(a.self_cpu_time_total / 1e3 / profiled, 3),
                  share=round(a.self_cpu_time_total / 1e6 / profiled / (total / steps), 3)) for a in ops]
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--entries", nargs="+", default=["nanogpt", "course", "modern"], help="speedrun entries")
    p.add_argument("--quick", action="store_true", help="a few steps to test the harness; writes nothing")
    args = p.parse_args(argv)
    started = time.perf_counter()
    torch.set_num_threads(1)
    # the embedding's input (token ids) needs no gradient, so its backward hook fires at its output: expected
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    train, val, tok = char_corpus()
    steps, profiled, warmup = (2, 1, 1) if args.quick else (STEPS, PROFILED, WARMUP)
    rows, last = [], []
    for slug in args.entries:
        got = profile_entry(slug, (train, val, tok.vocab_size), steps, profiled, warmup)
        rows += got
        print(f"\n{slug}: {entry(slug).change}")
        for r in got:
            print(f"  {r['section']:5s} {r['name'][:60]:60s} {r['ms_per_step']:9.2f} ms  {r['share']:6.1%}")
        share = {r["name"]: r["share"] for r in got if r["section"] == "phase"}
        last.append(f"{slug}_ms={got[0]['ms_per_step']:.1f}")
    optim = sum(v for k, v in share.items() if k.startswith("optimizer") or k == "clip")
    last += [f"{slug}_forward={share['forward']:.3f}", f"{slug}_backward={share['backward']:.3f}",
             f"{slug}_optimizer={optim:.3f}"]
    if not args.quick:
        args.out = RESULTS_DIR / "speedrun_profile.csv"
        record("speedrun_profile", rows, FIELDS, args, [1337], started, __file__, argv,
               extra={"warmup_steps": WARMUP, "steps": STEPS, "profiled_steps": PROFILED})
    print(" ".join(last))


if __name__ == "__main__":
    main()
