"""The course speedrun (benchmarks/speedrun): its acceptance rule, its records table generated from the recorded
results, and a smoke run of the current record's script (--quick, writes nothing)."""
import dataclasses
import math
import sys
from pathlib import Path

import pytest
import torch
from nbtools import quick_benchmark

from book.results import read_rows
from book.train import MODERN_CPU

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks" / "speedrun"))
import rules  # noqa: E402
from entries import ENTRIES, MODERN_CH10, Entry, entry, result_name  # noqa: E402


def test_t_distribution_tail_matches_tables():
    assert rules.t_sf(0.0, 3) == pytest.approx(0.5)
    assert rules.t_sf(1.0, 1) == pytest.approx(0.25, abs=1e-9)          # Cauchy: P(T > 1) = 1/4
    assert rules.t_sf(2.015, 5) == pytest.approx(0.05, abs=5e-4)        # the t-table's one-sided 5 % points
    assert rules.t_sf(2.920, 2) == pytest.approx(0.05, abs=5e-4)
    assert rules.t_sf(6.965, 2) == pytest.approx(0.01, abs=1e-4)
    assert rules.t_sf(-2.015, 5) == pytest.approx(0.95, abs=5e-4)
    assert rules.t_sf(math.inf, 4) == 0.0
    with pytest.raises(ValueError, match="df must be > 0"):
        rules.t_sf(1.0, 0)


def test_welch_p_is_small_for_a_clear_gain_and_a_half_for_none():
    assert rules.welch_p([50, 51, 49], [100, 102, 98]) < 1e-3
    assert rules.welch_p([10, 11, 9], [10, 11, 9]) == pytest.approx(0.5)
    assert rules.welch_p([100, 102, 98], [50, 51, 49]) > 0.999
    with pytest.raises(ValueError, match="at least 2 values a side"):
        rules.welch_p([1.0], [1.0, 2.0])


def test_accept_needs_every_seed_below_the_mean_and_the_t_test_and_three_seeds():
    old = [100.0, 102.0, 98.0]
    assert rules.accept([50, 51, 49], old).accepted
    v = rules.accept([5.0] * 9 + [10.05], [10.0, 10.1, 9.9])       # p tiny, but one seed is no better
    assert not v.accepted and v.p < 1e-4 and "worst seed 10.05 is not below the record's mean 10.00" in v.reason
    v = rules.accept([9.5, 9.6, 9.7], [10.0, 12.0, 8.0])            # every seed better, within the record's spread
    assert not v.accepted and v.p > 0.05 and "Welch p" in v.reason
    v = rules.accept([50, 51], old)
    assert not v.accepted and "only 2 seeds" in v.reason
    with pytest.raises(ValueError, match="the record needs at least 3 seeds"):
        rules.accept([50, 51, 49], [100, 101])
    with pytest.raises(ValueError, match="finite"):
        rules.accept([50, float("nan"), 49], old)


def test_the_rule_asks_p_below_0_01_and_its_false_record_rate_is_stated():
    assert rules.ALPHA == 0.01
    v = rules.accept([9.0, 9.1, 8.9], [10.0, 10.4, 9.6])              # every seed better, p between 0.01 and 0.05
    assert 0.01 <= v.p < 0.05 and not v.accepted and "is not below 0.01" in v.reason
    assert rules.accept([9.0, 9.1, 8.9], [10.0, 10.4, 9.6], alpha=0.05).accepted
    now, old = rules.false_record_rate(0.01), rules.false_record_rate(0.05)
    assert 0 < now[0] <= now[1] <= 0.012 and 0.03 < old[0] <= old[1] < 0.055   # simulated: near the t-test's alpha
    text = rules.readme()
    assert f"{100 * now[0]:.1f} %–{100 * now[1]:.1f} %" in text and f"{100 * old[0]:.1f} %–{100 * old[1]:.1f} %" in text
    with pytest.raises(ValueError, match="values must be finite"):
        rules.accept([1.0, 2.0, float("inf")], [1.0, 2.0, 3.0])


