"""Recorded experiments stay honest: every table in book/results comes with the provenance its benchmark wrote
(benchmarks/bench_common.record), and a table whose script changed since it was recorded fails here, with the
command that regenerates it (book.results.stale_reason)."""
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from book.results import RESULTS_DIR, provenance, read_rows, regenerate_command, sha256_of, stale_reason

ROOT = Path(__file__).resolve().parent.parent

# Results recorded before the benchmarks wrote provenance: no json, so nothing ties them to a script version. Each
# leaves this list when its benchmark is run again (then its json guards it like every new result).
KNOWN_LEGACY = {}
# results written with their own provenance inside (commit, date, torch, GPU) by a tool, not a benchmark
OWN_PROVENANCE = {"gpu_run.json": "tools/gpu_run.sh"}


def _provenances(folder: Path = RESULTS_DIR) -> dict:
    out = {}
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        if "script_sha256" in data:
            out[path.name] = data
    return out


def test_every_recorded_result_comes_from_the_script_in_the_tree():
    stale = [f"book/results/{name}: {reason}" for name, prov in _provenances().items()
             if (reason := stale_reason(prov, ROOT)) is not None]
    assert not stale, "\n".join(stale)


def test_every_recorded_file_has_provenance_or_is_known_legacy():
    covered = {out for prov in _provenances().values() for out in prov["outputs"]}
    files = {p.name for p in RESULTS_DIR.iterdir() if p.is_file()} - set(_provenances())
    orphans = files - covered - set(KNOWN_LEGACY) - set(OWN_PROVENANCE)
    assert not orphans, (f"book/results holds {sorted(orphans)} without provenance: write results with "
                         "benchmarks/bench_common.record(...), which writes <name>.json beside the table")
    for legacy in KNOWN_LEGACY:
        assert legacy in files, f"{legacy} is gone: remove it from KNOWN_LEGACY"
        assert legacy not in covered, f"{legacy} now has provenance: remove it from KNOWN_LEGACY"


def _fake_record(tmp_path, script_text: str):
    """A benchmark script under tmp_path/benchmarks and a result recorded from it; (root, results, provenance)."""
    root, results = tmp_path / "repo", tmp_path / "repo" / "book" / "results"
    (root / "benchmarks").mkdir(parents=True)
    results.mkdir(parents=True)
    script = root / "benchmarks" / "toy.py"
    script.write_text(script_text)
    (results / "toy.csv").write_text("a,b\n1,2\n")
    prov = {"script": "benchmarks/toy.py", "script_sha256": sha256_of(script), "argv": ["--steps", "9"],
            "outputs": {"toy.csv": sha256_of(results / "toy.csv")}}
    return root, results, prov


def test_the_check_fails_on_a_changed_script_and_names_the_command(tmp_path):
    source = (ROOT / "benchmarks" / "three_families.py").read_text()
    root, results, prov = _fake_record(tmp_path, source)
    assert stale_reason(prov, root, results) is None
    script = root / "benchmarks" / "toy.py"
    script.write_text(source.replace("CTX, BATCH, POS = 64, 32, 32", "CTX, BATCH, POS = 64, 32, 31"))  # one byte
    reason = stale_reason(prov, root, results)
    assert reason and "another version of benchmarks/toy.py" in reason
    assert reason.endswith("regenerate it with: python benchmarks/toy.py --steps 9")


def test_the_check_fails_on_a_table_edited_by_hand_or_a_missing_script(tmp_path):
    root, results, prov = _fake_record(tmp_path, "print('toy')\n")
    (results / "toy.csv").write_text("a,b\n1,3\n")
    assert "toy.csv is not the file benchmarks/toy.py wrote" in stale_reason(prov, root, results)
    (root / "benchmarks" / "toy.py").unlink()
    assert "benchmarks/toy.py is gone" in stale_reason(prov, root, results)
    with pytest.raises(ValueError, match="provenance must hold 'outputs'"):
        stale_reason({"script": "x.py", "script_sha256": "0"}, root, results)


