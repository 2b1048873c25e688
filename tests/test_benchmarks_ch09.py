"""Chapter 9's recorded experiment: the three-families benchmark's harness runs (--quick) and writes nothing, and
its recorded result has the seeds, steps and models the chapter reads."""
from nbtools import quick_benchmark


def test_three_families_quick_run_trains_every_family_and_both_translators():
    stdout, last = quick_benchmark("three_families.py")
    assert set(last) == {"guess", "t5_leaves", "fill_last", "encdec_exact", "gpt_exact"}
    assert 0 < float(last["guess"]) < 0.5 and len(last["t5_leaves"].split(",")) == 2
    assert all(0 <= float(kv.split(":")[1]) <= 1 for kv in last["fill_last"].split(","))
    assert "decoder-only    seed" in stdout and "wrote" not in stdout