def test_the_parity_benchmark_names_what_it_needs():
    import subprocess
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "speedrun" / "nanogpt_parity.py"), "--quick"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--nanogpt must name a checkout of nanoGPT" in out.stderr
    rows = read_rows("speedrun_nanogpt_parity")
    ms = {r["implementation"]: float(r["ms_per_step"]) for r in rows if r["section"] == "process"}
    assert set(ms) == {"nanoGPT train.py", "book record 0"}
    assert 0.9 < ms["book record 0"] / ms["nanoGPT train.py"] < 1.1    # recorded: record 0 costs what nanoGPT costs


def _fake(slug, cpu, steps=(100, 100, 100), reached=True):
    rows = [dict(cpu_s=str(c), steps=str(s), reached=str(reached), last_val="1.88") for c, s in zip(cpu, steps)]
    return rules.Result(Entry(slug, slug, MODERN_CH10), rows, {})


def test_judge_walks_in_order_against_the_standing_record():
    walk = rules.judge([_fake("a", [100, 101, 99]), _fake("b", [50, 51, 49]), _fake("c", [80, 81, 79]),
                        _fake("d", [30, 31, 29], steps=(200, 201, 199))], "time")
    assert [(r.entry.slug, n, a) for r, v, n, a in walk] == [("a", 0, None), ("b", 1, "a"), ("c", None, "b"),
                                                              ("d", 2, "b")]
    assert "worst seed 81.00" in walk[2][1].reason                       # c beats a, but b was the record
    steps = rules.judge([_fake("a", [1, 1, 1]), _fake("d", [1, 1, 1], steps=(200, 201, 199))], "steps")
    assert steps[1][2] is None                                         # more steps: not a steps record
    cut = rules.judge([_fake("a", [100, 101, 99]), _fake("e", [20, 21, 19], reached=False)], "time")
    assert cut[1][2] is None and "only 0 of its 3 seeds reached the target" in cut[1][1].reason
    with pytest.raises(ValueError, match="track must be one of"):
        rules.judge([], "wall")


def test_a_time_record_across_sessions_must_also_win_its_duel(tmp_path):
    a, b = _fake("a", [100, 101, 99]), _fake("b", [50, 51, 49])
    a.prov["date"], b.prov["date"] = "2026-12-04T10:00:00+00:00", "2026-12-05T10:00:00+00:00"
    walk = rules.judge([a, b], "time", results_dir=tmp_path)         # no duel recorded: no record yet
    assert walk[1][2] is None and "must also win a duel (duel.py b a), not run yet" in walk[1][1].reason
    assert rules.judge([a, b], "steps", results_dir=tmp_path)[1][2] is None   # steps: 100 vs 100, not better
    duel = tmp_path / (rules.duel_name("b", "a") + ".csv")
    for a_cpu, accepted in (([97, 99, 98], False), ([50, 51, 49], True)):
        duel.write_text("seed,entry,reached,cpu_s\n" + "".join(f"{i},b,True,{c}\n{i},a,True,{x}\n" for i, (c, x) in
                                                            enumerate(zip(a_cpu, [100, 101, 99]))))
        walk = rules.judge([a, b], "time", results_dir=tmp_path)
        assert (walk[1][2] == 1) is accepted and "in their duel" in walk[1][1].reason
    recorded = [r for e in ENTRIES if (r := rules.load_result(e)) is not None]
    lean = [v for r, v, n, _ in rules.judge(recorded, "time") if r.entry.slug == "cosine300-compiled-lean"]
    assert lean and not lean[0].accepted and "in their duel" in lean[0].reason    # recorded: apart yes, duel no


def test_entries_are_unique_and_begin_with_the_three_book_recipes():
    slugs = [e.slug for e in ENTRIES]
    assert len(set(slugs)) == len(slugs) and slugs[:3] == ["nanogpt", "course", "modern"]
    names = [result_name(s) for s in slugs]
    assert len(set(names)) == len(names)
    for name in names:                                       # a name book.results can read (no dots, no slashes)
        with pytest.raises(FileNotFoundError):
            read_rows(name, ROOT / "tests")
    assert entry("course").recipe.steps == 600
    with pytest.raises(ValueError, match="no speedrun entry 'nope'"):
        entry("nope")


