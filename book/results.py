"""Recorded experiments: the tables the benchmarks write to book/results, and where each came from.

Every recorded benchmark (benchmarks/*.py, without --quick) writes its table `<name>.csv` and, beside it,
`<name>.json`: its provenance (the script and its sha256, the command line, git commit, torch, CPU, threads,
seeds, date, wall seconds, and the sha256 of every file it wrote). A chapter reads a table with `read_rows` and
can say where it came from with `provenance`; `tests/test_recorded.py` fails when the script in the tree is no
longer the one that wrote the table (`stale_reason`), and says which command regenerates it.
"""
from __future__ import annotations

import csv
import hashlib
import json
import math
import shlex
from numbers import Real
from pathlib import Path
from typing import Dict, List, Optional

from book.checks import positive_int, positive_number

__all__ = ["RESULTS_DIR", "scaling_rows",
           "range_verdict", "read_rows", "provenance", "sha256_of", "regenerate_command", "stale_reason",
           "budget_summary", "budget_table", "left_plateau",
           "seed_span", "value_range", "ladder_best"]

# the recorded tables, shipped with the package (pyproject's package-data: results/*.csv, results/*.json)
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _name(name) -> str:
    if not isinstance(name, str) or not name or "/" in name or "." in name:
        raise ValueError(f"name must be a recorded result's stem such as 'budget_leaderboard', got {name!r}")
    return name


def read_rows(name: str, results_dir: Optional[Path] = None) -> List[Dict[str, str]]:
    """The rows of book/results/<name>.csv as dicts of text (convert what you need)."""
    path = Path(results_dir or RESULTS_DIR) / f"{_name(name)}.csv"
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.csv"))
        raise FileNotFoundError(f"no recorded table {path}; recorded: {known}")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            header = reader.fieldnames
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not a UTF-8 CSV table ({e.reason} at byte {e.start}): a corrupt file? "
                         "Regenerate it (see its provenance)") from None
    if not header:
        raise ValueError(f"{path} is empty: a recorded table starts with a header line; regenerate it")
    for i, r in enumerate(rows):
        if None in r or None in r.values():        # more fields than the header, or fewer
            fields = sum(v is not None for k, v in r.items() if k is not None) + len(r.get(None) or [])
            raise ValueError(f"{path}, row {i + 1}: has {fields} fields "
                             f"where the header has {len(header)} ({header}): a truncated or hand-edited file? "
                             "Regenerate it")
    return rows


def _read_json(path: Path, what: str):
    """The JSON in `path`, or a ValueError that names the file (a truncated or hand-edited record)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON ({e}): a truncated or hand-edited {what}? Regenerate it") from None


def provenance(name: str, results_dir: Optional[Path] = None) -> dict:
    """The provenance book/results/<name>.json a benchmark wrote beside its table (see the module's docstring)."""
    path = Path(results_dir or RESULTS_DIR) / f"{_name(name)}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no provenance {path}: the result was recorded before provenance, or never")
    prov = _read_json(path, "provenance")
    if not isinstance(prov, dict):
        raise ValueError(f"{path} must hold a JSON object (the provenance's fields), got a {type(prov).__name__}")
    return prov


