#!/usr/bin/env python3
"""Where the Transformer passes the count table: fit small runs, predict the budget, then run it. Chapter 10.

    python benchmarks/scaling_crossing.py --part fit        # the fit's extra runs (about 65 CPU-minutes; 2 workers)
    python benchmarks/scaling_crossing.py --part predict    # the fit and the prediction (seconds; no training)
    python benchmarks/scaling_crossing.py --part long --budgets 900 1800   # the long runs, after the prediction
    python benchmarks/scaling_crossing.py --quick           # a smoke test of every part, writes nothing

Two models, Chapter 10's modern GPT and Chapter 2's LSTM, trained exactly as benchmarks/budget_leaderboard.py
trains them (its run_job: the same batches, schedule stretched over the budget, evaluation on its 2,048 fixed
validation windows). The rule for the rate is stated in advance and is the same for both: each model keeps the
peak-rate factor the leaderboard's sweep chose at 60 s (book/results/budget_leaderboard.json, best_lr_factor), at
every budget. A budget of C CPU seconds is C x the steps per CPU second the leaderboard measured for that model
(its json, steps_per_cpu_second), so every budget is a fixed number of steps and the result does not depend on the
load of the machine that re-runs it. Compute is also counted in floating-point operations: the steps times one
training step's FLOPs (book.timing.count_flops; the LSTM's recurrence, which the counter does not see inside
nn.LSTM, counted on the same sizes unrolled with nn.LSTMCell).

--part fit trains both models at --fit-budgets (default 30, 120 and 480 CPU seconds), seeds --seeds; with the
leaderboard's recorded 15, 60 and 240 s they make six budgets per model (scaling_fit.csv).

--part predict fits validation bits/char against compute, L(C) = L_inf + A C^-alpha, per model, by least squares
over every seed's point (L_inf profiled on a grid below the lowest point, log(L - L_inf) linear in log C), against
CPU seconds and against FLOPs; a bootstrap over seeds (every budget's seeds resampled, --boot times) gives the
intervals. It predicts (1) the budget at which each model's curve passes the Kneser-Ney 7-gram's bits/char and
(2) the budget at which the GPT's predicted lead over the LSTM first exceeds the seeds' spread (the widest range of
three seeds among the points fitted). It writes scaling_prediction.csv (quantity, model, axis, estimate, low,
high) and its provenance: the prediction is dated before any long run.

--part long trains both models at --budgets (CPU seconds), the same rule, the same seeds: one table per call,
scaling_long_<budgets>.csv (e.g. scaling_long_1440.csv), each with its own provenance, so budgets recorded on
different days keep their dates. It refuses to run before a prediction is recorded.

The last line of each part: fit: <model>@<budget>=<mean bits/char> ... | predict: <quantity>:<model>=<estimate>
... | long: <model>@<budget>=<mean bits/char> ...
"""
from __future__ import annotations

import json
import math
import multiprocessing as mp
import time

import numpy as np
import torch

import budget_leaderboard as bl
from bench_common import ROOT, parser, record
from book.results import RESULTS_DIR, provenance, read_rows

RESULTS = ROOT / "book" / "results" / "scaling_fit.csv"
MODELS = ("modern GPT (ch. 10)", "LSTM (ch. 2)")
FIELDS = ["model", "budget_s", "seed", "lr", "steps", "flops", "cpu_s", "val_bpc"]
PRED_FIELDS = ["quantity", "model", "axis", "estimate", "low", "high"]


def step_flops(name: str, V: int) -> int:
    """FLOPs of one training step (forward and backward) of `name` at its batch and context."""
    from book.timing import count_flops

    B, T = bl.shape(name)
    model = bl._model(name, V)
    x = torch.randint(V, (B, T))
    total = count_flops(lambda: bl._loss(model, (x, x)).backward())
    if name.startswith("LSTM"):                       # nn.LSTM's fused kernel is invisible to the counter
        lstm = model.rnn
        cell = torch.nn.LSTMCell(lstm.input_size, lstm.hidden_size)
        e = torch.randn(B, T, lstm.input_size, requires_grad=True)

        def unrolled():
            h = c = torch.zeros(B, lstm.hidden_size)
            outs = []
            for t in range(T):
                h, c = cell(e[:, t], (h, c))
                outs.append(h)
            torch.stack(outs, 1).sum().backward()
        total += count_flops(unrolled)
    return total


def leaderboard_rule():
    """The leaderboard's recorded steps per CPU second and best rate factor for each model."""
    prov = provenance("budget_leaderboard")
    return prov["steps_per_cpu_second"], prov["best_lr_factor"]