def test_each_recorded_result_ran_its_entrys_recipe_and_the_readme_is_generated_from_them():
    results = [r for e in ENTRIES if (r := rules.load_result(e)) is not None]
    for r in results:
        now = dataclasses.asdict(r.entry.recipe)    # a field added to GPTRecipe later: its default then ran
        defaults = {f.name: f.default for f in dataclasses.fields(r.entry.recipe)}
        assert r.prov["recipe"] == {k: v for k, v in now.items() if k in r.prov["recipe"] or v != defaults[k]}, \
            f"{r.entry.slug}'s recipe changed"
        assert len(r.rows) >= rules.MIN_SEEDS and r.prov["entry"] == r.entry.slug
    assert (ROOT / "benchmarks" / "speedrun" / "README.md").read_text() == rules.readme(), \
        "README.md is stale: run python benchmarks/speedrun/rules.py"


def test_book_modern_recipe_is_the_current_time_record():
    walk = rules.judge([r for e in ENTRIES if (r := rules.load_result(e)) is not None], "time")
    records = [r.entry.recipe for r, v, n, _ in walk if n is not None]
    current = records[-1] if records else MODERN_CH10
    if current.optimizer == "muon":      # a modern record: chapter 10's recipe is it (names aside)
        # names aside, and compile aside: torch.compile changes the speed of a step, not what it computes
        assert dataclasses.replace(MODERN_CPU, name="") == dataclasses.replace(current, name="", compile=False)


def test_the_fine_grid_starts_when_the_next_coarse_stride_could_reach_the_target():
    import protocol as run   # the grid run.py records with

    T, coarse, fine, margin = run.TARGET, run.COARSE, run.FINE, run.MARGIN
    assert run.next_stride([]) == coarse
    assert run.next_stride([(coarse, T + 1.0)]) == coarse              # one evaluation, far above: no drop to read
    assert run.next_stride([(coarse, T + margin)]) == fine              # within the margin
    assert run.next_stride([(coarse, T + margin + 0.01)]) == coarse
    assert run.next_stride([(50, 2.60), (100, T + margin + 0.1)]) == fine     # far above, but falling faster than that
    assert run.next_stride([(1100, T + margin + 0.05), (1150, T + margin + 0.03)]) == coarse   # falling slowly
    # a drop over a fine stride is scaled to a coarse one: 0.04 in 10 steps is 0.2 in 50, more than 0.19 to go
    assert run.next_stride([(100, T + 0.23), (110, T + 0.19)], coarse=50, fine=10) == fine
    # and once fine, always fine: a flat (or rising) fine stride far above the margin does not return to coarse
    assert run.next_stride([(100, T + 0.30), (110, T + 0.30)], coarse=50, fine=10) == fine
    assert run.next_stride([(100, T + 0.30), (150, T + 0.30)], coarse=50, fine=10) == coarse
    with pytest.raises(ValueError, match="coarse must be a positive int"):
        run.next_stride([], coarse=0)


def test_every_recorded_run_that_reached_the_target_was_caught_one_fine_stride_after_it_was_above_it():
    import run

    results = [r for e in ENTRIES if (r := rules.load_result(e)) is not None]
    late = [(r.entry.slug, row["seed"], row["resolution"]) for r in results for row in r.rows
            if row["reached"] == "True" and int(row["resolution"]) > run.FINE]
    assert not late, f"caught more than {run.FINE} steps after the last evaluation above the target: {late}"
    for r in results:
        assert r.prov["coarse"] == run.COARSE and r.prov["grid_rule"] == run.GRID_RULE, r.entry.slug


def test_the_current_record_runs_quick_and_writes_nothing():
    recorded = any(rules.load_result(e) is not None for e in ENTRIES)
    stdout, last = quick_benchmark("speedrun/run.py", *(["--record", "current"] if recorded else ["modern"]))
    assert last["seeds"] == "3" and float(last["cpu_s_mean"]) > 0 and "wrote" not in stdout


def test_a_duel_races_two_entries_in_one_process_and_writes_nothing():
    stdout, last = quick_benchmark("speedrun/duel.py", "modern-compiled", "modern")
    assert last["duel"] == "modern-compiled_vs_modern" and last["seeds"] == "3" and "wrote" not in stdout
    assert float(last["ratio"]) == pytest.approx(float(last["a_cpu_s"]) / float(last["b_cpu_s"]), abs=0.02)
    assert last["accepted"] == "False"                # --quick: 8 steps each, nobody reaches the target
    assert stdout.count("seed 1337 modern-compiled") == stdout.count("seed 1337 modern ")   # in turns


