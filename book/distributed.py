#!/usr/bin/env python3
"""The course's training step under DistributedDataParallel, checked against one process. Chapter 10.

    torchrun --nproc_per_node=2 -m book.distributed            # two CPU processes, gloo backend
    torchrun --nproc_per_node=8 -m book.distributed --steps 3  # eight GPUs: NCCL, the same code
    python -m book.distributed --nproc 2                       # two processes without torchrun (chapter 10's cell)

torchrun's rendezvous store is a TCP server that listens on every network interface while the job runs (PyTorch has
no option to bind it to one address). `--nproc N` starts the N processes itself instead, on this machine, with a file
store (FileStore): then nothing listens on the network, and gloo's own sockets use the loopback interface.

It ships inside the package (not as a script beside it), so `-m book.distributed` works wherever `book` is
installed: a clone, Colab, a cluster node.

Every process builds the same GPT (same seed), takes its own slice of one global batch, and trains with the
book's loop (book.optim.fit: AdamW from build_optimizer, utils.train_step); DDP all-reduces (averages) the
gradients during backward, so every process applies the same update. Rank 0 then trains a copy in one process
on the whole global batches with the same loop and checks that the gradients of the last step and the weights
after it agree. Prints one verdict line; exit 1 if not.
"""
from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from .gpt import GPT, GPTConfig
from .optim import build_optimizer, fit

__all__ = ["global_batch", "launch_local", "main"]


def global_batch(step: int, batch: int, T: int, vocab: int):
    """(x, y) of shape (batch, T): random token ids and their next tokens, the same on every process."""
    g = torch.Generator().manual_seed(1000 + step)   # the same global batch on every process
    ids = torch.randint(0, vocab, (batch, T + 1), generator=g)
    return ids[:, :-1], ids[:, 1:]


def launch_local(nproc: int, argv, timeout: float = 600) -> int:
    """Run `python -m book.distributed argv` as `nproc` processes on this machine, joined by a file store (no TCP
    listener, unlike torchrun's rendezvous) and gloo on the loopback interface; the worst exit code."""
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"nproc must be a positive int (processes to start), got {nproc!r}")
    with tempfile.TemporaryDirectory(prefix="book_distributed.") as tmp:
        env = {**os.environ, "WORLD_SIZE": str(nproc), "BOOK_DIST_INIT": f"file://{tmp}/store",
               "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
               "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo0" if sys.platform == "darwin" else "lo")}
        procs = [subprocess.Popen([sys.executable, "-m", "book.distributed", *argv],
                                  env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}) for r in range(nproc)]
        try:
            return max(proc.wait(timeout=timeout) for proc in procs)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--batch", type=int, default=8, help="global batch (split across processes)")
    p.add_argument("--tol", type=float, default=1e-5)
    p.add_argument("--nproc", type=int, help="start this many processes here, without torchrun (a file store: "
                                             "nothing listens on the network)")
    args = p.parse_args(argv)
    if args.nproc is not None:
        rest = list(sys.argv[1:] if argv is None else argv)
        i = next(i for i, a in enumerate(rest) if a == "--nproc" or a.startswith("--nproc="))
        del rest[i:i + (1 if "=" in rest[i] else 2)]
        return launch_local(args.nproc, rest)
    # NCCL with one GPU per process when there are enough GPUs; otherwise gloo on the CPU (e.g. two processes on
    # a one-GPU Colab machine)
    cuda = torch.cuda.is_available() and torch.cuda.device_count() >= int(os.environ.get("WORLD_SIZE", "1"))
    init = os.environ.get("BOOK_DIST_INIT")    # a file store from --nproc; else torchrun's environment
    if init:
        dist.init_process_group("nccl" if cuda else "gloo", init_method=init, rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]))
    else:
        dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}") if cuda else torch.device("cpu")
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} must divide evenly across {world} processes")
    torch.set_num_threads(1)
    cfg = GPTConfig(65, context_len=32, d_model=64, n_heads=4, n_layers=2)
    torch.manual_seed(0)
    model = GPT(cfg).to(device)
    reference = copy.deepcopy(model)           # rank 0 trains this one alone on the whole batch
    ddp = DDP(model, device_ids=[device.index] if cuda else None)
    share = args.batch // world
    mine = slice(rank * share, (rank + 1) * share)

    def batches(rows):
        for step in range(args.steps):
            x, y = (t.to(device) for t in global_batch(step, args.batch, cfg.context_len, cfg.vocab_size))
            yield x[rows], y[rows]

    def train(net, rows):
        fit(net, batches(rows), loss_fn=lambda m, b: m(*b)[1], optimizer=build_optimizer(net, lr=1e-3),
            steps=args.steps, schedule="constant", grad_clip=1.0, progress=False)

    train(ddp, mine)
    ok = True
    if rank == 0:
        train(reference, slice(None))                     # one process, the whole global batch
        pairs = list(zip(model.parameters(), reference.parameters()))
        worst_grad = max((a.grad - b.grad).abs().max().item() for a, b in pairs)
        worst_w = max((a - b).abs().max().item() for a, b in pairs)
        ok = worst_grad <= args.tol and worst_w <= args.tol
        print(f"{world} processes ({dist.get_backend()}), global batch {args.batch} = {world} x {share}: "
              f"max |last step's grad difference| {worst_grad:.1e}, max |weight difference| after {args.steps} steps "
              f"{worst_w:.1e} -> {'EQUAL' if ok else 'DIFFERENT'} to one process within {args.tol:g}", flush=True)
    flag = torch.tensor([int(ok)], device=device)
    dist.broadcast(flag, 0)
    dist.destroy_process_group()
    return 0 if flag.item() else 1


if __name__ == "__main__":
    sys.exit(main())