def run_budgets(models, budgets, seeds, workers, eval_windows, V):
    rates, factors = leaderboard_rule()
    jobs = [dict(model=m, phase="final", budget_s=b, seed=s, factor=factors[m],
                 steps=max(1, round(b * rates[m])), steps_per_s=rates[m], eval_windows=eval_windows)
            for m in models for b in budgets for s in seeds]
    jobs.sort(key=lambda j: -j["budget_s"])                      # the longest first: the pool ends together
    with mp.get_context("spawn").Pool(workers, initializer=bl._init) as pool:
        done = pool.map(bl.run_job, jobs, chunksize=1)
    flops = {m: step_flops(m, V) for m in models}
    rows = []
    for d in sorted(done, key=lambda d: (d["model"], d["budget_s"], d["seed"])):
        rows.append(dict(model=d["model"], budget_s=d["budget_s"], seed=d["seed"], lr=d["lr"], steps=d["steps"],
                         flops=d["steps"] * flops[d["model"]], cpu_s=d["cpu_s"], val_bpc=round(d["val_bpc"], 4)))
        print(f"  {d['model']:22s} {d['budget_s']:6g} s seed {d['seed']} {d['steps']:7d} steps "
              f"({d['cpu_s']:.0f} CPU s) val {d['val_bpc']:.4f}", flush=True)
    return rows, flops


def fit_curve(c, y, grid: int = 400):
    """Least squares of y = L_inf + A c^-alpha -> (L_inf, A, alpha): L_inf on a grid below min(y), the rest a line
    in log-log. A flat or rising curve has no positive alpha: (min(y), 0, 0)."""
    c, y = np.asarray(c, float), np.asarray(y, float)
    best = (math.inf, float(y.min()), 0.0, 0.0)
    lo = y.min() - 3.0
    for L in np.linspace(lo, y.min() - 1e-4, grid):
        X = np.stack([np.ones_like(c), -np.log(c)], 1)
        coef, *_ = np.linalg.lstsq(X, np.log(y - L), rcond=None)
        A, alpha = math.exp(coef[0]), coef[1]
        if alpha <= 0:
            continue
        err = float(((L + A * c ** -alpha - y) ** 2).sum())
        if err < best[0]:
            best = (err, float(L), A, float(alpha))
    return best[1:]


def crossing(params, level: float) -> float:
    """The compute at which L_inf + A C^-alpha falls to `level`: inf if L_inf >= level."""
    L, A, alpha = params
    return math.inf if L >= level or alpha <= 0 else (A / (level - L)) ** (1 / alpha)


def lead_budget(p_gpt, p_lstm, spread: float, grid) -> float:
    """The first compute on `grid` at which the LSTM's curve lies more than `spread` above the GPT's (inf: none)."""
    f = lambda p, c: p[0] + p[1] * c ** -p[2]
    return next((float(c) for c in grid if f(p_lstm, c) - f(p_gpt, c) > spread), math.inf)


def predict(points: dict, kn: float, boot: int, seed: int):
    """points: {model: {budget_s: [(bits, flops), one per seed]}} -> rows of the prediction, and the fits."""
    rng = np.random.default_rng(seed)
    spread = max(max(b for b, _ in v) - min(b for b, _ in v) for m in points for v in points[m].values())
    rows, fits = [], {}
    for axis in ("cpu_s", "flops"):
        def xy(sample, axis=axis):
            out = {}
            for m, by_budget in sample.items():
                c = [fl if axis == "flops" else b for b, pts in by_budget.items() for _, fl in pts]
                out[m] = (c, [bits for pts in by_budget.values() for bits, _ in pts])
            return out
        est = {m: fit_curve(*v) for m, v in xy(points).items()}
        grid = np.geomspace(min(min(v[0]) for v in xy(points).values()), 1e3 * max(max(v[0]) for v in
                                                                                 xy(points).values()), 2000)
        draws = []
        for _ in range(boot):
            sample = {m: {b: [pts[i] for i in rng.integers(len(pts), size=len(pts))] for b, pts in by_budget.items()}
                      for m, by_budget in points.items()}
            f = {m: fit_curve(*v) for m, v in xy(sample).items()}
            draws.append((f, {m: crossing(f[m], kn) for m in f}, lead_budget(f[MODELS[0]], f[MODELS[1]], spread,
                                                                                grid)))
        def q(vals):   # the 5th and 95th percentiles; a crossing never reached (inf) sorts above every budget
            v = np.nan_to_num(np.asarray(vals, float), posinf=np.finfo(float).max)
            return tuple(math.inf if x == np.finfo(float).max else float(x) for x in np.quantile(v, [0.05, 0.95],
                                                                                                 method="lower"))
        for m in MODELS:
            for i, name in enumerate(("L_inf", "A", "alpha")):
                lo, hi = q([d[0][m][i] for d in draws])
                rows.append(dict(quantity=name, model=m, axis=axis, estimate=est[m][i], low=lo, high=hi))
            lo, hi = q([d[1][m] for d in draws])
            rows.append(dict(quantity="passes Kneser-Ney", model=m, axis=axis, estimate=crossing(est[m], kn), low=lo,
                             high=hi))
        lo, hi = q([d[2] for d in draws])
        rows.append(dict(quantity="lead beyond the spread", model=MODELS[0], axis=axis,
                         estimate=lead_budget(est[MODELS[0]], est[MODELS[1]], spread, grid), low=lo, high=hi))
        fits[axis] = est
    rows.append(dict(quantity="spread", model="", axis="bits/char", estimate=spread, low=spread, high=spread))
    rows.append(dict(quantity="Kneser-Ney", model="", axis="bits/char", estimate=kn, low=kn, high=kn))
    return rows, fits