def test_throughput_runs_quick_and_writes_nothing():
    stdout, last = quick_benchmark("speedrun/throughput.py")
    assert float(last["eager_1t_ms"]) > 0 and float(last["threads_speedup"]) > 0 and "wrote" not in stdout
    assert last["compiled_1t_ms"] == "nan"          # --quick compiles nothing
    assert stdout.count("ms/step wall") == 4        # the four eager configurations


def test_step_profile_runs_quick_takes_a_step_apart_and_writes_nothing():
    stdout, last = quick_benchmark("speedrun/step_profile.py", "--entries", "course")
    assert float(last["course_ms"]) > 0 and "wrote" not in stdout
    shares = [float(last[f"course_{k}"]) for k in ("forward", "backward", "optimizer")]
    assert all(0 < s < 1 for s in shares) and sum(shares) <= 1.0
    assert "part  forward: attention" in stdout and "op    aten::" in stdout


def test_the_records_table_the_chapter_reads_is_the_rules_applied_to_the_results():
    from book.results import RESULTS_DIR, read_rows

    want = rules.record_rows()
    if not want:
        assert not (RESULTS_DIR / "speedrun_records.csv").exists()
        return
    got = read_rows("speedrun_records")
    assert got == [{k: str(v) for k, v in row.items()} for row in want], \
        "book/results/speedrun_records.csv is stale: run python benchmarks/speedrun/rules.py"
    assert got[0]["entry"] == "nanogpt" and got[0]["time_record"] == "0"


def _tiny(**options):
    from book.gpt import GPT, GPTConfig

    torch.manual_seed(0)
    return GPT(GPTConfig(11, context_len=8, d_model=16, n_heads=2, n_layers=2, **options))


def test_probe_reads_the_attention_logits_ffn_activations_and_update_size():
    from probes import Probe

    model, idx = _tiny(), torch.randint(0, 11, (3, 8))
    probe = Probe(model, idx)
    first = probe(model)
    assert len(first["attn_logit_max"]) == 2 and first["update_rel"] == 0.0
    with torch.no_grad():                                   # the logits are linear in q: doubling q doubles them
        model.blocks[0].attn.q_proj.weight.mul_(2)
    doubled = probe(model)
    assert doubled["attn_logit_max"][0] == pytest.approx(2 * first["attn_logit_max"][0], rel=1e-5)
    assert doubled["update_rel"] > 0
    with torch.no_grad():
        model.blocks[1].attn.q_proj.weight.zero_()
        model.blocks[1].ffn.up.weight.zero_()               # GELU(0) = 0: no activation
    zeroed = probe(model)
    assert zeroed["attn_logit_max"][1] == 0.0 and zeroed["ffn_act_rms"][1] == 0.0 and zeroed["ffn_act_max"][1] == 0.0
    with pytest.raises(ValueError, match=r"\(B, T\) tensor of token ids"):
        Probe(model, torch.zeros(3, 8))


def test_probe_with_qk_norm_bounds_the_logits_and_serves_as_fits_eval_fn():
    from probes import Probe

    from book.optim import build_optimizer, fit

    model, idx = _tiny(qk_norm=True, positions="rope", activation="swiglu"), torch.randint(0, 11, (3, 8))
    with torch.no_grad():
        model.blocks[0].attn.q_proj.weight.mul_(100)       # huge queries: QK-norm keeps every logit <= sqrt(d_head)
    hist = fit(model, lambda: (idx, idx), optimizer=build_optimizer(model, lr=1e-3), steps=2, eval_fn=Probe(model, idx),
               eval_every=1, progress=False, loss_fn=lambda m, b: m(b[0], b[1])[1])
    assert [s for s, _ in hist.val] == [1, 2]
    stats = hist.val[-1][1]
    assert stats["attn_logit_max"][0] <= math.sqrt(8) * 1.01 and stats["update_rel"] > 0
