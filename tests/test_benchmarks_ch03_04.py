"""The benchmarks behind chapters 3 and 4: their harnesses run (--quick), and the recorded tables the chapters read
say what the chapters say they do."""
import subprocess
import sys
from pathlib import Path

import pytest

from book.results import read_rows
from book.seq2seq import Seq2SeqConfig, build_seq2seq
from book.tasks import LENGTH_BUCKETS, ToyTranslation
from book.utils import count_params

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def _quick(script, *args):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick", *args],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_seq2seq_matched_quick_run_trains_every_configuration():
    last = _quick("seq2seq_matched.py").strip().splitlines()[-1]
    fields = dict(kv.split("=") for kv in last.split())
    assert fields.pop("longest") == "28-32"
    assert set(fields) == {"plain", "plain_d_dec_raised", "plain_d_enc_raised", "additive"}
    for value in fields.values():
        lo, hi = (float(v) for v in value.split(".."))
        assert 0 <= lo <= hi <= 1


def test_the_raised_plain_models_are_the_smallest_with_the_attention_models_parameters():
    from seq2seq_matched import CONFIGS
    task = ToyTranslation()
    size = lambda **kw: count_params(build_seq2seq(Seq2SeqConfig(len(task.src_vocab), len(task.tgt_vocab), **kw)))
    attention = size(**CONFIGS["additive"])
    for name, field in [("plain, d_dec raised", "d_dec"), ("plain, d_enc raised", "d_enc")]:
        kw = CONFIGS[name]
        assert size(**kw) >= attention > size(**{**kw, field: kw[field] - 1}), name


def test_recorded_seq2seq_matched_has_three_seeds_of_every_configuration():
    rows = read_rows("seq2seq_matched")
    from seq2seq_matched import CONFIGS
    for name in CONFIGS:
        mine = [r for r in rows if r["config"] == name]
        assert len({r["seed"] for r in mine}) >= 3, name
        assert {(int(r["lo"]), int(r["hi"])) for r in mine} == set(LENGTH_BUCKETS), name
    params = {r["config"]: int(r["params"]) for r in rows}
    assert params["plain, d_dec raised"] >= params["additive"] and params["plain, d_enc raised"] >= params["additive"]


@pytest.mark.parametrize("extra", [[], ["--device", "cpu"]])
def test_parallel_threads_quick_run_times_every_model_at_every_thread_count(extra):
    lines = _quick("parallel_threads.py", *extra).strip().splitlines()
    fields = dict(kv.split("=") for kv in lines[-1].split())
    assert set(fields) >= {"T", "loop_2v1", "nn_rnn_2v1", "attention_2v1", "fused_2v1"}
    assert all(float(v) > 0 for k, v in fields.items() if k != "T")


def test_recorded_parallel_threads_has_every_model_at_one_and_two_threads_with_repeats():
    from parallel_threads import MODELS
    rows = [r for r in read_rows("parallel_threads") if r["device"] == "cpu"]
    lengths = {int(r["T"]) for r in rows}
    assert len(lengths) >= 3
    for model in MODELS:
        for T in lengths:
            for threads in (1, 2):
                readings = [float(r["seconds"]) for r in rows
                            if (r["model"], int(r["T"]), int(r["threads"])) == (model, T, threads)]
                assert len(readings) >= 3 and len(readings) % 2 == 1, (model, T, threads)   # Chapter 4 takes the median
                assert all(s > 0 for s in readings)
