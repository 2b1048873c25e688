"""The speedrun's measurement protocol: the target, the seeds, the fixed validation windows and the evaluation grid.

run.py (which records the results), duel.py and rules.py (which writes the README from them) read it from here, so
no two of them import each other both ways.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from book.checks import positive_int  # noqa: E402
from book.train import NANOGPT_CPU_FINAL_VAL  # noqa: E402

__all__ = ["TARGET", "SEEDS", "FIRST_SEED", "EVAL_BATCH", "EVAL_BATCHES", "COARSE", "FINE", "MARGIN", "GRID_RULE",
           "next_stride"]

TARGET = NANOGPT_CPU_FINAL_VAL   # nats
SEEDS = 3
FIRST_SEED = 1337
EVAL_BATCH, EVAL_BATCHES = 64, 16   # 1,024 fixed windows, as in benchmarks/gpt_time_to_loss.py
COARSE, FINE, MARGIN = 50, 10, 0.15
GRID_RULE = ("fine within the margin, or when the last stride's drop scaled to the coarse stride reaches the target; "
             "once fine, always fine")


def next_stride(curve, coarse: int = COARSE, fine: int = FINE, margin: float = MARGIN, target: float = TARGET) -> int:
    """Steps to train before the next evaluation, given the evaluations so far, `curve` = [(step, val), ...].

    `fine` once the next `coarse` steps could carry the loss to the target: it is within `margin` nats of it, or
    the drop over the last stride, scaled to `coarse` steps, is at least its distance to the target; and once a run
    is on the fine grid it stays there (a validation loss wobbles by a hundredth from one evaluation to the next, and
    a schedule's decay steepens the drop, so one flat fine stride says little). Else `coarse`. So a fast run is not
    caught a whole coarse stride after it crossed (with 100-step strides and a 0.06 margin, a run that crossed at
    step 175 was first seen at step 200; with 50-step strides, a 0.06 margin and no stickiness, three of 51 runs
    were caught 50 steps after they were last seen above the target)."""
    positive_int(coarse=coarse, fine=fine)
    if not curve:
        return coarse
    step, last = curve[-1]
    stride = step - curve[-2][0] if len(curve) > 1 else step
    if last <= target + margin or (fine < coarse and stride == fine):
        return fine
    if len(curve) > 1 and (curve[-2][1] - last) * coarse / stride >= last - target:
        return fine
    return coarse
