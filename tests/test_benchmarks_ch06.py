"""Chapter 6's recorded experiment: the block-ladder benchmark's harness runs (--quick) and writes nothing."""
from nbtools import quick_benchmark


def test_block_ladder_quick_run_trains_every_part_and_writes_nothing():
    out, last = quick_benchmark("block_ladder.py")
    rungs = ["one_head", "multi-head", "+_FFN", "+_residual", "+_LayerNorm", "wide_head"]
    runs = ["Post-Norm", "Post-Norm+w", "Pre-Norm"]
    assert list(last) == [f"ladder:{r}" for r in rungs] + [f"warm:{r}@0.02" for r in runs]
    assert all(0 < float(v) < 8 for v in last.values())
    assert "wrote" not in out
