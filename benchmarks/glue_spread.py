"""The seed spread of every number a chapter glues: each chapter run again with every seed shifted.

A glued number that depends on training, sampling or timing moves when the machine rounds differently, and by
about as much as it moves between seeds. So the tolerance the test suite allows such a number (book.glue's
`spread=`) comes from its spread across seeds, measured here: every chapter notebook runs from a fresh kernel,
once per seed shift, with every seed the chapter sets (`seed_everything`, `torch.manual_seed`,
`torch.Generator().manual_seed`, `random.seed`, `np.random.seed`, in the chapter's cells and in `book`) moved by
the shift, each run on one torch thread (BOOK_THREADS=1, whatever the chapter sets: another thread count is
one more way a machine rounds differently). Claims are not enforced in these runs (a claim may fail on another
seed: that is what the spread is for) and a cell that raises does not stop the run; the table says how many cells
raised.

    python benchmarks/glue_spread.py                     # every chapter, shifts 1000 2000 3000, two at a time
    python benchmarks/glue_spread.py --chapters 02_rnn_limits    # one chapter again, the others' rows kept
    python benchmarks/glue_spread.py --quick             # a small notebook, two shifts, writes nothing

Writes book/results/glue_spread.csv (chapter, seed_shift, name, value: the glued text/plain) and its provenance;
book.glue(name, value, spread="glue_spread", margin=...) reads it. The last line printed:
`chapters=N runs=N glues=N errored_cells=N failed_runs=N`.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import bench_common

ROOT = bench_common.ROOT
CHAPTERS = ROOT / "chapters"
FIELDS = ["chapter", "seed_shift", "name", "value", "errored_cells"]

# Run first in the kernel: every seed the chapter (or `book`) sets is moved by SHIFT.
SHIFT_CELL = """\
import random as _random, numpy as _np, torch as _torch
_SHIFT = {shift}
_torch_seed, _random_seed, _np_seed = _torch.manual_seed, _random.seed, _np.random.seed
_torch.manual_seed = lambda s: _torch_seed(int(s) + _SHIFT)
_random.seed = lambda s=None, *a, **k: _random_seed(s if s is None else int(s) + _SHIFT, *a, **k)
_np.random.seed = lambda s=None: _np_seed(s if s is None else (int(s) + _SHIFT) % 2**32)
class _ShiftedGenerator(_torch.Generator):
    def manual_seed(self, s):
        return super().manual_seed(int(s) + _SHIFT)
