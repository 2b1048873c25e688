"""Chapter 6's recorded experiment: the block-ladder benchmark's harness runs (--quick) and writes nothing."""
from nbtools import quick_benchmark


def test_block_ladder_quick_run_trains_every_part_and_writes_nothing():
    out, last = quick_benchmark("block_ladder.py")
    rungs = ["one_head", "multi-head", "+_FFN", "+_residual", "+_LayerNorm", "wide_head"]
    runs = ["Post-Norm", "Post-Norm+w", "Pre-Norm", "no_LayerNorm"]
    assert list(last) == ([f"ladder:{r}" for r in rungs] + [f"warm:{r}@{lr}" for lr in ("0.01", "0.02") for r in runs]
                          + ["copy:1", "copy:2"])
    assert all(0 < float(last[f"ladder:{r}"]) < 8 for r in rungs)
    assert all(0 < float(v) < 8 for k, v in last.items() if k.startswith("warm:"))
    assert all(0 <= float(last[f"copy:{n}"]) <= 1 for n in (1, 2))
    assert "wrote" not in out
