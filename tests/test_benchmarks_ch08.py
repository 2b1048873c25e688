"""Chapter 8's recorded experiment: the three-translator benchmark's harness runs (--quick) and writes nothing."""
from nbtools import quick_benchmark


def test_seq2seq_three_quick_run_trains_every_model_at_every_budget_and_writes_nothing():
    stdout, last = quick_benchmark("seq2seq_three.py")
    assert list(last) == ["longest", "RNN@2", "attention_RNN@2", "Transformer@2", "RNN@3", "attention_RNN@3",
                          "Transformer@3", "Transformer@4"]
    assert last["longest"] == "28-32"
    for key, span in last.items():
        if key != "longest":
            lo, hi = (float(x) for x in span.split(".."))
            assert 0.0 <= lo <= hi <= 1.0, (key, span)
    assert "wrote" not in stdout
