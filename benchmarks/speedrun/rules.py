"""The course speedrun's rules as code: the acceptance test, the records it yields, and the README it writes.

    python benchmarks/speedrun/rules.py          # README.md and book/results/speedrun_records.csv from the results
    python benchmarks/speedrun/rules.py --check  # exit 1 if README.md is not what the results say

book/results/speedrun_records.csv (provenance speedrun_records.json, bench_common.record) holds one row per
recorded entry in submission order, with its numbers and both tracks' verdicts; chapter 10 reads it.

The acceptance rule (`accept`), applied to one track at a time (CPU seconds to the target, or steps to it):
an entry beats the standing record when
  0. every one of its seeds reached the target (only record 0 may count a whole run instead);
  1. it has at least MIN_SEEDS seeds, and so has the record;
  2. every one of its seeds is below the record's mean (every seed agrees, as the book asks of any win); and
  3. a one-sided Welch t-test says its mean is below the record's at p < ALPHA; and
  4. on the time track, if it was recorded on another day than the record, it passes 2 and 3 in their duel too
     (duel.py: both in one process, in turns), because a machine's speed drifts between sessions.
Why both: with three seeds a side, a t-test alone can pass with a seed that is no better than the record, and the
every-seed condition alone can pass on a difference the seeds' spread swallows. Why p < 0.01: the rule is applied
once per entry, so its false-record rate adds up. `false_record_rate` measures it by simulation: an entry no
better than the record (both normal, spreads from a third to three times each other's) passes this rule 0.5-1 %
of the time; with p < 0.05, as until 2026-12-05, 4-5 %, i.e. about one false record in every twenty judgements.
The README states the rate and what it means for the judgements made so far. An entry that fails stays in the
negative-results log with its numbers. Entries are judged in the order they were submitted (entries.ENTRIES),
each against the record standing at that point.
"""
from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from book.files import atomic_write  # noqa: E402
from book.results import RESULTS_DIR, provenance, read_rows  # noqa: E402
from entries import ENTRIES, Entry, result_name  # noqa: E402
import protocol  # noqa: E402  (the measurement's constants, with which run.py recorded the results)

__all__ = ["ALPHA", "MIN_SEEDS", "TRACKS", "t_sf", "welch_p", "Verdict", "accept", "Result", "load_result",
           "judge", "readme", "record_rows", "false_record_rate", "duel_name", "duel_values"]

