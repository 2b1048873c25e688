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
