#!/usr/bin/env python3
"""Keep a recorded result valid across a refactor of its benchmark script, by proof instead of hours of re-recording.

    python tools/prove_refactor.py benchmarks/attention_scale.py -- --steps 20 --lrs 0.01 --n-seeds 1
    python tools/prove_refactor.py benchmarks/speedrun/run.py --ignore 'cpu_s|_s$' --env BOOK_MAX_STEPS=30 -- course

Run it with the edit not yet committed. It runs the script twice on a small configuration (the arguments after
`--`), each in a copy of the working tree: once with `benchmarks/` as committed (HEAD: the version that recorded the
results) and once as edited, both on the working tree's `book` package. `record` (benchmarks/bench_common.py) is
replaced by one that keeps the rows instead of writing results, so nothing under book/results is touched by the
runs. If every table it would have written is identical (columns matching --ignore left out: measured seconds,
which no two runs share), each provenance file of that script gets a `refactors` entry (the two sha256, the proof's
command, how many rows were compared) and its `script_sha256` moves to the edited script; tests/test_recorded.py
then accepts the result again. If anything differs, it prints the first differences and changes nothing.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from book.files import atomic_write  # noqa: E402
from book.results import RESULTS_DIR, sha256_of  # noqa: E402

# runs the benchmark with bench_common.record replaced: the tables go to $PROVE_OUT as JSON, never to book/results
RUNNER = r'''
import json, os, runpy, sys
root, script, out = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path[:0] = [root, os.path.join(root, "benchmarks"), os.path.dirname(os.path.join(root, script))]
import bench_common

def keep(name, rows, fields, args, seeds, started, script, argv=None, extra=None, texts=None):
    tables = rows if isinstance(rows, dict) else {f"{name}.csv": (fields, rows)}
    kept = {fname: [{k: str(r.get(k, "")) for k in fs} for r in rs] for fname, (fs, rs) in tables.items()}
    kept.update({fname: text for fname, text in (texts or {}).items()})
    with open(out, "a") as f:
        f.write(json.dumps(kept) + "\n")
    return None

bench_common.record = keep
sys.argv = [os.path.join(root, script)] + sys.argv[4:]
runpy.run_path(os.path.join(root, script), run_name="__main__")
'''
SKIP = shutil.ignore_patterns(".git", ".venv", "_build", ".assets", "__pycache__", "*.egg-info", "node_modules")


def provenances(script: str, results_dir: Path = RESULTS_DIR) -> list:
    """The provenance files (book/results/*.json) recorded by `script` (a path relative to the root)."""
    out = []
    for path in sorted(Path(results_dir).glob("*.json")):
        try:
            prov = json.loads(path.read_text(encoding="utf8"))
        except (OSError, ValueError):
            continue
        if isinstance(prov, dict) and prov.get("script") == script:
            out.append(path)
    return out


def differences(old: list, new: list, ignore: str | None) -> list:
    """The first differences between two runs' kept tables (lists of {file: rows or text}), as text."""
    drop = re.compile(ignore) if ignore else None
    clean = lambda rows: [{k: v for k, v in r.items() if not (drop and drop.search(k))} for r in rows]
    if len(old) != len(new):
        return [f"the old script recorded {len(old)} times, the new one {len(new)} times"]
    found = []
    for i, (a, b) in enumerate(zip(old, new)):
        if sorted(a) != sorted(b):
            found.append(f"record {i}: files {sorted(a)} vs {sorted(b)}")
            continue
        for fname in a:
            x, y = a[fname], b[fname]
            if isinstance(x, str) or isinstance(y, str):
                if (drop and drop.search(fname)) or x == y:
                    continue
                found.append(f"record {i}, {fname}: the texts differ")
            elif len(x) != len(y):
                found.append(f"record {i}, {fname}: {len(x)} rows vs {len(y)}")
            else:
                found += [f"record {i}, {fname}, row {j}: {r} vs {s}" for j, (r, s) in
                          enumerate(zip(clean(x), clean(y))) if r != s][:5]
    return found


def rows_compared(kept: list) -> int:
    return sum(len(v) for record in kept for v in record.values() if isinstance(v, list))


def run_copy(tree: Path, script: str, args: list, env: dict, out: Path) -> list:
    """Run `script` in `tree` with the kept-rows `record`; the list of what each record call would have written."""
    out.unlink(missing_ok=True)
    full_env = {**os.environ, **env, "PYTHONPATH": str(tree)}
    res = subprocess.run([sys.executable, "-c", RUNNER, str(tree), script, str(out), *args], cwd=tree, env=full_env,
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"prove_refactor: {script} failed in {tree}:\n{res.stdout[-2000:]}{res.stderr[-4000:]}")
    if not out.is_file():
        raise SystemExit(f"prove_refactor: {script} {' '.join(args)} recorded nothing (with --quick, record is "
                         f"skipped: give a small configuration instead)")
    return [json.loads(line) for line in out.read_text().splitlines()]


def amend(paths: list, old_sha: str, new_sha: str, proof: dict) -> None:
    """Add the refactor to each provenance file and point it at the edited script (atomic writes)."""
    for path in paths:
        prov = json.loads(Path(path).read_text(encoding="utf8"))
        if prov["script_sha256"] != old_sha:
            raise ValueError(f"{path} was recorded by sha256 {prov['script_sha256'][:12]}…, not {old_sha[:12]}…")
        prov.setdefault("refactors", []).append({"from_sha256": old_sha, "to_sha256": new_sha, "proof": proof})
        prov["script_sha256"] = new_sha
        atomic_write(path, json.dumps(prov, indent=1) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("script", help="the benchmark script, relative to the repository root")
    p.add_argument("--ignore", help="regex of columns (and text files) left out of the comparison: measured times")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for both runs (e.g. BOOK_MAX_STEPS=30)")
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    a, args = p.parse_args(argv[:cut]), argv[cut + 1:]    # after --: the script's small configuration
    script = Path(a.script).as_posix()
    if not (ROOT / script).is_file():
        raise SystemExit(f"prove_refactor: script {script!r} not found under {ROOT}")
    env = dict(kv.split("=", 1) for kv in a.env)
    paths = provenances(script)
    if not paths:
        raise SystemExit(f"prove_refactor: no book/results/*.json was recorded by {script}")
    recorded = {json.loads(p.read_text())["script_sha256"] for p in paths}
    head = subprocess.run(["git", "show", f"HEAD:{script}"], cwd=ROOT, capture_output=True).stdout
    old_sha, new_sha = hashlib.sha256(head).hexdigest(), sha256_of(ROOT / script)
    if recorded != {old_sha}:
        raise SystemExit(f"prove_refactor: the results of {script} were recorded by {sorted(recorded)}, but HEAD's "
                         f"script is {old_sha}: run this before committing the edit, on results that are current")
    if old_sha == new_sha:
        raise SystemExit(f"prove_refactor: {script} is unchanged since HEAD: nothing to prove")
    with tempfile.TemporaryDirectory(prefix="prove_refactor.") as tmp:
        old_tree, new_tree = Path(tmp) / "old", Path(tmp) / "new"
        shutil.copytree(ROOT, new_tree, ignore=SKIP)
        shutil.copytree(ROOT, old_tree, ignore=SKIP)
        shutil.rmtree(old_tree / "benchmarks")            # the committed benchmarks, on today's book package
        archive = subprocess.run(["git", "archive", "HEAD", "benchmarks"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive.stdout, check=True)
        old = run_copy(old_tree, script, args, env, Path(tmp) / "old.jsonl")
        new = run_copy(new_tree, script, args, env, Path(tmp) / "new.jsonl")
    found = differences(old, new, a.ignore)
    if found:
        print(f"prove_refactor: {script} gives different results after the edit; nothing changed:", *found, sep="\n  ")
        return 1
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    proof = {"command": " ".join(["python", "tools/prove_refactor.py", script]
                                 + [f"--env {kv}" for kv in a.env] + ([f"--ignore '{a.ignore}'"] if a.ignore else [])
                                 + ["--", *args]),
             "identical": True, "rows_compared": rows_compared(new), "ignored": a.ignore, "before_commit": commit,
             "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    amend(paths, old_sha, new_sha, proof)
    print(f"prove_refactor: identical ({proof['rows_compared']} rows); {len(paths)} provenance files now accept "
          f"{script} at {new_sha[:12]}…: {', '.join(p.name for p in paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
