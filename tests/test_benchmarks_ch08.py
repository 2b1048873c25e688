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


def test_recorded_table_has_every_model_budget_seed_and_bucket_the_chapter_reads():
    from book.results import provenance, read_rows
    from book.tasks import LENGTH_BUCKETS

    rows, prov = read_rows("seq2seq_three"), provenance("seq2seq_three")
    assert prov["seeds"] == [0, 1, 2] and prov["threads"] == 1
    configs = {(r["model"], int(r["steps"])) for r in rows}
    assert configs == {(m, s) for m in ("RNN", "attention RNN", "Transformer") for s in (200, 500)} | {
        ("Transformer", 1200)}
    for model, steps in configs:
        mine = [r for r in rows if (r["model"], int(r["steps"])) == (model, steps)]
        assert sorted((int(r["seed"]), int(r["lo"]), int(r["hi"])) for r in mine) == sorted(
            (s, lo, hi) for s in prov["seeds"] for lo, hi in LENGTH_BUCKETS)
        assert all(int(r["sentences"]) == 64 * steps and 0 <= float(r["exact"]) <= float(r["token"]) <= 1
                   for r in mine)


def test_the_live_run_outside_the_recorded_seeds_is_explained_by_a_rerun_on_its_processor():
    """seq2seq_seed0_*.csv: the record's script re-run with seed 0 elsewhere. Where this page's processor has such a
    rerun and the live number equals it, the sentence names the processor as the cause; otherwise it says what it
    knows and lists the reruns; inside the seeds' range it says so."""
    from book.chapters.ch08 import live_vs_record_sentence, seed0_reruns
    from book.results import provenance
    reruns = seed0_reruns()
    assert reruns and all(0 <= v <= 1 for v in reruns.values())
    assert provenance("seq2seq_three")["cpu"] not in reruns           # a rerun on another processor than the record's
    cpu, v = next(iter(reruns.items()))
    s = live_vs_record_sentence(v, [0.27, 0.285, 0.62], 0.285, "Intel Xeon", reruns, cpu)
    assert "The cause is the processor" in s and f"{v:.1%}" in s and "28.5%" in s
    s = live_vs_record_sentence(v + 0.01, [0.27, 0.285, 0.62], 0.285, "Intel Xeon", reruns, cpu)
    assert "cause" not in s and f"on {cpu} the record's script gives this seed {v:.1%}" in s
    assert live_vs_record_sentence(0.3, [0.27, 0.285, 0.62], 0.285).startswith("That lies inside")
