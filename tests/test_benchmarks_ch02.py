"""Chapter 2's recorded experiments: their harnesses run end to end at a tiny scale (--quick writes nothing) and
print the last line their docstrings promise."""
import pytest
from nbtools import quick_benchmark


def test_recall_capacity_quick_run():
    stdout, fields = quick_benchmark("recall_capacity.py")
    assert set(fields) == {"worst_digit_acc_8"} and 0 <= float(fields["worst_digit_acc_8"]) <= 1
    assert "| n =   1 |" in stdout and "| n =   2 |" in stdout


def test_recall_curriculum_quick_run():
    stdout, fields = quick_benchmark("recall_curriculum.py")
    assert set(fields) == {"rnn_uniform_k1", "rnn_curriculum_k1", "rnn_curriculum_k8"}
    assert all(0 <= float(v) <= 1 for v in fields.values())
    assert stdout.count("curriculum seed 0") == 2 and stdout.count("uniform    seed 0") == 2     # rnn and lstm


def test_seq2seq_bottleneck_quick_run():
    stdout, fields = quick_benchmark("seq2seq_bottleneck.py")
    assert set(fields) == {"chapter_long_exact_max", "2x_sizes_long_exact_max", "4x_steps_long_exact_max"}
    assert all(0 <= float(v) <= 1 for v in fields.values())
    assert "without AND" in stdout


@pytest.mark.parametrize("name", ["recall_capacity", "recall_curriculum", "seq2seq_bottleneck"])
def test_chapter_2s_recorded_results_ship_with_their_provenance(name):
    from book.results import RESULTS_DIR, provenance
    if not (RESULTS_DIR / f"{name}.csv").is_file():
        pytest.skip(f"{name} is not recorded yet")
    prov = provenance(name)
    assert prov["script"] == f"benchmarks/{name}.py" and len(prov["seeds"]) >= 3 and prov["threads"] == 1