def fit_points(extra_rows) -> dict:
    """The leaderboard's final runs of both models and `extra_rows` -> {model: {budget_s: [(bits, flops)]}}."""
    V = bl._corpus()[2].vocab_size
    flops = {m: step_flops(m, V) for m in MODELS}
    pts = {m: {} for m in MODELS}
    board = [r for r in read_rows("budget_leaderboard") if r["model"] in MODELS and r["phase"] == "final"]
    for r in board + list(extra_rows):
        m = r["model"]
        pts[m].setdefault(float(r["budget_s"]), []).append((float(r["val_bpc"]), int(r["steps"]) * flops[m]))
    return {m: dict(sorted(v.items())) for m, v in pts.items()}


def main(argv=None) -> None:
    p = parser(__doc__, RESULTS)
    p.add_argument("--part", choices=["fit", "predict", "long"], default="fit")
    p.add_argument("--fit-budgets", type=float, nargs="+", default=[30, 120, 480])
    p.add_argument("--budgets", type=float, nargs="+", default=[], help="--part long: CPU seconds per run")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--boot", type=int, default=1000, help="bootstrap resamples of the seeds")
    args = p.parse_args(argv)
    started = time.perf_counter()
    torch.set_num_threads(1)
    windows = 64 if args.quick else bl.EVAL_WINDOWS
    if args.quick:
        args.fit_budgets, args.budgets, args.seeds, args.boot = [0.3], [0.5], [0, 1], 20
    V = bl._corpus()[2].vocab_size
    kn = next(float(r["val_bpc"]) for r in read_rows("budget_leaderboard") if r["model"].startswith("Kneser"))
    if args.part == "fit" or args.quick:
        rows, flops = run_budgets(MODELS, args.fit_budgets, args.seeds, args.workers, windows, V)
        if not args.quick:
            record("scaling_fit", rows, FIELDS, args, args.seeds, started, __file__, argv,
                   extra={"step_flops": flops})
        print("fit: " + summary(rows, args.fit_budgets))
    if args.part == "predict" or args.quick:
        extra = rows if args.quick else read_rows("scaling_fit")
        pred, fits = predict(fit_points(extra), kn, args.boot, args.seed)
        for r in pred:
            print(f"  {r['quantity']:24s} {r['model']:22s} {r['axis']:9s} {r['estimate']:.4g} "
                  f"[{r['low']:.4g}, {r['high']:.4g}]")
        if not args.quick:
            out = [dict(r, estimate=f"{r['estimate']:.6g}", low=f"{r['low']:.6g}", high=f"{r['high']:.6g}")
                   for r in pred]
            record("scaling_prediction", out, PRED_FIELDS, argparse_out(args, "scaling_prediction.csv"), args.seeds,
                   started, __file__, argv, extra={"fits": fits, "kn_bits": kn})
        print("predict: " + " ".join(f"{r['quantity'].replace(' ', '_')}:{r['model'].split(' (')[0].replace(' ', '_')}"
                                     f"={r['estimate']:.4g}" for r in pred if r["axis"] == "cpu_s"
                                     and r["quantity"] in ("passes Kneser-Ney", "lead beyond the spread")))
    if args.part == "long" or args.quick:
        if not args.budgets:
            raise SystemExit("--part long needs --budgets (CPU seconds per run)")
        if not args.quick and not (RESULTS_DIR / "scaling_prediction.json").exists():
            raise SystemExit("record the prediction first: --part predict")
        rows, flops = run_budgets(MODELS, args.budgets, args.seeds, args.workers, windows, V)
        if not args.quick:
            pred = json.loads((RESULTS_DIR / "scaling_prediction.json").read_text())
            name = "scaling_long_" + "_".join(f"{b:g}" for b in args.budgets)
            record(name, rows, FIELDS, argparse_out(args, f"{name}.csv"), args.seeds, started,
                   __file__, argv, extra={"step_flops": flops, "prediction_date": pred["date"],
                                          "prediction_commit": pred["git_commit"]})
        print("long: " + summary(rows, args.budgets))


def summary(rows, budgets) -> str:
    """<model>@<budget>=<mean bits/char over the seeds> for every model and budget."""
    mean = lambda m, b: np.mean([r["val_bpc"] for r in rows if r["model"] == m and r["budget_s"] == b])
    return " ".join(f"{m.split(' (')[0].replace(' ', '_')}@{b:g}={mean(m, b):.4f}" for m in MODELS for b in budgets)


def argparse_out(args, name: str):
    """args with --out pointing at `name` beside the fit's table (one provenance file per part)."""
    import argparse
    return argparse.Namespace(**{**vars(args), "out": args.out.with_name(name)})


if __name__ == "__main__":
    main()
