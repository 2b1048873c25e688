"""Small helpers every chapter uses: device choice, seeding, a wall-clock timer, glue, and the
switches that make a chapter's checks portable (see CONTRIBUTING.md, "Notebook checks").

Shape legend used across the package (batch first): B batch, T time (Tq/Tk when they differ),
C = d_model, H heads, D head dim, V vocab.
"""
from __future__ import annotations

import csv
import math
import os
import random
import re
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import torch

from .checks import positive_number

__all__ = ["get_device", "seed_everything", "count_params", "timed", "glue", "gpu_scale",
           "step_budget", "smoke_run", "claim", "set_threads", "train_step", "adamw",
           "Diverged"]

_DEVICES = ("cuda", "mps", "cpu")


def get_device(prefer: Optional[str] = None) -> torch.device:
    """The best available device: cuda, then mps, then cpu. Chapter 1.

    `prefer` (or the environment variable BOOK_DEVICE) forces one, e.g. "cpu" on a GPU machine
    to reproduce the committed CPU outputs.
    """
    choice = prefer or os.environ.get("BOOK_DEVICE")
    if choice:
        if choice not in _DEVICES:
            raise ValueError(f"device must be one of {_DEVICES}, got {choice!r}")
        if choice == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' was asked for, but torch.cuda.is_available() is False")
        if choice == "mps" and not torch.backends.mps.is_available():
            raise RuntimeError("device 'mps' was asked for, but this machine has no MPS backend")
        return torch.device(choice)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int = 0) -> torch.Generator:
    """Seed Python, NumPy and PyTorch (all devices); return a CPU generator seeded the same way."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2 ** 32:
        raise ValueError(f"seed must be a non-negative int below 2**32 (NumPy's range), got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def count_params(model: torch.nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) parameters of a module."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


@contextmanager
def timed() -> Iterator[dict]:
    """Wall-clock timer: `with timed() as t: ...` then `t["s"]` holds the seconds."""
    box = {"s": float("nan")}
    start = time.perf_counter()
    try:
        yield box
    finally:
        box["s"] = time.perf_counter() - start


def _check_tolerance(tol, rel, factor, timing=False, spread=None, margin=None) -> dict:
    if not isinstance(timing, bool):
        raise ValueError(f"timing must be True or False, got {timing!r}")
    if (spread is None) != (margin is None):
        raise ValueError("spread and margin go together: spread='glue_spread' (a recorded table) or >= 3 values "
                         f"measured over seeds, and margin >= 1 (how many spreads a fresh run may move); got "
                         f"spread={spread!r}, margin={margin!r}")
    if timing:
        if (tol, rel, factor, spread) != (None, None, None, None):
            raise ValueError("a timing is never compared between machines: glue it with timing=True alone, "
                             "without tol, rel, factor or spread")
        return {"timing": True}
    spec = {}
    if tol is not None:
        if tol == "any":
            if spread is not None:
                raise ValueError("tol='any' is never compared, so it takes no spread")
            return {"any": True}
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol >= 0:
            raise ValueError(f"tol must be a number >= 0 or 'any', got {tol!r}")
        spec["tol"] = float(tol)
    if rel is not None:
        if isinstance(rel, bool) or not isinstance(rel, (int, float)) or not rel >= 0:
            raise ValueError(f"rel must be a number >= 0, got {rel!r}")
        spec["rel"] = float(rel)
    if factor is not None:
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor >= 1:
            raise ValueError(f"factor must be a number >= 1, got {factor!r}")
        spec["factor"] = float(factor)
    if spread is not None:
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not margin >= 1:
            raise ValueError(f"margin must be a number >= 1 (spreads a fresh run may move), got {margin!r}")
        if isinstance(spread, str):
            if not re.fullmatch(r"[A-Za-z0-9_]+", spread):
                raise ValueError(f"spread must name a recorded table such as 'glue_spread', got {spread!r}")
        else:
            try:
                values = [float(v) for v in spread]
            except (TypeError, ValueError):
                raise ValueError("spread must name a recorded table ('glue_spread') or list the values measured "
                                 f"over >= 3 seeds, got {spread!r}") from None
            if len(values) < 3 or not all(math.isfinite(v) for v in values):
                raise ValueError(f"spread needs >= 3 finite values, one per seed, got {spread!r}")
    return spec


# ---- where a glued number's tolerance comes from: its spread across seeds ------------------------
RESULTS_DIR = Path(__file__).resolve().parent / "results"     # book.results.RESULTS_DIR (a lower layer reads it)
_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def glued_numbers(text: str) -> tuple:
    """(the text with each number replaced by '#', the numbers): what the drift check compares."""
    nums = [float(m.group().replace(",", "")) for m in _NUMBER.finditer(text)]
    return _NUMBER.sub("#", text), nums


_SPAN = re.compile(r"#(%?)(?:–| to )#\1")


def glued_spans(text: str) -> tuple:
    """(the text with each number or range replaced by '#', [(low, high), ...]): a range 'a–b' or 'a to b' is one
    span, a lone number n the span (n, n). So '4.87' (every seed alike, shown once: book.results.value_range) and
    '4.86–4.87' have the same shape, and the drift and spread checks compare their ends."""
    frame, nums = glued_numbers(text)
    spans, out, k, last = [], [], 0, 0
    for m in _SPAN.finditer(frame):
        before = frame[last:m.start()]
        for _ in range(before.count("#")):
            spans.append((nums[k], nums[k]))
            k += 1
        out.append(before + "#" + m.group(1))
        spans.append((nums[k], nums[k + 1]))
        k += 2
        last = m.end()
    rest = frame[last:]
    spans += [(n, n) for n in nums[k:]]
    return "".join(out) + rest, spans


def _display_unit(text: str) -> float:
    """The step of the last digit shown, for the coarsest number in `text` ('2.31' -> 0.01, '87%' -> 1)."""
    units = []
    for m in _NUMBER.finditer(text):
        digits = m.group().replace(",", "").lower().split("e")[0]
        units.append(10.0 ** -len(digits.split(".")[1]) if "." in digits else 1.0)
    return max(units, default=0.0)


def recorded_seed_values(name: str, table: str = "glue_spread", results_dir: Optional[Path] = None) -> list:
    """The texts glued under `name` in the recorded runs with other seeds (benchmarks/glue_spread.py), in order."""
    path = Path(results_dir or RESULTS_DIR) / f"{table}.csv"
    if not path.is_file():
        raise FileNotFoundError(f"no recorded seed spread {path}: run python benchmarks/{table}.py")
    with open(path, newline="") as f:
        return [r["value"] for r in csv.DictReader(f) if r.get("name") == name]


def other_seeds(name: str, table: str = "glue_spread") -> str:
    """What the glue `name` showed in the recorded runs with other seeds, for the prose: "14%, 9% and 11%".

    One live seed is one draw; where a sentence rests on it, it quotes these beside it."""
    import ast

    shown = []
    for text in recorded_seed_values(name, table):
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        shown.append(str(value))
    if not shown:
        raise ValueError(f"no recorded runs with other seeds for {name!r}: run python benchmarks/{table}.py")
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def seed_spread(name: str, text: str, spread, margin: float, results_dir: Optional[Path] = None) -> dict:
    """How far `text` (a glued value) moves between seeds: {'source', 'seeds', 'width', 'margin'}.

    `spread` names a recorded table (the same glue in runs with other seeds; this run adds one seed) or lists
    the values measured over >= 3 seeds in the chapter. The width is the largest max - min over the numbers in
    the value. Problems (too few seeds, values of another shape) come back as 'error', for the test suite to
    report: a reader's run never fails on this bookkeeping.
    """
    if isinstance(spread, str):
        out = {"source": f"book/results/{spread}.csv", "margin": float(margin)}
        try:
            texts = recorded_seed_values(name, spread, results_dir) + [text]
        except (OSError, csv.Error, KeyError) as err:
            return {**out, "error": str(err)}
        shapes = {glued_spans(t)[0] for t in texts}
        if len(shapes) != 1:
            return {**out, "error": f"the seeds glue values of different shapes: {texts}"}
        columns = list(zip(*([end for span in glued_spans(t)[1] for end in span] for t in texts)))
        width = max((max(c) - min(c) for c in columns), default=0.0)
        out.update(seeds=len(texts), width=width)
        if len(texts) < 3:
            out["error"] = f"{len(texts)} seeds recorded for {name!r}, at least 3 needed"
        return out
    values = [float(v) for v in spread]
    return {"source": "measured in the chapter", "margin": float(margin), "seeds": len(values),
            "width": max(values) - min(values), "values": values}


GLUED: dict = {}   # {name: {"value", "text" (what the page shows), "tolerance"}}: this kernel's glued values


def glue(name: str, value, display: bool = False, *, tol=None, rel=None, factor=None, timing=False,
         spread=None, margin=None) -> None:
    """Store `value` under `name` for the website's prose (myst-nb glue); a no-op where myst-nb is missing.

    Prose cites it as {glue:text}`name` so every number on the page comes from executed code.
    The tolerance says how far a fresh run on another machine may move each number in the value
    before the test suite calls it drift (tests compare committed and fresh values):
      no tolerance      the value must come out identical (pure arithmetic, counts, fixed data);
      spread=..., margin=m   a number that depends on training or sampling: it may move m times its spread
                        across seeds, where spread="glue_spread" reads the same glue in the recorded runs with
                        other seeds (benchmarks/glue_spread.py) and a list gives the values of >= 3 seeds measured
                        in the chapter; never less than one step of the last digit shown. tol, rel and factor
                        may be added as floors for what seeds do not move (tests/test_glue_spread.py checks that
                        every tolerant glue declares its spread, and that its tolerance covers it);
      tol=0.05          every number within 0.05 (absolute; percentages in points);
      rel=0.2           every number within 20 % of the committed one;
      factor=3          every number within a factor of 3 (e.g. a memory peak that allocators move);
      tol="any"         may differ entirely (e.g. which head wins); the cell must assert the claim;
      timing=True       a measured time or a ratio of times: shown as an illustration of this machine, never
                        compared (no bound on seconds holds on every CPU, under load and on a GPU). The law the
                        prose states beside it is checked on counted operations (book.timing.count_flops).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"glue name must be an identifier such as 'ch1_bigram_bpc', got {name!r}")
    spec = _check_tolerance(tol, rel, factor, timing, spread, margin)
    GLUED[name] = {"value": value, "text": repr(value), "tolerance": spec}   # for book.quiz's answers
    try:
        import IPython
        from myst_nb.ext.glue import GLUE_PREFIX
    except ImportError:  # pragma: no cover - exercised only where myst-nb is missing
        return None
    if IPython.get_ipython() is None:
        return None
    # what myst_nb.glue displays, plus the tolerance for the drift check
    bundle, metadata = IPython.core.formatters.format_display_data(value)
    if spread is not None:
        text = str(bundle.get("text/plain", ""))
        spec["spread"] = seed_spread(name, text, spread, margin)
        spec["tol"] = max(spec.get("tol", 0.0), margin * spec["spread"].get("width", 0.0), _display_unit(text))
    GLUED[name]["text"] = str(bundle.get("text/plain", GLUED[name]["text"]))
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = dict(name=name, mime_prefix=prefix)
    metadata["book_tolerance"] = spec
    IPython.display.display({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)
    return None


# ---- portable checks: one notebook, any machine ------------------------------------------------
def gpu_scale(device: torch.device) -> bool:
    """True when a chapter should build its bigger, GPU-sized models.

    That is on a CUDA device, or anywhere when BOOK_SCALE=gpu (the test suite runs the GPU code
    path on the CPU this way, with BOOK_MAX_STEPS cutting the loops short).
    """
    scale = os.environ.get("BOOK_SCALE", "")
    if scale not in ("", "gpu", "cpu"):
        raise ValueError(f"BOOK_SCALE must be 'gpu', 'cpu' or unset, got {scale!r}")
    if scale:
        return scale == "gpu"
    return torch.device(device).type == "cuda"


def _max_steps() -> Optional[int]:
    raw = os.environ.get("BOOK_MAX_STEPS")
    if not raw:
        return None
    try:
        cap = int(raw)
    except ValueError:
        cap = 0
    if cap < 1:
        raise ValueError(f"BOOK_MAX_STEPS must be a positive integer, got {raw!r}")
    return cap


def smoke_run() -> bool:
    """True when BOOK_MAX_STEPS cuts training short: code paths run, learned-quality claims cannot hold."""
    return _max_steps() is not None


def step_budget(steps: int) -> int:
    """`steps`, or fewer when BOOK_MAX_STEPS caps every training loop (a smoke run of the code path)."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    cap = _max_steps()
    return steps if cap is None else min(steps, cap)


def claim(holds, message: str) -> None:
    """Check a claim the prose makes about a measured result (a trained model, a sample): never a bound on
    seconds, which no machine can promise (see book.timing: assert laws on counted operations).

    Raises AssertionError(message) when it fails, except in a smoke run (BOOK_MAX_STEPS set), where
    training is cut short and the claim is evaluated but cannot be expected to hold, and in a run of
    benchmarks/glue_spread.py (BOOK_SPREAD_RUN set), which measures how far other seeds move the glued
    numbers and so must run past a claim that another seed breaks. Put the
    measured values in `message`, so a failure says what came out.
    """
    if not isinstance(message, str) or not message:
        raise ValueError("claim needs a message that states the claim and the measured values")
    if isinstance(holds, torch.Tensor) or isinstance(holds, np.ndarray):
        if (holds.numel() if isinstance(holds, torch.Tensor) else holds.size) != 1:
            raise ValueError(f"claim expects one truth value, got an array of shape {tuple(holds.shape)}: "
                             "use .all() or .any()")
        holds = bool(holds.item())
    if bool(holds) or smoke_run() or os.environ.get("BOOK_SPREAD_RUN"):
        return None   # returns nothing, so a claim on a cell's last line displays nothing
    raise AssertionError(f"claim failed: {message}")


def set_threads(n: int) -> int:
    """torch.set_num_threads(n), unless BOOK_THREADS overrides it (to test other thread counts)."""
    raw = os.environ.get("BOOK_THREADS")
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"BOOK_THREADS must be a positive integer, got {raw!r}")
        n = int(raw)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"thread count must be a positive int, got {n!r}")
    torch.set_num_threads(n)
    return n


def _betas(betas) -> None:
    """Adam's betas: None (the default) or two numbers in [0, 1)."""
    if betas is None:
        return
    ok = isinstance(betas, (tuple, list)) and len(betas) == 2 and all(
        isinstance(b, (int, float)) and not isinstance(b, bool) and 0 <= b < 1 for b in betas)
    if not ok:
        raise ValueError(f"betas must be two numbers in [0, 1) (beta1, beta2), got {betas!r}")


class Diverged(FloatingPointError):
    """Training reached a non-finite loss (NaN or inf): the run diverged, usually a learning rate too high.

    `step` is the step whose loss was not finite (0-based, counted from the run's start), `loss` that value, and
    `history` the run's History up to and including that step (book.optim.fit sets it), so a caller that sweeps
    rates can catch this and record the run as diverged; or pass fit(..., on_nonfinite="stop") to get the History
    back with History.diverged set."""

    def __init__(self, message: str, step: Optional[int] = None, loss: float = float("nan"), history=None):
        super().__init__(message)
        self.step, self.loss, self.history = step, loss, history


def train_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor, parameters=None,
               grad_clip: Optional[float] = None, check_finite: bool = True) -> float:
    """One update, the same in every trainer of the book: clear the gradients, backpropagate `loss`,
    clip the gradients' total norm to `grad_clip` (if given), step. Returns the loss as a float
    (which waits for the device, so a timer around the step measures real work): the step's one host sync.
    A non-finite loss raises Diverged (after the update) unless check_finite=False."""
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise ValueError(f"loss must be a scalar tensor, got {loss!r:.80}")
    if grad_clip is not None:
        if not grad_clip > 0:
            raise ValueError(f"grad_clip must be > 0 or None, got {grad_clip}")
        if parameters is None:
            raise ValueError("grad_clip needs the parameters to clip")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(parameters, grad_clip)
    optimizer.step()
    value = loss.item()
    if check_finite and not math.isfinite(value):
        raise Diverged(f"the loss is {value}: training diverged (a learning rate too high?)", loss=value)
    return value


def adamw(params, lr: float, weight_decay: float = 0.1, betas=(0.9, 0.99)) -> torch.optim.AdamW:
    """AdamW with the book's one weight-decay split (as nanoGPT): matrices (dim >= 2) decay; norms' gains,
    biases and every other 1-D parameter do not. `params`: a module or an iterable of parameters (tied
    weights count once). Chapter 7. book.optim.build_optimizer builds every optimizer of the book through it."""
    params = params.parameters() if isinstance(params, torch.nn.Module) else params
    positive_number(lr=lr)
    positive_number(weight_decay=weight_decay, allow_zero=True)
    _betas(betas)
    seen, kept = set(), []
    for p in params:
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            kept.append(p)
    groups = [{"params": [p for p in kept if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in kept if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=lr, betas=betas)