ALPHA = 0.01                       # until 2026-12-05: 0.05 (see false_record_rate)
SD_RATIOS = (1 / 3, 0.5, 1.0, 2.0, 3.0)   # the entry's seed spread over the record's, for false_record_rate
MIN_SEEDS = 3
TRACKS = {"time": ("cpu_s", "CPU seconds to the target"), "steps": ("steps", "steps to the target")}


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b) (continued fraction, Numerical Recipes' betacf)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1.0 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-14:
            break
    return front * f


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom (df > 0; any real t)."""
    if not df > 0:
        raise ValueError(f"df must be > 0, got {df}")
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def _mean_var(xs: Sequence[float]):
    m = sum(xs) / len(xs)
    return m, sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def welch_p(new: Sequence[float], old: Sequence[float]) -> float:
    """One-sided Welch t-test: the p-value of "new's mean is below old's" (small p: new is lower)."""
    if len(new) < 2 or len(old) < 2:
        raise ValueError(f"a t-test needs at least 2 values a side, got {len(new)} and {len(old)}")
    (mn, vn), (mo, vo) = _mean_var(new), _mean_var(old)
    se2 = vn / len(new) + vo / len(old)
    if se2 == 0:
        return 0.0 if mn < mo else 1.0
    t = (mo - mn) / math.sqrt(se2)
    df = se2 ** 2 / ((vn / len(new)) ** 2 / (len(new) - 1) + (vo / len(old)) ** 2 / (len(old) - 1))
    return t_sf(t, df)


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    p: float
    worst: float        # the new entry's worst (largest) seed
    old_mean: float
    reason: str


def accept(new: Sequence[float], old: Sequence[float], alpha: float = ALPHA, min_seeds: int = MIN_SEEDS) -> Verdict:
    """Does `new` (one value per seed, lower is better) beat the record `old`? See the module's docstring."""
    new, old = [float(v) for v in new], [float(v) for v in old]
    if not all(math.isfinite(v) and v >= 0 for v in new + old):
        raise ValueError(f"values must be finite and >= 0, got {new} and {old}")
    if len(old) < min_seeds:
        raise ValueError(f"the record needs at least {min_seeds} seeds, got {len(old)}")
    old_mean = sum(old) / len(old)
    if len(new) < min_seeds:
        return Verdict(False, float("nan"), max(new, default=float("nan")), old_mean,
                       f"only {len(new)} seeds (at least {min_seeds} needed)")
    p, worst = welch_p(new, old), max(new)
    if worst >= old_mean:
        return Verdict(False, p, worst, old_mean, f"its worst seed {worst:.2f} is not below the record's mean "
                                                  f"{old_mean:.2f} (Welch p = {p:.2g})")
    if not p < alpha:
        return Verdict(False, p, worst, old_mean, f"Welch p = {p:.2g} is not below {alpha}")
    return Verdict(True, p, worst, old_mean, f"every seed below the record's mean {old_mean:.2f}; Welch p = {p:.2g}")


@functools.lru_cache(maxsize=None)
def false_record_rate(alpha: float = ALPHA, seeds: int = MIN_SEEDS, draws: int = 20000, seed: int = 0):
    """How often `accept` makes a record of an entry that is no better than the record: (the rate at equal
    spreads, the largest rate over SD_RATIOS). Monte Carlo: `draws` pairs of `seeds` normal values a side with
    equal means, the entry's spread SD_RATIOS times the record's (values shifted far above 0)."""
    import numpy as np

    rates = []
    for ratio in SD_RATIOS:
        rng = np.random.default_rng(seed)
        new = 100 + ratio * rng.standard_normal((draws, seeds))
        old = 100 + rng.standard_normal((draws, seeds))
        maybe = new.max(1) < old.mean(1)          # the every-seed condition first: the t-test only where it holds
        rates.append(sum(accept(n, o, alpha, seeds).accepted for n, o in zip(new[maybe], old[maybe])) / draws)
    return rates[SD_RATIOS.index(1.0)], max(rates)


@dataclass
class Result:
    entry: Entry
    rows: List[Dict[str, str]]
    prov: dict

    def values(self, track: str) -> List[float]:
        return [float(r[TRACKS[track][0]]) for r in self.rows]

    @property
    def reached(self) -> int:
        return sum(r["reached"] == "True" for r in self.rows)


def load_result(e: Entry, results_dir: Optional[Path] = None) -> Optional[Result]:
    """The recorded result of entry `e` (book/results/speedrun_<slug>.csv/.json), or None if it was never run."""
    name = result_name(e.slug)
    if not (Path(results_dir or RESULTS_DIR) / f"{name}.csv").is_file():
        return None
    return Result(e, read_rows(name, results_dir), provenance(name, results_dir))


def _day(r: Result) -> str:
    """The day an entry was recorded (its provenance's date), "" if unknown."""
    return str(r.prov.get("date") or "")[:10]


def duel_name(a: str, b: str) -> str:
    """The recorded duel's stem in book/results (duel.py a b writes it)."""
    return f"speedrun_duel_{a}_vs_{b}".replace("-", "_").replace(".", "_")


def duel_values(a: str, b: str, results_dir: Optional[Path] = None):
    """The recorded duel of entry a against b: (a's CPU seconds, b's, every seed of a reached), or None."""
    name = duel_name(a, b)
    if not (Path(results_dir or RESULTS_DIR) / f"{name}.csv").is_file():
        return None
    rows = read_rows(name, results_dir)
    return ([float(r["cpu_s"]) for r in rows if r["entry"] == a], [float(r["cpu_s"]) for r in rows if r["entry"] == b],
            all(r["reached"] == "True" for r in rows if r["entry"] == a))


def _across_sessions(r: Result, record: Result, v: Verdict, results_dir: Optional[Path]) -> Verdict:
    """A time record between entries recorded on different days must also win their duel (one process, in turns):
    a machine's speed drifts between sessions by more than the gains judged here."""
    a, b = r.entry.slug, record.entry.slug
    duel = duel_values(a, b, results_dir)
    where = f"recorded on {_day(r)}, the record on {_day(record)}"
    if duel is None:
        return Verdict(False, v.p, v.worst, v.old_mean, f"{where}: across sessions a time record must also win a "
                                                         f"duel (duel.py {a} {b}), not run yet; apart, {v.reason}")
    d = accept(duel[0], duel[1])
    if d.accepted and duel[2]:
        return Verdict(True, v.p, v.worst, v.old_mean, f"{v.reason}; {where}, and in their duel {d.reason}")
    return Verdict(False, v.p, v.worst, v.old_mean, f"{where}: apart, {v.reason}; but in their duel (one process, "
                                                     f"in turns, ratio {sum(duel[0]) / sum(duel[1]):.3f}) {d.reason}")


def judge(results: Sequence[Result], track: str, results_dir: Optional[Path] = None):
    """Walk the results in submission order on one track: [(result, verdict or None, record number or None,
    the slug of the record it was judged against or None)]. The first result is record 0; each later one is judged
    against the record standing when it came. On the time track, an entry recorded on another day than that record
    must also win their recorded duel (_across_sessions)."""
    if track not in TRACKS:
        raise ValueError(f"track must be one of {sorted(TRACKS)}, got {track!r}")
    out, record, number = [], None, -1
    for r in results:
        if record is None:
            record, number = r, 0
            out.append((r, None, 0, None))
            continue
        v, against = accept(r.values(track), record.values(track)), record.entry.slug
        if v.accepted and r.reached < len(r.rows):   # a run cut off by its schedule is no record, however cheap
            v = Verdict(False, v.p, v.worst, v.old_mean, f"only {r.reached} of its {len(r.rows)} seeds reached the "
                                                         "target")
        if v.accepted and track == "time" and _day(r) and _day(record) and _day(r) != _day(record):
            v = _across_sessions(r, record, v, results_dir)
        if v.accepted:
            record, number = r, number + 1
        out.append((r, v, number if v.accepted else None, against))
    return out


def _stats(xs: Sequence[float], fmt: str) -> str:
    m = sum(xs) / len(xs)
    sd = math.sqrt(_mean_var(xs)[1]) if len(xs) > 1 else 0.0
    return f"{m:{fmt}} ± {sd:{fmt}} ({min(xs):{fmt}}–{max(xs):{fmt}})"


def _steps_cell(r: Result) -> str:
    cell = _stats(r.values("steps"), ".0f")
    return cell if r.reached == len(r.rows) else f"{cell}, target reached by {r.reached} of {len(r.rows)} seeds"


def _load(r: Result) -> str:
    return f"{sum(float(x['wall_s']) for x in r.rows) / sum(r.values('time')):.1f}"


def _row(r: Result) -> str:
    return (f"`{r.entry.slug}` | {r.entry.change} | {len(r.rows)} | {_stats(r.values('time'), '.1f')} | "
            f"{_load(r)} | {_steps_cell(r)} | {min(float(x['last_val']) for x in r.rows):.4f}–"
            f"{max(float(x['last_val']) for x in r.rows):.4f}")


HEAD = ("| # | entry | change | seeds | CPU s to target: mean ± sd (min–max) | wall / CPU | steps to target | "
        "val at stop | against the record before |\n|---|---|---|---|---|---|---|---|---|")

INTRO = """# The course speedrun

<!-- generated by benchmarks/speedrun/rules.py from book/results/speedrun_*.csv: do not edit by hand -->

How fast can a character GPT reach validation loss **{target} nats** on Tiny Shakespeare, on one CPU thread? The
target is the final validation loss of one run of nanoGPT's CPU recipe (2,000 steps) recorded for this book
(`book.train.NANOGPT_CPU_FINAL_VAL`). Record 0 is that recipe as the book runs it: nanoGPT's model, batch, schedule
and optimiser on the book's GPT and training loop, not nanoGPT's own `train.py`. {record0_cost}
{nano_finals}
Like modded-nanoGPT's speedrun, every record changes one thing (or one recipe) and has to
beat the standing record by a stated rule over several seeds; unlike it, it runs on a laptop CPU in minutes.

    python benchmarks/speedrun/run.py modern           # one entry, {seeds} seeds (about a minute each)
    python benchmarks/speedrun/run.py --record current # the current record
    python benchmarks/speedrun/run.py --list           # the entries
    python benchmarks/speedrun/rules.py                # this README, from the recorded results

## What is fixed

- **Data**: the book's Tiny Shakespeare, its split (`book.data.shakespeare_split`: the first 90 % trains) and its
  65-character tokenizer. Every entry trains with `book.train.RecipeRun`, i.e. the book's one training loop
  (`book.optim.fit`), on random windows drawn with the seed's generator.
- **Evaluation**: {windows:,} fixed validation windows of the entry's context (`book.train.evaluate_lm`, generator
  seed 1234; the same windows as `benchmarks/gpt_time_to_loss.py`), every {coarse} steps, and every {fine} steps
  once the next {coarse} could reach the target: when the loss is within {margin} nats of it, or when the drop over
  the last stride, scaled to {coarse} steps, is at least its distance to it; once on the fine grid, a run stays
  there (`protocol.next_stride`). A run stops at the first evaluation at or below the target. Evaluation is not
  timed. {resolution}
- **Two tracks.** *Time*: CPU seconds of the training steps (`time.process_time` around them, with
  `torch.set_num_threads(1)`): the process's own CPU time, which does not count the time other processes hold the
  core (wall time doubles or triples then). It is **not** free of load, though: on an earlier 2-core machine (an
  Intel Xeon with hyperthreads) the same six entries took 13-26 % more CPU seconds under heavy load than idle
  (shared caches, memory bandwidth, a sibling hyperthread). The column "wall / CPU" shows when an entry waited for
  a core (1.0: never), and a comparison between entries recorded under different loads, in different sessions or
  on different machines is biased by up to that much. A **duel** (`benchmarks/speedrun/duel.py a b`) removes the
  bias: both entries train in one process, in turns, seed by seed, and are judged by the same rule.
  *Steps*: the optimiser steps to the target, on the {fine}-step grid: independent of the hardware (but not of the
  batch: an entry's tokens per step are in its recipe). A run that never reaches the target counts its whole time
  and all its steps (this favours it); the table says how many seeds reached it.
- **Seeds**: {seeds} per entry (1337, 1338, ...: initialisation and batches).

## The acceptance rule

An entry becomes a record on a track when (0) every one of its seeds reached the target, (1) it and the record have
at least {min_seeds} seeds, (2) **every** seed of the entry is below the record's mean, and (3) a one-sided **Welch
t-test** puts the entry's mean below the record's at **p < {alpha}**; and (4) on the time track, an entry recorded on
another day than the record must also pass (2) and (3) in a **duel** against it (both in one process, in turns:
`duel.py`), because a machine's speed drifts between sessions by more than the gains judged here. Entries are
judged in the order they were submitted, each against the record standing then (entries submitted together are
judged in their listed order); the rest go to the negative-results log with their numbers. The time track decides
which recipe is the record; the steps track is judged by the same rule and listed beside it
(`benchmarks/speedrun/rules.py`, `accept` and `judge`, tested in `tests/test_speedrun.py`).

**How many false records it admits.** An entry that is no better than the record still passes this rule by luck
{frr} of the time (simulated, `rules.false_record_rate`: normal seeds, the entry's spread a third to three times the
record's). Over the {judged} judgements made on the time track so far, that is {expected} false records expected,
and a {any_false} chance of at least one. Until 2026-12-05 the rule asked p < 0.05, which admits {frr_old}: about
{expected_old} false records over the same judgements, a {any_false_old} chance of at least one. The records below are
re-judged under p < {alpha}; modded-nanoGPT asks the same p with many more runs.
"""


def readme(results_dir: Optional[Path] = None) -> str:
    """The README's text, generated from the entries and their recorded results."""

    results = [r for e in ENTRIES if (r := load_result(e, results_dir)) is not None]
    lines = [INTRO.format(target=protocol.TARGET, seeds=protocol.SEEDS,
                          windows=protocol.EVAL_BATCHES * protocol.EVAL_BATCH, coarse=protocol.COARSE,
                          fine=protocol.FINE, margin=protocol.MARGIN, min_seeds=MIN_SEEDS, alpha=ALPHA,
                          resolution=_resolution_note(results, protocol), nano_finals=_record0_note(results),
                          record0_cost=_record0_cost(results, results_dir),
                          **_false_records(max(len(results) - 1, 0)))]
    if not results:
        return "\n".join(lines + ["No entry has been recorded yet.\n"])
    time_walk, steps_walk = judge(results, "time", results_dir), judge(results, "steps", results_dir)
    base = results[0].values("time")
    lines += ["## Records (time track)", "", HEAD]
    for r, v, n, _ in time_walk:
        if n is not None and (v is None or v.accepted):
            ratio = (sum(r.values("time")) / len(r.rows)) / (sum(base) / len(base))
            note = "the baseline" if v is None else f"Welch p = {v.p:.2g}; {ratio:.3f} of record 0's time"
            lines.append(f"| {n} | {_row(r)} | {note} |")
    lines += ["", "## Records (steps track)", "", HEAD]
    for r, v, n, _ in steps_walk:
        if n is not None and (v is None or v.accepted):
            lines.append(f"| {n} | {_row(r)} | {'the baseline' if v is None else f'Welch p = {v.p:.2g}'} |")
    lines += ["", "## Negative results (kept)", "",
              "Entries that did not beat the standing record on the time track, with their numbers and the reason.",
              ""]
    negatives = [(r, v, s, a) for (r, v, n, a), (_, s, _, _) in zip(time_walk, steps_walk)
                 if v is not None and n is None]
    if not negatives:
        lines.append("None yet.")
    else:
        lines += ["| entry | change | seeds | CPU s to target | wall / CPU | steps to target | val at stop | "
                  "why not a record |", "|---|---|---|---|---|---|---|---|"]
        for r, v, s, against in negatives:
            steps_note = "; a record on the steps track" if s is not None and s.accepted else ""
            lines.append(f"| {_row(r)} | against `{against}`: {v.reason}{steps_note} |")
    duels = sorted(Path(results_dir or RESULTS_DIR).glob("speedrun_duel_*.csv"))
    if duels:
        lines += ["", "## Duels (side by side in one process)", "",
                  "Each row: two entries trained in turns in one process with the same seeds, CPU seconds to the "
                  "target (mean ± sd, min–max), and the rule applied to the first against the second.", "",
                  "| entry | against | seeds | its CPU s | their CPU s | ratio | rule |",
                  "|---|---|---|---|---|---|---|"]
        for path in duels:
            rows, prov = read_rows(path.stem, results_dir), provenance(path.stem, results_dir)
            a, b = ([float(r["cpu_s"]) for r in rows if r["entry"] == x] for x in (prov["a"], prov["b"]))
            v = accept(a, b)
            reached = all(r["reached"] == "True" for r in rows if r["entry"] == prov["a"])
            rule = v.reason if v.accepted and reached else f"not accepted: {v.reason}" if reached else \
                "not accepted: not every seed reached the target"
            lines.append(f"| `{prov['a']}` | `{prov['b']}` | {len(a)} | {_stats(a, '.1f')} | "
                         f"{_stats(b, '.1f')} | {sum(a) / sum(b):.3f} | {rule} |")
    pending = [e.slug for e in ENTRIES if load_result(e, results_dir) is None]
    if pending:
        lines += ["", "Submitted but not yet run: " + ", ".join(f"`{s}`" for s in pending) + "."]
    machines = sorted({(r.prov["cpu"], r.prov["cpu_cores"], r.prov["torch"]) for r in results})
    where = "; ".join(f"{cpu} ({cores} cores), torch {torch}" for cpu, cores, torch in machines)
    dates = sorted(r.prov["date"][:10] for r in results)
    lines += ["", f"Measured on {where}, from {dates[0]} to {dates[-1]}"
                  + (" (times from different machines do not compare)" if len(machines) > 1 else "")
                  + f". {_recording(results)} Each entry's provenance (command, commit, date, wall time) is in "
                  "`book/results/speedrun_<entry>.json`.", ""]
    return "\n".join(lines)


def _false_records(judged: int) -> dict:
    """The acceptance rule's false-record rates (now and with the old p < 0.05), and what they mean for `judged`
    judgements: the README's words."""
    words = {"judged": judged}
    for key, alpha in (("", ALPHA), ("_old", 0.05)):
        equal, worst = false_record_rate(alpha)
        words["frr" + key] = f"{100 * equal:.1f} %–{100 * worst:.1f} %"
        words["expected" + key] = f"{judged * equal:.2f}–{judged * worst:.2f}"
        some = [100 * (1 - (1 - rate) ** judged) for rate in (equal, worst)]
        words["any_false" + key] = f"{some[0]:.0f} %–{some[1]:.0f} %"
    return words


def _recording(results: Sequence[Result]) -> str:
    """How the entries were recorded: the first session's words, and which entries came in later sessions."""
    first = _day(results[0])
    later = [f"`{r.entry.slug}` ({_day(r)})" for r in results if _day(r) != first]
    return RECORDING.replace("The entries were", f"The entries of {first} were") + (
        " Recorded in later sessions, beside other work: " + ", ".join(later) + "; rule (4) judges them by their "
        "duels." if later else "")


RECORDING = ("The entries were recorded two at a time, one process per core, so every entry ran beside another "
             "speedrun process: a steady, similar load for all of them (the wall / CPU column stays near 1.0: neither "
             "process waits for a core, except while the other one compiles a model on both).")


def _record0_cost(results: Sequence[Result], results_dir: Optional[Path] = None) -> str:
    """What record 0's step costs against nanoGPT's own (speedrun_nanogpt_parity), and what its seeds took."""
    if not (Path(results_dir or RESULTS_DIR) / "speedrun_nanogpt_parity.csv").is_file() or not results:
        return ""
    rows, prov = read_rows("speedrun_nanogpt_parity", results_dir), provenance("speedrun_nanogpt_parity", results_dir)
    ms = {r["implementation"]: float(r["ms_per_step"]) for r in rows if r["section"] == "process"}
    ng, bk = ms["nanoGPT train.py"], ms["book record 0"]
    per_step = [1e3 * float(x["cpu_s"]) / int(x["steps"]) for x in results[0].rows]
    return (f"Its step costs what nanoGPT's does: side by side on one thread, nanoGPT's `train.py` (commit "
            f"{prov['nanogpt_commit'][:8]}, its README's CPU flags) takes {ng:.1f} ms per step and record 0 {bk:.1f} "
            f"ms, {bk / ng:.2f} times as long (`benchmarks/speedrun/nanogpt_parity.py`, {prov['date'][:10]}). Its "
            f"recorded seeds took {min(per_step):.0f}–{max(per_step):.0f} CPU ms per step, under the load they were "
            "recorded with (see *Two tracks*); the entries after it were recorded under the same kind of load."
            + _duel_check(results, results_dir))


def _duel_check(results: Sequence[Result], results_dir: Optional[Path] = None) -> str:
    """Each duel against record 0 (one process, in turns): its ratio beside the ratio of the separate recordings."""
    by_slug = {r.entry.slug: r for r in results}
    base = results[0].values("time")
    out = []
    for path in sorted(Path(results_dir or RESULTS_DIR).glob("speedrun_duel_*.csv")):
        rows, prov = read_rows(path.stem, results_dir), provenance(path.stem, results_dir)
        if prov["b"] != results[0].entry.slug or prov["a"] not in by_slug:
            continue
        a, b = ([float(r["cpu_s"]) for r in rows if r["entry"] == x] for x in (prov["a"], prov["b"]))
        separate = sum(by_slug[prov["a"]].values("time")) / len(by_slug[prov["a"]].rows) / (sum(base) / len(base))
        out.append(f"`{prov['a']}` took {sum(a) / sum(b):.3f} of record 0's CPU time in a duel (both in one "
                   f"process, in turns) and {separate:.3f} in their separate recordings")
    return (" " + "; ".join(out) + ".") if out else ""


def _record0_note(results: Sequence[Result]) -> str:
    """Where record 0's seeds ended on the fixed windows, and whether they reached the target."""
    if not results:
        return ""
    finals = [float(x["last_val"]) for x in results[0].rows]
    return (f"On the fixed windows below, its {len(finals)} recorded seeds end at {min(finals):.4f}–{max(finals):.4f} "
            f"nats: the target was reached by {results[0].reached} of them, so a stiff target, and record 0's whole "
            "run counts.")


def _resolution_note(results: Sequence[Result], grid_of) -> str:
    """A sentence on how exactly the recorded runs were caught: the evaluation grid they were recorded with, and
    how many steps before its stop each run that reached the target was last seen above it."""
    grid = (grid_of.COARSE, grid_of.FINE, grid_of.MARGIN, grid_of.GRID_RULE)
    other = [r.entry.slug for r in results
             if (r.prov.get("coarse"), r.prov.get("fine"), r.prov.get("margin"), r.prov.get("grid_rule")) != grid]
    if other:
        raise ValueError(f"recorded under another evaluation grid, run them again: {', '.join(other)}")
    gaps = [int(row["resolution"]) for r in results for row in r.rows if row["reached"] == "True"]
    if gaps and max(gaps) <= grid_of.FINE:
        return (f"Every one of the {len(gaps)} recorded runs that reached the target was seen above it "
                f"{grid_of.FINE} steps before it stopped, so its steps are exact to {grid_of.FINE}.")
    late = [f"`{r.entry.slug}` seed {row['seed']} ({row['resolution']} steps)" for r in results for row in r.rows
            if row["reached"] == "True" and int(row["resolution"]) > grid_of.FINE]
    return ("These runs were caught more than one fine stride after they were last seen above the target, so their "
            "steps and seconds may be too high by up to that many steps: " + ", ".join(late) + ".")


RECORD_FIELDS = ["order", "entry", "change", "seeds", "reached", "cpu_mean", "cpu_sd", "cpu_min", "cpu_max",
                 "steps_mean", "steps_min", "steps_max", "time_record", "time_p", "time_verdict", "steps_record",
                 "steps_p"]


def record_rows(results_dir: Optional[Path] = None) -> List[dict]:
    """One row per recorded entry, in submission order: its numbers and both tracks' verdicts (record number or
    empty, the Welch p against the record standing then, and the reason)."""
    results = [r for e in ENTRIES if (r := load_result(e, results_dir)) is not None]
    rows = []
    for i, ((r, tv, tn, ta), (_, sv, sn, _)) in enumerate(zip(judge(results, "time", results_dir),
                                                                   judge(results, "steps", results_dir))):
        cpu, steps = r.values("time"), r.values("steps")
        m = sum(cpu) / len(cpu)
        rows.append(dict(order=i, entry=r.entry.slug, change=r.entry.change, seeds=len(cpu), reached=r.reached,
                         cpu_mean=round(m, 2), cpu_sd=round(math.sqrt(_mean_var(cpu)[1]), 2) if len(cpu) > 1 else 0,
                         cpu_min=min(cpu), cpu_max=max(cpu), steps_mean=round(sum(steps) / len(steps), 1),
                         steps_min=int(min(steps)), steps_max=int(max(steps)),
                         time_record="" if tn is None else tn, time_p="" if tv is None else f"{tv.p:.3g}",
                         time_verdict="record 0 (the baseline)" if tv is None else f"against {ta}: {tv.reason}",
                         steps_record="" if sn is None else sn, steps_p="" if sv is None else f"{sv.p:.3g}"))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if README.md differs from the generated text")
    args = p.parse_args(argv)
    started = time.perf_counter()
    text, path = readme(), HERE / "README.md"
    if args.check:
        ok = path.is_file() and path.read_text() == text
        print("README.md is up to date" if ok else "README.md is stale: run python benchmarks/speedrun/rules.py")
        return 0 if ok else 1
    atomic_write(path, text)
    print(f"wrote {path.relative_to(ROOT)}")
    rows = record_rows()
    if rows:
        sys.path.insert(0, str(HERE.parent))
        from bench_common import record

        args.out = RESULTS_DIR / "speedrun_records.csv"
        record("speedrun_records", rows, RECORD_FIELDS, args, [], started, __file__, argv,
               extra={"alpha": ALPHA, "min_seeds": MIN_SEEDS, "judged": len(rows) - 1,
                      "false_record_rate": false_record_rate(ALPHA),
                      "false_record_rate_at_0.05": false_record_rate(0.05), "sd_ratios": list(SD_RATIOS)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