def test_record_writes_the_table_and_a_provenance_the_check_accepts(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import argparse
    import time

    import bench_common

    started = time.perf_counter()
    args = argparse.Namespace(out=tmp_path / "toy.csv", seed=3, quick=False)
    script = ROOT / "benchmarks" / "three_families.py"
    path = bench_common.record("toy", {"toy.csv": (["x", "y"], [dict(x=1, y=2.5)]), "toy_more.csv": (["z"], [])},
                               None, args, [3, 7], started, str(script), ["--seed", "3"])
    prov = json.loads(path.read_text())
    assert path == tmp_path / "toy.json" and prov["script"] == "benchmarks/three_families.py"
    assert prov["script_sha256"] == sha256_of(script) and prov["seeds"] == [3, 7] and prov["args"]["seed"] == 3
    assert set(prov["outputs"]) == {"toy.csv", "toy_more.csv"} and prov["wall_s"] >= 0
    for key in ("git_commit", "torch", "cpu", "threads", "date", "python", "cpu_cores", "gpu"):
        assert key in prov, key
    assert regenerate_command(prov) == "python benchmarks/three_families.py --seed 3"
    assert stale_reason(prov, ROOT, tmp_path) is None
    assert read_rows("toy", tmp_path) == [{"x": "1", "y": "2.5"}] and provenance("toy", tmp_path) == prov


def test_the_readers_name_what_is_recorded(tmp_path):
    shutil.copy(RESULTS_DIR / "three_families.csv", tmp_path)
    assert read_rows("three_families", tmp_path)[0].keys() == {"family", "seed", "step", "seconds", "fill",
                                                               "cont_bits"}
    with pytest.raises(FileNotFoundError, match=r"recorded: \['three_families'\]"):
        read_rows("t5", tmp_path)
    with pytest.raises(FileNotFoundError, match="recorded before provenance"):
        provenance("three_families", tmp_path)
    with pytest.raises(ValueError, match="stem such as 'budget_leaderboard'"):
        read_rows("three_families.csv")


def test_every_benchmark_records_through_bench_common():
    """A benchmark that writes its table some other way would write no provenance."""
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        if script.name == "bench_common.py":
            continue
        text = script.read_text()
        assert "record(" in text and "write_rows(" not in text, f"{script.name}: end main() with record(...)"
        assert re.search(r"if not args\.quick( and [^:\n]+)?:", text), f"{script.name}: --quick must write nothing"


def test_every_refactor_of_a_recorded_script_carries_its_proof():
    """A result kept across an edit of its script (tools/prove_refactor.py) names the edit and the proof: the two
    versions gave identical tables on the same small configuration, and the chain ends at the tree's script."""
    seen = 0
    for name, prov in _provenances().items():
        chain = prov.get("refactors", [])
        for i, step in enumerate(chain):
            proof = step["proof"]
            assert proof["identical"] is True and proof["rows_compared"] > 0, f"{name}: refactor {i} has no proof"
            assert proof["command"].startswith(f"python tools/prove_refactor.py {prov['script']}"), name
            if i:
                assert step["from_sha256"] == chain[i - 1]["to_sha256"], f"{name}: refactor {i} breaks the chain"
        if chain:
            seen += 1
            assert chain[-1]["to_sha256"] == prov["script_sha256"], f"{name}: the last refactor is not the script"
            assert chain[0]["from_sha256"] != prov["script_sha256"]
    assert seen >= 1   # the speedrun's protocol move, the optimizer builder in attention_scale and copy_back


def test_prove_refactor_compares_tables_and_amends_provenance(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    import prove_refactor as pr

    rows = [{"t.csv": [{"step": "10", "val": "2.5", "cpu_s": "1.2"}], "log.txt": "done"}]
    same = [{"t.csv": [{"step": "10", "val": "2.5", "cpu_s": "9.9"}], "log.txt": "done"}]
    assert pr.differences(rows, same, "cpu_s") == []                  # measured seconds left out
    assert pr.differences(rows, same, None)                            # ... or not
    moved = [{"t.csv": [{"step": "10", "val": "2.6", "cpu_s": "1.2"}], "log.txt": "done"}]
    assert "row 0" in pr.differences(rows, moved, "cpu_s")[0]
    assert pr.differences(rows, rows + rows, None) == ["the old script recorded 1 times, the new one 2 times"]
    assert pr.differences(rows, [{"t.csv": [], "log.txt": "done"}], None) == ["record 0, t.csv: 1 rows vs 0"]
    assert pr.rows_compared(rows) == 1
    results = tmp_path / "results"
    results.mkdir()
    (results / "a.json").write_text(json.dumps({"script": "benchmarks/x.py", "script_sha256": "old"}))
    (results / "b.json").write_text(json.dumps({"script": "benchmarks/y.py", "script_sha256": "old"}))
    (results / "c.csv").write_text("not json")
    paths = pr.provenances("benchmarks/x.py", results)
    assert [p.name for p in paths] == ["a.json"]
    pr.amend(paths, "old", "new", {"identical": True})
    prov = json.loads((results / "a.json").read_text())
    assert prov["script_sha256"] == "new" and prov["refactors"] == [
        {"from_sha256": "old", "to_sha256": "new", "proof": {"identical": True}}]
    with pytest.raises(ValueError, match="recorded by sha256 new"):
        pr.amend(paths, "old", "newer", {})