def sha256_of(path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def regenerate_command(prov: dict) -> str:
    """The command line that regenerates a recorded result, from the repository's root."""
    return shlex.join(["python", prov["script"], *prov.get("argv", [])])


def stale_reason(prov: dict, root: Path, results_dir: Optional[Path] = None) -> Optional[str]:
    """None if the recorded result still comes from the tree's script and its files are as recorded; else why not,
    with the command that regenerates it. `root` is the repository root that `prov["script"]` is relative to."""
    for key in ("script", "script_sha256", "outputs"):
        if key not in prov:
            raise ValueError(f"provenance must hold {key!r}, got the keys {sorted(prov)}")
    script = Path(root) / prov["script"]
    redo = f"regenerate it with: {regenerate_command(prov)}"
    if not script.is_file():
        return f"{prov['script']} is gone; remove its results or restore the script"
    if sha256_of(script) != prov["script_sha256"]:
        return (f"{', '.join(prov['outputs'])} recorded by another version of {prov['script']} "
                f"(sha256 {prov['script_sha256'][:12]}…, the tree's is {sha256_of(script)[:12]}…); {redo}")
    folder = Path(results_dir or RESULTS_DIR)
    for out, digest in prov["outputs"].items():
        if not (folder / out).is_file() or sha256_of(folder / out) != digest:
            return f"{out} is not the file {prov['script']} wrote (missing or edited by hand); {redo}"
    return None


def left_plateau(curve, base: float, margin: float = 0.05, consecutive: int = 2) -> Optional[int]:
    """The step at which a curve of (step, score) pairs, in step order, leaves its plateau: the first of
    `consecutive` successive evaluations that all score at least `base + margin`; None if it never does.
    Chapter 9's T5: fill accuracy against the commonest character's share `base` (one evaluation above it can be
    noise of the 256 windows; two in a row are not read as an exit by chance)."""
    positive_int(consecutive=consecutive)
    positive_number(margin=margin, allow_zero=True)
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not math.isfinite(base):
        raise ValueError(f"base must be a finite number (the plateau's score), got {base!r}")
    steps = [step for step, _ in curve]
    if steps != sorted(steps):
        raise ValueError(f"curve must be (step, score) pairs in step order, got the steps {steps}")
    run = 0
    for i, (_, score) in enumerate(curve):
        run = run + 1 if score >= base + margin else 0
        if run == consecutive:
            return curve[i - consecutive + 1][0]
    return None


def _seed_values(values, name: str, allow_none: bool = False) -> list:
    """Per-seed values as a list of finite numbers (None allowed with allow_none): a NaN is a diverged seed, which
    a mean, a span or a verdict would hide."""
    values = list(values)
    for i, v in enumerate(values):
        if v is None and allow_none:
            continue
        if isinstance(v, bool) or not isinstance(v, Real):
            raise TypeError(f"{name} must hold numbers (one per seed), got {v!r} at seed {i}")
        if not math.isfinite(v):
            raise ValueError(f"{name} holds {v} at seed {i}: a diverged run? A verdict over seeds needs finite values;"
                             " report the diverged seed separately")
    return values


def range_verdict(new, old) -> str:
    """Two configurations' per-seed costs to a target (steps or seconds; None = never reached; lower is better) ->
    "pays" when every seed of `new` beats every seed of `old` (or only `new` always reaches the target), "costs" in
    the reverse case, else "within the spread". A difference counts only beyond the seeds' spread. Chapters 7 and 10."""
    new, old = _seed_values(new, "new", allow_none=True), _seed_values(old, "old", allow_none=True)
    if not new or not old:
        raise ValueError(f"need at least one seed on each side, got {len(new)} and {len(old)}")
    miss_new, miss_old = sum(v is None for v in new), sum(v is None for v in old)
    if miss_new or miss_old:
        if miss_new == 0:
            return "pays"
        if miss_old == 0:
            return "costs"
        return "within the spread"
    if max(new) < min(old):
        return "pays"
    if min(new) > max(old):
        return "costs"
    return "within the spread"


def seed_span(values, fmt: str = "{:.0%}") -> str:
    """Every seed's value -> "mean (lowest–highest)", each written with `fmt`; one value in the brackets when every
    seed shows alike (value_range).

    Example: seed_span([0.2, 0.3]) -> '25% (20%–30%)'; seed_span([0.2, 0.2]) -> '20% (20%)'"""
    values = _seed_values(values, "values")
    if not values:
        raise ValueError("seed_span needs at least one value")
    return f"{fmt.format(sum(values) / len(values))} ({value_range(min(values), max(values), fmt)})"


def value_range(low, high, fmt: str = "{:.2f}", sep: str = "–") -> str:
    """'low–high' as shown, or the one value when both ends show alike ('4.87', never '4.87–4.87').
    Example: value_range(0.114, 0.116, "{:.0%}", " to ") -> '11%'; value_range(0.9, 0.95, "{:.0%}") -> '90%–95%'."""
    a, b = fmt.format(low), fmt.format(high)
    return a if a == b else f"{a}{sep}{b}"


def _truth(v) -> bool:
    if isinstance(v, str):
        if v not in ("True", "False"):
            raise ValueError(f"reached must be True or False, got {v!r}")
        return v == "True"
    return bool(v)


def ladder_best(rows) -> Dict[str, dict]:
    """A rate-swept ladder's runs (rows with rung, rate, seed, reached, steps, last_val; text or numbers, e.g.
    book/results/modern_ladder.csv) -> per rung, in the rows' order, its best rate and that rate's seeds. Chapter 10.

    The best rate has the most seeds at the target, then the fewest mean steps, then the lowest mean last loss: the
    same rule for every rung. Each value: {"rate", "seeds" (how many), "reached" (how many), "steps" and "last_val"
    (per seed, in seed order; steps None where the target was not reached), "edge" (the best rate is the lowest
    or the highest tried), "by_rate": {rate: (reached, mean steps of the runs that reached or None, mean last)}}."""
    groups: Dict[str, Dict[float, list]] = {}
    for r in rows:
        missing = {"rung", "rate", "seed", "reached", "steps", "last_val"} - set(r)
        if missing:
            raise ValueError("each row must hold rung, rate, seed, reached, steps and last_val; "
                             f"missing {sorted(missing)}")
        groups.setdefault(r["rung"], {}).setdefault(float(r["rate"]), []).append(
            (int(r["seed"]), _truth(r["reached"]), int(r["steps"]), float(r["last_val"])))
    out = {}
    for rung, rates in groups.items():
        by_rate, score = {}, {}
        for rate, runs in rates.items():
            runs.sort()
            hit = [s for _, ok, s, _ in runs if ok]
            last = sum(v for *_, v in runs) / len(runs)
            by_rate[rate] = (len(hit), sum(hit) / len(hit) if hit else None, last)
            score[rate] = (-len(hit), sum(hit) / len(hit) if len(hit) == len(runs) else float("inf"),
                           last if last == last else float("inf"))          # a diverged run's nan ranks last
        rate = min(score, key=score.get)
        runs = rates[rate]
        out[rung] = dict(rate=rate, seeds=len(runs), reached=sum(ok for _, ok, *_ in runs),
                         steps=[s if ok else None for _, ok, s, _ in runs], last_val=[v for *_, v in runs],
                         edge=len(rates) > 1 and rate in (min(rates), max(rates)),
                         by_rate=dict(sorted(by_rate.items())))
    return out


def _budget_label(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def budget_summary(rows) -> Dict[str, dict]:
    """The multi-budget leaderboard (benchmarks/budget_leaderboard.py's rows) per model:
    {model: {"chapter", "count" (True for a count model), "budgets": {budget_s: (mean, min, max, seeds)}}}.
    Count models have one entry, at their counting time, with seeds 1. Sweep rows (other learning rates) are left
    out."""
    out: Dict[str, dict] = {}
    for r in rows:
        missing = {"model", "chapter", "phase", "budget_s", "val_bpc"} - set(r)
        if missing:
            raise ValueError("each row must hold model, chapter, phase, budget_s and val_bpc; "
                             f"missing {sorted(missing)}")
        if r["phase"] not in ("final", "count", "sweep"):
            raise ValueError(f"phase must be 'final', 'count' or 'sweep', got {r['phase']!r}")
        if r["phase"] == "sweep":
            continue
        try:
            chapter, budget, bpc = int(r["chapter"]), float(r["budget_s"]), float(r["val_bpc"])
        except (TypeError, ValueError):
            raise ValueError("each row needs an integer chapter and numbers in budget_s and val_bpc, got "
                             f"{ {k: r[k] for k in ('model', 'chapter', 'budget_s', 'val_bpc')} }") from None
        if not math.isfinite(bpc) or not math.isfinite(budget):
            raise ValueError(f"val_bpc and budget_s must be finite, got {bpc} and {budget} for {r['model']!r}: "
                             "a diverged run? Leave it out of the summary, or report it")
        m = out.setdefault(r["model"], {"chapter": chapter, "count": r["phase"] == "count", "budgets": {}})
        m["budgets"].setdefault(budget, []).append(bpc)
    for m in out.values():
        m["budgets"] = {b: (sum(v) / len(v), min(v), max(v), len(v)) for b, v in sorted(m["budgets"].items())}
    return out


def scaling_rows() -> list:
    """The scaling study's trained rows as budget-leaderboard rows (benchmarks/scaling_crossing.py: the fit's
    scaling_fit.csv and every scaling_long_*.csv), with the recorded leaderboard's count models beside them, for
    budget_table. [] when the long runs are not recorded."""
    longs = sorted(RESULTS_DIR.glob("scaling_long_*.csv"))
    if not longs:
        return []
    board = read_rows("budget_leaderboard")
    chapter = {r["model"]: r["chapter"] for r in board}
    out = [r for r in board if r["phase"] == "count"]
    for name in ["scaling_fit"] + [p.stem for p in longs]:
        out += [dict(model=r["model"], chapter=chapter[r["model"]], phase="final", budget_s=r["budget_s"],
                     val_bpc=r["val_bpc"]) for r in read_rows(name)]
    return out


def budget_table(rows) -> str:
    """A markdown table of budget_summary(rows): one column per training budget (mean bits/char and the seeds'
    min-max), count models with their counting time; sorted by the largest budget, the best model last."""
    summary = budget_summary(rows)
    budgets = sorted({b for m in summary.values() if not m["count"] for b in m["budgets"]})
    if not budgets:
        raise ValueError("the rows hold no trained model (phase 'final')")
    head = ["| chapter | model | " + " | ".join(_budget_label(b) for b in budgets) + " |",
            "|---|---|" + "---|" * len(budgets)]

    def key(item):
        m = item[1]
        return -(next(iter(m["budgets"].values()))[0] if m["count"] else m["budgets"].get(budgets[-1], (0,))[0])

    lines = []
    for name, m in sorted(summary.items(), key=key):
        if m["count"]:
            (secs, (mean, *_)), = m["budgets"].items()
            cells = [f"{mean:.3f}"] * len(budgets)                     # counting takes seconds; it does not train
            name = f"{name}, counted in {secs:.1f} s"
        else:
            cells = [(f"{v[0]:.3f} ({v[1]:.3f}–{v[2]:.3f}, {v[3]} seeds)" if (v := m["budgets"].get(b)) else "–")
                     for b in budgets]
        lines.append(f"| {m['chapter']} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(head + lines) + "\n"