_torch.Generator = _ShiftedGenerator
"""


def run_notebook(path: Path, shift: int, timeout: int = 900) -> tuple:
    """(rows, errored cells, seconds): the glued values of one run of `path` with every seed moved by `shift`."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(SHIFT_CELL.format(shift=int(shift))))
    env = {k: v for k, v in os.environ.items() if k not in ("BOOK_LIVE_DIR", "BOOK_MAX_STEPS", "BOOK_SCALE")}
    env["BOOK_SPREAD_RUN"] = "1"     # book.claim reports instead of raising; no live export is written
    env["BOOK_DEVICE"] = "cpu"
    env["BOOK_THREADS"] = "1"          # one thread each: two runs at a time on two cores, never oversubscribed
    with tempfile.TemporaryDirectory() as live:
        env["BOOK_LIVE_DIR"] = live
        old = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                    resources={"metadata": {"path": str(path.parent)}})
            start = time.perf_counter()
            client.execute()
            seconds = time.perf_counter() - start
        finally:
            os.environ.clear()
            os.environ.update(old)
    errored = sum(1 for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error")
    rows = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            scrap = (out.get("metadata") or {}).get("scrapbook")
            if not scrap:
                continue
            text = next((v for k, v in out.get("data", {}).items() if k.endswith("text/plain")), None)
            if text is not None:
                rows.append({"chapter": path.stem, "seed_shift": int(shift), "name": scrap["name"], "value": text})
    for r in rows:
        r["errored_cells"] = errored
    return rows, errored, seconds


def _job(args):
    """One run's rows; kept in `keep` (a folder, or None) so that an interrupted recording resumes where it was."""
    path, shift, timeout, keep = args
    done = Path(keep) / f"{Path(path).stem}_{shift}.json" if keep else None
    if done and done.exists():
        return json.loads(done.read_text())
    try:
        rows, errored, seconds = run_notebook(Path(path), shift, timeout)
    except Exception as err:     # a dead kernel or a cell past its timeout: the run counts as failed, the rest go on
        print(f"{Path(path).stem} shift {shift}: failed ({type(err).__name__}: {str(err)[:200]})", flush=True)
        return []
    print(f"{Path(path).stem} shift {shift}: {len(rows)} glues, {errored} errored cells, {seconds:.0f} s", flush=True)
    if done:
        done.parent.mkdir(parents=True, exist_ok=True)
        done.write_text(json.dumps(rows))
    return rows


QUICK_NOTEBOOK = [
    "import torch\nfrom book import glue, seed_everything\nseed_everything(0)",
    "x = torch.randn(1000).mean().item()\nglue('quick_mean', round(x, 3), tol=0.5)",
    "g = torch.Generator().manual_seed(0)\nglue('quick_gen', round(torch.rand(1, generator=g).item(), 3), tol=1)",
]


def main(argv=None) -> int:
    p = bench_common.parser(__doc__, bench_common.RESULTS_DIR / "glue_spread.csv")
    p.add_argument("--chapters", nargs="*", default=None, help="notebook stems (default: every chapter)")
    p.add_argument("--shifts", nargs="*", type=int, default=[1000, 2000, 3000])
    p.add_argument("--workers", type=int, default=2, help="notebooks run at a time (each chapter sets its threads)")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per cell (a busy machine trains slowly)")
    p.add_argument("--keep", type=Path, default=None,
                   help="a folder for each finished run's values: run again with it to resume an interrupted recording")
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.quick:
        import nbformat

        folder = Path(tempfile.mkdtemp())
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in QUICK_NOTEBOOK])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        path = folder / "quick.ipynb"
        nbformat.write(nb, path)
        paths, shifts = [path], [1000, 2000]
    else:
        stems = args.chapters or sorted(q.stem for q in CHAPTERS.glob("[0-9][0-9]_*.ipynb"))
        paths = [CHAPTERS / f"{s}.ipynb" for s in stems]
        missing = [str(q) for q in paths if not q.exists()]
        if missing:
            p.error(f"--chapters: no such notebook {missing}")
        shifts = args.shifts
    if len(shifts) < 2 or len(set(shifts)) != len(shifts) or min(shifts) < 1:
        p.error(f"--shifts: at least two distinct positive shifts (with the committed run: >= 3 seeds), got {shifts}")
    jobs = [(str(q), s, args.timeout, args.keep and str(args.keep)) for q in paths for s in shifts]
    runtimes = CHAPTERS / "_generated" / "runtimes.json"
    cost = json.loads(runtimes.read_text()) if runtimes.exists() else {}
    jobs.sort(key=lambda j: -cost.get(Path(j[0]).stem, {}).get("cpu_s", 0))     # the long chapters first
    rows = []
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        for got in pool.map(_job, jobs):
            rows += got
    rows.sort(key=lambda r: (r["chapter"], r["name"], r["seed_shift"]))
    errored = sum({(r["chapter"], r["seed_shift"]): r["errored_cells"] for r in rows}.values())
    failed = len(jobs) - len({(r["chapter"], r["seed_shift"]) for r in rows})
    if args.quick:
        values = {(r["name"], r["seed_shift"]): r["value"] for r in rows}
        assert len(values) == 4 and values[("quick_gen", 1000)] != values[("quick_gen", 2000)], values
    if not args.quick:
        if args.chapters and args.out.exists():     # one chapter again: the other chapters' rows stay as recorded
            import csv

            with open(args.out, newline="") as f:
                kept = [r for r in csv.DictReader(f) if r["chapter"] not in {q.stem for q in paths}]
            rows = sorted(kept + rows, key=lambda r: (r["chapter"], r["name"], int(r["seed_shift"])))
        bench_common.record("glue_spread", rows, FIELDS, args, shifts, started, __file__, argv)
    print(f"chapters={len(paths)} runs={len(jobs)} glues={len({r['name'] for r in rows})} errored_cells={errored} "
          f"failed_runs={failed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
