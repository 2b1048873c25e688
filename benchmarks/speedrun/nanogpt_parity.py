#!/usr/bin/env python3
"""Does record 0 cost what nanoGPT costs? Its training step against nanoGPT's own, on one CPU thread.

    python benchmarks/speedrun/nanogpt_parity.py --nanogpt PATH          # recorded (about 3 minutes)
    python benchmarks/speedrun/nanogpt_parity.py --nanogpt PATH --quick  # a smoke test, writes nothing

PATH is a checkout of https://github.com/karpathy/nanoGPT (recorded: commit 3adf61e1). Nothing of it is copied
into the book: this script runs its train.py and imports its model.py from PATH.

The speedrun's record 0 (entries.py, `nanogpt`) is nanoGPT's CPU recipe from its README (4 layers x 128, batch 12,
context 64, AdamW 1e-3, 2,000-step cosine, dropout 0) trained by the book's GPT and loop (book.train.RecipeRun). Its
recorded seeds took 74-83 ms per step, while nanoGPT's README run takes about 64 ms per step on this kind of machine:
is the book's step slower, or were the seeds timed under load? Two measurements, each on one torch thread, on a
machine with a core free for them (wall times mean nothing once processes wait for a core):

  - "process": nanoGPT's train.py, run as its README says (--device=cpu --compile=False --eval_iters=20
    --log_interval=1 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --lr_decay_iters=2000
    --dropout=0.0), on the book's corpus and split (written in nanoGPT's format to a temporary folder), for STEPS
    iterations; and the book's record 0 for STEPS steps, each step timed alone (RecipeRun.advance(1)), in a process
    of its own. The two take turns, ROUNDS rounds. A process's figure is the median of its steps' wall ms (nanoGPT's
    own logged "time ...ms" per iteration, its evaluation iterations left out), after the first WARM steps.
  - "phase": inside one process, nanoGPT's model (model.GPT, configure_optimizers) and the book's (book.gpt.GPT,
    the recipe's optimiser), on the same batch, in turns: forward, forward + backward, and the whole step with the
    gradient clip and AdamW's update; CPU ms per step, median over ROUNDS x 3 turns of TURN steps.

Writes book/results/speedrun_nanogpt_parity.csv (section, implementation, ms_per_step, ms_min, ms_max, n) and its
provenance speedrun_nanogpt_parity.json (bench_common.record, with nanoGPT's commit). The last line reads
    nanogpt_ms=<...> book_ms=<...> ratio=<book / nanogpt>
"""
from __future__ import annotations

import argparse
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))   # benchmarks/: bench_common
sys.path.insert(0, str(HERE))
from bench_common import char_corpus, record  # noqa: E402

STEPS, WARM, ROUNDS, TURN = 300, 10, 3, 20
FIELDS = ["section", "implementation", "ms_per_step", "ms_min", "ms_max", "n"]
README_FLAGS = ["--device=cpu", "--compile=False", "--eval_iters=20", "--log_interval=1", "--block_size=64",
                "--batch_size=12", "--n_layer=4", "--n_head=4", "--n_embd=128", "--lr_decay_iters=2000",
                "--dropout=0.0"]
ITER = re.compile(r"^iter (\d+): loss [\d.]+, time ([\d.]+)ms")


def nanogpt_commit(path: Path) -> str:
    out = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else "unknown (not a git checkout)"


