"""Timing and counting: the one way a chapter measures seconds, and the counts its laws are checked on.

Seconds depend on the machine: its CPU, its load, the thread count, a GPU (where small kernels are bound by launch
overhead, so doubling the work may cost nothing). So the book shows seconds as illustrations ("on this machine ...
took ...") and states its laws on **counted** operations, which every machine counts the same:

    time_it(fn)                    median seconds of one call (torch.utils.benchmark: warm-up, fixed threads,
                                   accelerator synchronised before each reading)
    time_in_turns([f, g, h])       the same for several functions measured in turns, so a busy spell on the
                                   machine slows all of them alike
    count_flops(fn)                floating-point operations of one call (torch.utils.flop_counter)
    count_calls(fn, "mm", ...)     how many times one call runs the named ATen operations (e.g. the matrix
                                   products a loop runs one after another)
    count_positions(model, fn)     how many token positions `model` is run on during one call (e.g. generation
                                   with and without a KV cache)

Glue a measured time with `glue(name, value, timing=True)`: it is shown, never compared between machines.
"""
from __future__ import annotations

import math
import statistics
from typing import Callable, Sequence

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils import benchmark
from torch.utils.benchmark.utils.timer import timer as synchronised_clock
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from .checks import positive_int, positive_number

__all__ = ["cpu_model", "time_it", "time_in_turns", "count_flops", "count_calls", "count_positions"]



def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else what platform knows): which machine a measurement is from."""
    import platform
    from pathlib import Path

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()

def _callable(fn, name: str = "fn"):
    if not callable(fn):
        raise TypeError(f"{name} must be a function called with no arguments, got {type(fn).__name__}")
    return fn


def _seconds(fn: Callable[[], object], number: int) -> float:
    start = synchronised_clock()
    for _ in range(number):
        fn()
    return synchronised_clock() - start


def time_it(fn: Callable[[], object], *, threads: int = 1, min_run_time: float = 0.2) -> float:
    """Median seconds of one call of `fn()` on `threads` CPU threads, measured for at least `min_run_time` s.

    torch.utils.benchmark.Timer does the work: it warms `fn` up while it picks how many calls to time together,
    sets the thread count only while it measures, and synchronises the accelerator before reading the clock.
    The result is an illustration of this machine, not a law: do not assert on it.
    """
    _callable(fn)
    positive_int(threads=threads)
    positive_number(min_run_time=min_run_time)
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
    return float(timer.blocked_autorange(min_run_time=min_run_time).median)


def time_in_turns(fns: Sequence[Callable[[], object]], *, threads: int = 1, min_run_time: float = 0.2,
                  rounds: int = 3) -> list:
    """Median seconds of one call of each function, measured in `rounds` turns (f, g, h, f, g, h, ...).

    Each function is called once to warm up, then gets about `min_run_time` seconds in all, split over the rounds
    (at least one call per round): a function slower than that costs 1 + rounds calls. A busy spell on the machine
    falls on all of them alike, so their ratios are steadier than from separate measurements (still an
    illustration). The clock is torch.utils.benchmark's, which synchronises the accelerator before each reading
    (Timer.timeit itself would add two warm-up calls to every reading).
    """
    if isinstance(fns, (str, bytes)) or not isinstance(fns, Sequence) or not fns:
        raise ValueError(f"fns must be a non-empty list of functions, got {fns!r}")
    for i, fn in enumerate(fns):
        _callable(fn, f"fns[{i}]")
    positive_int(threads=threads, rounds=rounds)
    positive_number(min_run_time=min_run_time)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        first = [_seconds(fn, 1) for fn in fns]                    # warm-up, and how long one call takes
        numbers = [max(1, math.ceil(min_run_time / rounds / max(f, 1e-9))) for f in first]
        readings = [[] for _ in fns]
        for _ in range(rounds):
            for fn, number, r in zip(fns, numbers, readings):
                r.append(_seconds(fn, number) / number)
    finally:
        torch.set_num_threads(before)
    return [statistics.median(r) for r in readings]


def count_flops(fn: Callable[[], object]) -> int:
    """Floating-point operations of one call of `fn()`, as torch.utils.flop_counter.FlopCounterMode counts them.

    A multiply-add counts as two. Matrix products (mm, bmm, addmm, linear, matmul, convolutions, and the fused
    attention kernels on the GPU) are counted; elementwise work such as softmax is not. The count depends only on the
    shapes, so it is the same on every machine. F.scaled_dot_product_attention is counted through PyTorch's reference
    (math) implementation, whose products the counter sees on every device (the fused CPU kernel would count zero,
    the GPU's flash kernel its own formula); a causal mask still counts the whole T x T product. A backward pass
    inside `fn` is counted too; wrap `fn` in torch.no_grad() yourself to count a forward pass alone.
    """
    _callable(fn)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


class _CallCounter(TorchDispatchMode):
    def __init__(self, names):
        super().__init__()
        self.names, self.n = names, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in self.names:
            self.n += 1
        return func(*args, **(kwargs or {}))


def _countable(name: str) -> None:
    """`name` must be an ATen operation that reaches dispatch under its own name (count_calls would count 0)."""
    if not hasattr(torch.ops.aten, name):
        raise ValueError(f"ops must name ATen operations such as 'mm', 'addmm', 'bmm'; torch.ops.aten has no {name!r}")
    try:
        packet = getattr(torch.ops.aten, name)
        overloads = ["default"] if "default" in packet.overloads() else packet.overloads()   # not the out= form
        composite = all(torch._C._dispatch_has_kernel_for_dispatch_key(getattr(packet, o).name(),
                                                                        "CompositeImplicitAutograd")
                        for o in overloads)
    except Exception:      # an internal API that moved: skip this part of the check
        composite = False
    if composite:
        raise ValueError(f"ops: {name!r} is a composite operation: it runs as other operations (e.g. matmul as mm or "
                         "bmm, linear as addmm) and is never dispatched under its own name; count those instead")


def count_calls(fn: Callable[[], object], *ops: str) -> int:
    """How many times one call of `fn()` runs the ATen operations named in `ops` (e.g. "mm", "addmm", "bmm").

    The count is taken where PyTorch dispatches each operation, so for a loop written in Python it is the same on
    every machine (a fused kernel, such as cuDNN's RNN on a GPU, is one call). Counting the matrix products of a
    recurrent loop counts its steps that wait for one another. A composite operation (matmul, linear,
    scaled_dot_product_attention) never reaches dispatch under its own name, so it cannot be counted: name what it
    runs (mm, addmm, bmm); an unknown name raises rather than counting 0.
    """
    _callable(fn)
    if not ops or not all(isinstance(o, str) and o for o in ops):
        raise ValueError(f"name at least one ATen operation to count, e.g. 'mm', got {ops!r}")
    for o in ops:
        _countable(o)
    with _CallCounter(set(ops)) as counter:
        fn()
    return counter.n


def count_positions(model: torch.nn.Module, fn: Callable[[], object]) -> int:
    """How many token positions `model` is run on during one call of `fn()`: the length (dim 1) of the token ids
    of every call of `model`, summed. Generating n tokens without a cache runs the whole prefix again for each;
    with a KV cache, each new position once. A count of the work, the same on every machine."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    _callable(fn)
    seen = []

    def hook(module, args, kwargs):
        ids = args[0] if args else next(iter(kwargs.values()), None)
        if not isinstance(ids, torch.Tensor) or ids.dim() < 2:
            raise ValueError("count_positions expects the model's first input to be token ids of shape (B, T)")
        seen.append(ids.shape[1])

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        fn()
    finally:
        handle.remove()
    return sum(seen)