def write_nanogpt_data(work: Path) -> None:
    """The book's corpus, split and tokenizer, in nanoGPT's shakespeare_char format (train.bin, val.bin, meta.pkl)."""
    train, val, tok = char_corpus()
    folder = work / "data" / "shakespeare_char"
    folder.mkdir(parents=True)
    train.numpy().astype(np.uint16).tofile(folder / "train.bin")
    val.numpy().astype(np.uint16).tofile(folder / "val.bin")
    with open(folder / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": tok.vocab_size, "itos": dict(enumerate(tok.itos)), "stoi": tok.stoi}, f)


def one_thread_env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def nanogpt_steps(path: Path, work: Path, steps: int) -> list:
    """Wall ms of each of train.py's iterations after WARM, evaluation iterations left out."""
    cmd = [sys.executable, str(path / "train.py"), str(path / "config" / "train_shakespeare_char.py"), *README_FLAGS,
           f"--max_iters={steps}", f"--out_dir={work / 'out'}"]
    out = subprocess.run(cmd, cwd=work, env=one_thread_env(), capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"nanoGPT's train.py failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    times = [(int(m[1]), float(m[2])) for m in map(ITER.match, out.stdout.splitlines()) if m]
    return [ms for it, ms in times if it >= WARM and it % 250 != 0]   # eval_interval 250 (its config)


def book_steps(steps: int) -> list:
    """Wall ms of each of record 0's steps after WARM (RecipeRun.advance(1)), in a process of its own."""
    out = subprocess.run([sys.executable, __file__, "--book-steps", str(steps)], env=one_thread_env(),
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the book's run failed:\n{out.stderr[-2000:]}")
    return [float(x) for x in out.stdout.split()][WARM:]


def run_book_steps(steps: int) -> None:
    """--book-steps: train record 0 for `steps` steps and print each step's wall ms (the child of book_steps)."""
    from book.train import RecipeRun
    from entries import entry

    torch.set_num_threads(1)
    train, _, tok = char_corpus()
    run = RecipeRun(entry("nanogpt").recipe, tok.vocab_size, train)
    for _ in range(steps):
        t = time.perf_counter()
        run.advance(1)
        print(f"{(time.perf_counter() - t) * 1e3:.3f}", flush=True)


def summary(section: str, impl: str, ms: list) -> dict:
    return dict(section=section, implementation=impl, ms_per_step=round(statistics.median(ms), 2),
                ms_min=round(min(ms), 2), ms_max=round(max(ms), 2), n=len(ms))


def processes(path: Path, steps: int, rounds: int) -> list:
    """nanoGPT's train.py and record 0 in turns, each in its own process."""
    ng, bk = [], []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_nanogpt_data(work)
        (work / "configurator.py").symlink_to(path / "configurator.py")   # train.py reads it from its cwd
        for r in range(rounds):
            ng += nanogpt_steps(path, work, steps)
            bk += book_steps(steps)
            print(f"  round {r + 1}: nanoGPT {statistics.median(ng):.1f} ms/step, book {statistics.median(bk):.1f} "
                  "ms/step", flush=True)
    return [summary("process", "nanoGPT train.py", ng), summary("process", "book record 0", bk)]


def phases(path: Path, rounds: int, turn: int) -> list:
    """CPU ms of forward, forward + backward, and the whole step: nanoGPT's model and the book's, in turns."""
    from book.gpt import GPT
    from entries import entry

    sys.path.insert(0, str(path))
    import model as nanogpt_model   # nanoGPT's model.py, from the checkout

    torch.set_num_threads(1)
    recipe = entry("nanogpt").recipe
    torch.manual_seed(0)
    ng = nanogpt_model.GPT(nanogpt_model.GPTConfig(block_size=64, vocab_size=65, n_layer=4, n_head=4, n_embd=128,
                                                    dropout=0.0, bias=False))
    bk = GPT(recipe.config(65))
    if sum(p.numel() for p in ng.parameters()) != sum(p.numel() for p in bk.parameters()):
        raise SystemExit("nanoGPT's model and record 0's differ in size: not the same recipe")
    models = {"nanoGPT model.py": (ng, ng.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")),
              "book record 0": (bk, recipe.make_optimizer(bk))}
    x, y = torch.randint(0, 65, (12, 64)), torch.randint(0, 65, (12, 64))

    def step(m, opt, part):
        if part == "forward":
            with torch.no_grad():
                m(x, y)
            return
        _, loss = m(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if part == "step":
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()

    times = {}
    for _ in range(rounds * 3):
        for part in ("forward", "forward + backward", "step"):
            for name, (m, opt) in models.items():
                for _ in range(3):
                    step(m, opt, part)
                t = time.process_time()
                for _ in range(turn):
                    step(m, opt, part)
                times.setdefault((part, name), []).append((time.process_time() - t) / turn * 1e3)
    return [summary(f"phase: {part}", name, ms) for (part, name), ms in times.items()]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nanogpt", type=Path, help="a checkout of karpathy/nanoGPT (its train.py and model.py)")
    p.add_argument("--quick", action="store_true", help="tiny runs to test the harness; writes nothing")
    p.add_argument("--book-steps", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.book_steps is not None:
        return run_book_steps(args.book_steps)
    if args.nanogpt is None or not (args.nanogpt / "train.py").is_file() or not (args.nanogpt / "model.py").is_file():
        p.error(f"--nanogpt must name a checkout of nanoGPT (with train.py and model.py), got {args.nanogpt}")
    started = time.perf_counter()
    steps, rounds, turn = (WARM + 12, 1, 2) if args.quick else (STEPS, ROUNDS, TURN)
    rows = processes(args.nanogpt.resolve(), steps, rounds)
    rows += phases(args.nanogpt.resolve(), rounds, turn)
    for r in rows:
        print(f"{r['section']:<32} {r['implementation']:<18} {r['ms_per_step']:7.2f} ms/step "
              f"({r['ms_min']:.2f}-{r['ms_max']:.2f}, n={r['n']})")
    quiet = {r["implementation"]: r["ms_per_step"] for r in rows if r["section"] == "process"}
    if not args.quick:
        torch.set_num_threads(1)
        record("speedrun_nanogpt_parity", rows, FIELDS, args, [1337], started, __file__, argv,
               extra={"nanogpt_commit": nanogpt_commit(args.nanogpt), "nanogpt_flags": README_FLAGS,
                      "steps": steps, "warm": WARM, "rounds": rounds, "turn": turn,
                      "load_average_at_end": [round(x, 2) for x in os.getloadavg()]})
    ng, bk = quiet["nanoGPT train.py"], quiet["book record 0"]
    print(f"nanogpt_ms={ng} book_ms={bk} ratio={bk / ng:.3f}")


if __name__ == "__main__":
    main()
