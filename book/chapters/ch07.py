"""Chapter 7, training a GPT: the stack drawing, the budget leaderboard reader, the samples-by-loss reader, the
exercise checkers, and the printing, asserts and glue of the chapter's measuring cells (each called in one line).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import torch

from ..checks import returned
from ..diagrams import Diagram, ROLES
from ..kv_cache import kv_cache_bytes
from ..language import _
from ..results import _read_json

__all__ = ["draw_gpt_stack", "check_kv_cache_bytes", "check_top_p", "leaderboard_bpc", "samples_by_loss",
           "samples_html", "real_word_share", "glue_samples_by_loss", "check_and_glue_live_place",
           "check_and_glue_teacher_forcing", "check_and_glue_race", "check_and_glue_run", "check_and_glue_vs_lstm",
           "check_and_glue_board", "check_and_glue_position_curves", "QUOTE_TEST", "check_and_glue_quote",
           "sampling_figure", "check_and_glue_kv_timing"]


def draw_gpt_stack():
    """Chapter 7: the GPT stack (tokens -> embeddings + positions -> N Pre-Norm blocks -> LN -> lm_head -> logits),
    with the KV cache beside the attention: each layer keeps the keys and values of the tokens so far, and the new
    token's query reads them."""
    d = Diagram(12.4, 13.0, title="The GPT stack, and the KV cache beside its attention")
    x, bw = 3.6, 3.0
    d.box(x, 0.6, "tokens  x₁ … x_t", role="token", w=bw)
    d.box(x, 1.75, "token embedding  E[x]", role="embed", w=bw)
    d.box(7.6, 1.75, "position  P[t]", role="embed", w=2.2)
    d.arrow((x, 0.95), (x, 1.4))
    d.circle(x, 2.75)
    d.arrow((x, 2.1), (x, 2.53))
    d.line([(7.6, 2.1), (7.6, 2.75), (x + 0.6, 2.75)])
    d.arrow((x + 0.6, 2.75), (x + 0.22, 2.75))
    # one block: LN -> attention -> + ; LN -> FFN -> +
    d.group(1.0, 3.25, 6.2, 9.25, label="", role="attn")
    d.text(0.55, 6.15, "× N layers", ha="center", color=ROLES["attn"][1])
    d.ax.texts[-1].set_rotation(90)
    d.arrow((x, 2.97), (x, 3.9))
    d.box(x, 4.25, "LayerNorm", role="norm", w=bw)
    d.box(x, 5.3, "causal self-attention", role="attn", w=bw)
    d.circle(x, 6.25)
    d.arrow((x, 4.6), (x, 4.95))
    d.arrow((x, 5.65), (x, 6.03))
    d.line([(x, 3.6), (1.5, 3.6), (1.5, 6.25)])
    d.arrow((1.5, 6.25), (x - 0.22, 6.25))
    d.box(x, 7.05, "LayerNorm", role="norm", w=bw)
    d.box(x, 8.05, "feed-forward (FFN)", role="ffn", w=bw)
    d.circle(x, 8.85)
    d.arrow((x, 6.47), (x, 6.7))
    d.arrow((x, 7.4), (x, 7.7))
    d.arrow((x, 8.4), (x, 8.63))
    d.line([(x, 6.55), (1.5, 6.55), (1.5, 8.85)])
    d.arrow((1.5, 8.85), (x - 0.22, 8.85))
    # head
    d.arrow((x, 9.07), (x, 9.65))
    d.box(x, 10.0, "final LayerNorm", role="norm", w=bw)
    d.arrow((x, 10.35), (x, 10.75))
    d.box(x, 11.1, "lm_head (tied to E)", role="embed", w=bw)
    d.arrow((x, 11.45), (x, 11.85))
    d.box(x, 12.2, "next-token logits", role="token", w=bw)
    # the KV cache beside the attention
    d.box(9.6, 5.3, "KV cache (per layer)\nK, V of tokens 1 … t−1", role="memory", w=3.2, h=1.1)
    d.arrow((x + bw / 2, 5.55), (9.6 - 1.6, 5.55), text="append k_t, v_t", text_offset=(0, 0.05))
    d.arrow((9.6 - 1.6, 5.0), (x + bw / 2, 5.0), text="read all K, V", text_offset=(0, -0.42))
    d.text(9.6, 4.05, "the new token's query q_t\nattends to every cached key;\nonly token t runs the stack",
           fontsize=8, italic=True)
    return d.figure


def check_kv_cache_bytes(fn) -> bool:
    """Self-check for the chapter 7 exercise: fn(n_layers, n_kv_heads, d_head, context_len, batch_size, bytes)."""
    cases = [(32, 8, 128, 8192, 1, 2), (4, 4, 32, 64, 3, 4), (80, 8, 128, 4096, 2, 2), (2, 1, 5, 7, 1, 1)]
    for args in cases:
        want, got = kv_cache_bytes(*args), fn(*args)
        if got != want:
            raise AssertionError(_("for (n_layers, n_kv_heads, d_head, context_len, batch, bytes) = {args}: "
                                   "expected {want:,} bytes, got {got!r}. Hint: K and V are both cached, in every "
                                   "layer.").format(args=args, want=want, got=got))
    print("Correct: your KV-cache arithmetic matches in every case.")
    return True


def check_top_p(fn) -> bool:
    """Self-check for the chapter 7 exercise: does `fn(logits, p)` keep the smallest set reaching mass p?"""
    probs = torch.tensor([[0.05, 0.5, 0.2, 0.25], [0.6, 0.2, 0.15, 0.05]])
    cases = [(0.45, [[False, True, False, False], [True, False, False, False]]),
             (0.7, [[False, True, False, True], [True, True, False, False]]),
             (0.9, [[False, True, True, True], [True, True, True, False]]),
             (1.0, [[True, True, True, True], [True, True, True, True]])]
    for p, keep in cases:
        got = returned(fn(probs.log(), p))
        if tuple(got.shape) != tuple(probs.shape):
            raise AssertionError(_("output should have the logits' shape {want}, got {got}")
                                 .format(want=tuple(probs.shape), got=tuple(got.shape)))
        kept = torch.isfinite(got)
        if kept.tolist() != keep:
            raise AssertionError(_("p={p}, probs {probs}: should keep {keep}, kept {kept}. "
                                   "Hint: keep a token while the mass ranked above it is still < p.")
                                 .format(p=p, probs=probs.tolist(), keep=keep, kept=kept.tolist()))
    print("Correct: your top-p filter keeps the smallest nucleus in every case.")
    return True


def leaderboard_bpc(name_prefix: str, runtimes: Optional[Path] = None) -> Optional[float]:
    """Validation bits/char of the first row of the book's leaderboard whose model name starts with `name_prefix`,
    read from the executor's record (chapters/_generated/runtimes.json; by default relative to the working directory,
    the chapters folder when a chapter runs). None when the record or the row is not there (e.g. in Colab)."""
    if not isinstance(name_prefix, str) or not name_prefix:
        raise ValueError(f"name_prefix must be a non-empty string such as 'char LSTM', got {name_prefix!r}")
    path = Path(runtimes) if runtimes is not None else Path("_generated") / "runtimes.json"
    if not path.is_file():
        return None
    record = _read_json(path, "runtimes record")
    if not isinstance(record, dict) or not all(isinstance(c, dict) for c in record.values()):
        raise ValueError(f"{path} must map each chapter to an object with a 'leaderboard' list, got "
                         f"{type(record).__name__}")
    rows = [r for chapter in record.values() for r in chapter.get("leaderboard", [])]
    return next((float(r["val_bpc"]) for r in rows if r["name"].startswith(name_prefix)), None)


def samples_by_loss(results_dir: Optional[Path] = None) -> list:
    """What benchmarks/samples_by_loss.py recorded, one entry per level in its order (3.0, 2.5, 2.2, 2.0 bits/char,
    then "lowest"): {"level", "reached", "step", "minutes" (of training), "val_bpc", "samples": [(prompt, text)]}.
    A level the run never reached has reached False and no samples."""
    from ..results import read_rows

    levels = {}
    for r in read_rows("samples_by_loss", results_dir):
        if r["reached"] not in ("True", "False"):
            raise ValueError(f"samples_by_loss.csv: reached must be True or False, got {r['reached']!r}")
        reached = r["reached"] == "True"
        entry = levels.setdefault(r["level"], {
            "level": r["level"], "reached": reached, "step": int(r["step"]) if reached else None,
            "minutes": float(r["train_s"]) / 60 if reached else None,
            "val_bpc": float(r["val_bpc"]) if reached else None, "samples": []})
        if reached:
            entry["samples"].append((r["prompt"], r["sample"]))
    return list(levels.values())


def samples_html(levels: list, shares: Optional[dict] = None) -> str:
    """The levels as an HTML table: the level, when the run reached it, its samples (prompt in bold) and, given
    `shares` ({level: share of real words}, glue_samples_by_loss), how many sampled words are real."""
    import html

    def level_name(lv):
        return "the run's lowest" if lv["level"] == "lowest" else f"≤ {lv['level']} bits/char"

    rows = []
    for lv in levels:
        if not lv["reached"]:
            rows.append(f"<tr><td>{level_name(lv)}</td><td>not reached in the run</td><td></td><td></td></tr>")
            continue
        texts = "".join(f'<pre style="white-space:pre-wrap;margin:0 0 0.4em 0"><b>{html.escape(p)}</b>'
                        f"{html.escape(s)}</pre>" for p, s in lv["samples"])
        share = f"{shares[lv['level']]:.0%}" if shares and lv["level"] in shares else ""
        rows.append(f"<tr><td>{level_name(lv)}</td><td>{lv['val_bpc']:.2f} bits/char, step {lv['step']:,}, "
                    f"{lv['minutes']:.1f} min</td><td>{texts}</td><td>{share}</td></tr>")
    return ('<table><thead><tr><th>level</th><th>reached at</th><th>three samples at temperature 1</th>'
            f"<th>real words</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def real_word_share(texts, known_words) -> float:
    """The share of the words in `texts` (runs of letters, apostrophes inside) that occur in `known_words`, e.g. the
    set of the training text's words: how much of a sample is real vocabulary."""
    import re

    words = [w for t in texts for w in re.findall(r"[A-Za-z]+(?:'[A-Za-z]+)?", t)]
    if not words:
        return 0.0
    return sum(w in known_words or w.lower() in known_words for w in words) / len(words)


def glue_samples_by_loss(levels: list, prov: dict, known_words) -> dict:
    """Glue the samples-by-loss record for the prose: each reached level's bits/char, step, minutes and share of real
    words; the levels not reached; the run's model and length. Returns {level: share of real words}."""
    import re

    from ..utils import glue

    shares = {}
    for lv in levels:
        key = "lowest" if lv["level"] == "lowest" else lv["level"].replace(".", "_")
        if not lv["reached"]:
            continue
        shares[lv["level"]] = real_word_share([s for _, s in lv["samples"]], known_words)
        glue(f"ch7_sbl_{key}_bpc", f"{lv['val_bpc']:.2f}")
        glue(f"ch7_sbl_{key}_step", f"{lv['step']:,}")
        glue(f"ch7_sbl_{key}_min", f"{lv['minutes']:.0f}")
        glue(f"ch7_sbl_{key}_words", f"{shares[lv['level']]:.0%}")
    missed = [lv["level"] for lv in levels if not lv["reached"]]
    glue("ch7_sbl_missed", " and ".join(missed) if missed else "none")
    recipe = dict(re.findall(r"(n_layers|d_model|n_heads|context_len|steps)=(\d+)", prov["recipe"]))
    for k, v in recipe.items():
        glue(f"ch7_sbl_{k}", f"{int(v):,}")
    glue("ch7_sbl_train_min", f"{prov['train_s'] / 60:.0f}")
    return shares


def check_and_glue_live_place(levels: list, live_bpc: float) -> str:
    """Where the chapter's live model sits among the recorded levels ("between the rows at 2.49 and 2.20"), asserted
    to lie inside them (not in a smoke run, whose model is untrained) and glued; returns the words."""
    from ..utils import claim, glue

    reached = [lv["val_bpc"] for lv in levels if lv["reached"]]
    worse, better = [v for v in reached if v > live_bpc], [v for v in reached if v <= live_bpc]
    place = (f"between the rows at {min(worse):.2f} and {max(better):.2f}" if worse and better else
             "above every row" if not worse else "below every row")
    print(f"the live model: {live_bpc:.3f} bits/char, {place}")
    claim(bool(worse and better), f"the live model ({live_bpc:.3f} bits/char) should sit inside the recorded "
          f"levels {reached}: {place}")
    glue("ch7_sbl_live_place", place, tol="any")      # its words: which rows its trained bits/char fall between
    return place


# ---- the chapter's measuring cells: their printing, asserts and glue (each cell calls one of these in one line) ----
def check_and_glue_teacher_forcing(T: int, positions: tuple, flops: tuple, seconds: tuple) -> float:
    """Teacher forcing's saving, counted and timed: `positions`, `flops` and `seconds` are (one pass over the T-token
    window, T prefix passes). Prints them, asserts the counted law (T vs T(T+1)/2 positions; FLOPs more than T/3
    times fewer), glues the ratios. Returns the FLOPs ratio."""
    from ..utils import claim, glue

    (pos_once, pos_prefixes), (flops_once, flops_prefixes), (t_once, t_prefixes) = positions, flops, seconds
    ratio = flops_prefixes / flops_once
    print(f"positions run: one pass {pos_once}, {T} prefix passes {pos_prefixes:,}")
    print(f"FLOPs: one pass {flops_once / 1e9:.2f} G, the prefix passes {flops_prefixes / 1e9:.2f} G ({ratio:.0f}x)")
    print(f"time on this machine: one pass {t_once * 1e3:.1f} ms, the prefix passes {t_prefixes * 1e3:.1f} ms "
          f"({t_prefixes / t_once:.0f}x)")
    claim((pos_once, pos_prefixes) == (T, T * (T + 1) // 2),        # 64 positions vs 1 + 2 + ... + 64
          f"one pass runs T positions and the prefix passes T(T+1)/2: {positions} for T = {T}")
    claim(ratio > T / 3, f"the prefix passes should cost more than T/3 = {T / 3:.0f}x the FLOPs: {ratio:.1f}x")
    glue("ch7_teacher_pos_ratio", f"{pos_prefixes / pos_once:.1f}")   # attention's part grows ~T/3x, the rest (T+1)/2x
    glue("ch7_teacher_flops_ratio", f"{ratio:.0f}")
    glue("ch7_teacher_speedup", f"{t_prefixes / t_once:.0f}", timing=True)
    return ratio


def check_and_glue_race(results_dir: Optional[Path] = None) -> dict:
    """benchmarks/gpt_time_to_loss.py's record (book/results/gpt_time_to_loss.txt): prints its two summary lines
    and its last line, wrapped to 100 characters; asserts the course recipe needs at most half the baseline's time
    within its default schedule; glues the race's numbers. Returns the last line's fields."""
    import re
    import textwrap
    from importlib.resources import files

    from ..train import COURSE_CPU
    from ..utils import claim, glue

    path = Path(results_dir) / "gpt_time_to_loss.txt" if results_dir else files("book") / "results/gpt_time_to_loss.txt"
    bench = path.read_text().splitlines()
    summary = [line for line in bench if re.match(r"(nanoGPT CPU|course) recipe: time to val", line)]
    last = dict(field.split("=") for field in bench[-1].split())      # ratio=... course_s=... baseline_s=...
    for line in summary + [bench[-1]]:
        print(textwrap.fill(line, 100, subsequent_indent="    "))
    ratio = float(last["ratio"])
    course_step = int(re.search(r"at step (\d+)", summary[1]).group(1))
    claim(ratio <= 0.5 and course_step <= COURSE_CPU.steps,     # the benchmark's goal: half the baseline's time
          f"the course recipe should need at most half the baseline's time: ratio {ratio}, step {course_step}")
    glue("ch7_bench_ratio", f"{ratio:.2f}")
    glue("ch7_bench_course_s", f"{float(last['course_s']):.0f}")
    glue("ch7_bench_base_s", f"{float(last['baseline_s']):.0f}")
    glue("ch7_bench_base_final", last["baseline_final_val"])
    glue("ch7_bench_course_step", course_step)
    glue("ch7_course_default_steps", COURSE_CPU.steps)
    return last


def check_and_glue_course_ladder(results_dir: Optional[Path] = None) -> dict:
    """benchmarks/course_ladder.py's record: nanoGPT's recipe -> the course recipe, one change at a time, 3 seeds.
    Prints each rung's steps to the target, its cost per step and its time (steps x cost), and each rung against the
    one before by book.results.range_verdict (a difference counts only beyond the seeds' spread); glues the table's
    verdicts whole. Returns {rung: (steps per seed, None = never reached; ms per step)}."""
    from ..results import range_verdict, read_rows, seed_span
    from ..utils import claim, glue

    rows, cost = read_rows("course_ladder", results_dir), read_rows("course_ladder_cost", results_dir)
    ms = {c["rung"]: float(c["ms_per_step"]) for c in cost}
    rungs = {}
    for r in rows:
        rungs.setdefault(r["rung"], []).append(int(r["steps"]) if r["reached"] == "True" else None)
    claim(list(rungs) == list(ms) and len(rungs) == 5 and all(len(v) >= 3 for v in rungs.values()),
          f"five rungs with at least 3 seeds each, and a cost for each: {list(rungs)}, {list(ms)}")

    def span(values, fmt):
        hit = [v for v in values if v is not None]
        return seed_span(hit, fmt) if len(hit) == len(values) else f"{len(hit)} of {len(values)} seeds"

    print(f"{'rung':34s}{'steps to the target':>22s}{'ms/step':>9s}{'seconds':>17s}   steps / time")
    verdicts, names = {}, list(rungs)
    for i, name in enumerate(names):
        secs = [None if v is None else v * ms[name] / 1e3 for v in rungs[name]]
        v = ""
        if i:
            before = names[i - 1]
            old_secs = [None if x is None else x * ms[before] / 1e3 for x in rungs[before]]
            verdicts[name] = (range_verdict(rungs[name], rungs[before]), range_verdict(secs, old_secs))
            v = " / ".join("within" if x == "within the spread" else x for x in verdicts[name])
        print(f"{name:34s}{span(rungs[name], '{:.0f}'):>22s}{ms[name]:9.1f}{span(secs, '{:.0f}'):>17s}   {v}")
    words = {"pays": "saved time", "costs": "cost time", "within the spread": "changed the time by less than the "
                                                                             "seeds' spread"}
    for i, name in enumerate(names[1:], 1):
        glue(f"ch7_cl_{i}", f"{name.lstrip('+ ')}: {words[verdicts[name][1]]}")
    def reach(values):
        hit = [v for v in values if v is not None]
        if len(hit) == len(values):
            return f"reaches it in {span(values, '{:.0f}')} steps"
        return f"reaches it on {len(hit)} of its {len(values)} seeds" if hit else \
            f"never reaches it ({len(values)} seeds, their whole runs count)"
    glue("ch7_cl_first", reach(rungs[names[0]]))
    glue("ch7_cl_last", reach(rungs[names[-1]]))
    return {n: (rungs[n], ms[n]) for n in names}


def check_and_glue_run(hist, recipe, val_nats: float, count: dict, n_train: int, gpu_sized: bool) -> int:
    """The course GPT's run: asserts it passes nanoGPT's final loss and keeps going, comes within 0.35 bits of the
    count table (and, on the CPU recipe, stays above it); measures the validation-minus-training gap before any text
    is seen twice and at the end. Glues every number (tolerances from the recorded seed spread). Returns the step at
    which it first evaluated at or below nanoGPT's final loss."""
    from ..train import NANOGPT_CPU_FINAL_VAL, nats_to_bits
    from ..utils import claim, glue

    gpt_bpc, count_bpc, steps_done = nats_to_bits(val_nats), count["bits"], len(hist.train_loss)
    crossed = next((step for step, v in hist.val if v <= NANOGPT_CPU_FINAL_VAL), None)
    print(f"validation loss {val_nats:.4f} nats = {gpt_bpc:.3f} bits/char after {steps_done} steps")
    print(f"first evaluation at or below nanoGPT's final {NANOGPT_CPU_FINAL_VAL} nats: step {crossed}")
    claim(gpt_bpc < count_bpc + 0.35, f"the GPT should come within 0.35 bits of the count table: {gpt_bpc:.3f} vs "
          f"{count_bpc:.3f} bits/char")
    if not gpu_sized:                                       # the CPU recipe
        claim(gpt_bpc > count_bpc, f"at this CPU budget the count table still wins: GPT {gpt_bpc:.3f} vs "
              f"{count['name']} {count_bpc:.3f} bits/char")
    claim(crossed is not None and crossed < steps_done,
          f"the run should pass nanoGPT's final {NANOGPT_CPU_FINAL_VAL} nats and keep going: step {crossed} of "
          f"{steps_done}")
    claim(count["dev_bits"] < count_bpc, f"the count table also finds the validation tenth harder than the last "
          f"tenth of the training text: {count_bpc:.3f} vs {count['dev_bits']:.3f} bits/char")
    glue("ch7_behind_count", f"{gpt_bpc - count_bpc:.2f}", tol=0.05, spread="glue_spread", margin=2)
    glue("ch7_gpt_bpc", f"{gpt_bpc:.3f}", tol=0.04, spread="glue_spread", margin=2)
    glue("ch7_gpt_nats", f"{val_nats:.3f}", tol=0.03, spread="glue_spread", margin=2)
    glue("ch7_crossed_step", crossed, tol=100, spread="glue_spread", margin=2)      # evaluations every 100 steps

    def val_minus_train(step):                      # val loss - mean train loss of the (up to) 100 steps before
        n = min(step, 100)
        return dict(hist.val)[step] - sum(hist.train_loss[step - n: step]) / n

    tokens_per_step = recipe.batch_size * recipe.context_len
    first_pass = max((s for s, _ in hist.val if s * tokens_per_step <= n_train), default=None)  # no window twice
    gap_end = val_minus_train(steps_done)
    if first_pass is None:      # the GPU recipe's 16k tokens per step cover the text before its first evaluation
        print(f"val - train: {gap_end:.3f} nats at the end")
        claim(gap_end > 0, f"the validation loss should end above the training loss: {gap_end:.3f} nats")
    else:
        gap_early = val_minus_train(first_pass)
        print(f"val - train: {gap_early:.3f} nats at step {first_pass} (under one pass), {gap_end:.3f} at the end")
        claim(0 < gap_early < gap_end, f"a gap before any text is seen twice, growing after: {gap_early:.3f} -> "
              f"{gap_end:.3f}")
        glue("ch7_gap_step", first_pass)
        glue("ch7_gap_early", f"{gap_early:.2f}", tol=0.03, spread="glue_spread", margin=2)
    glue("ch7_gap_end", f"{gap_end:.2f}", tol=0.04, spread="glue_spread", margin=2)
    glue("ch7_epochs", f"{steps_done * tokens_per_step / n_train:.1f}")
    return crossed


def check_and_glue_vs_lstm(gpt_bpc: float) -> Optional[float]:
    """This chapter's GPT against Chapter 2's LSTM on the book's leaderboard (None outside the repository): asserts
    the two are level (within 0.1 bits/char), glues the LSTM's bits/char, the signed difference, and for the prose
    its size and side ("0.06", "below"). The size's tolerance comes from the same difference in the recorded runs
    with other seeds (book/results/glue_spread.csv, ch7_vs_lstm)."""
    from ..utils import claim, glue, recorded_seed_values

    lstm_bpc = leaderboard_bpc("char LSTM")   # Chapter 2's row of the book's leaderboard
    if lstm_bpc is None:
        return None
    diff = gpt_bpc - lstm_bpc
    claim(abs(diff) < 0.1, f"the GPT should come level with the LSTM: {gpt_bpc:.3f} vs {lstm_bpc:.3f}")
    glue("ch7_lstm_bpc", f"{lstm_bpc:.3f}")
    glue("ch7_vs_lstm", f"{diff:+.2f}", tol=0.05, spread="glue_spread", margin=2)
    seeds = [abs(float(v.strip("'"))) for v in recorded_seed_values("ch7_vs_lstm")] + [abs(diff)]
    glue("ch7_vs_lstm_size", f"{abs(diff):.2f}", tol=0.05, spread=seeds, margin=2)
    glue("ch7_vs_lstm_side", "below" if diff < 0 else "above")
    return lstm_bpc


GPT7, LSTM2, MODERN = "GPT (ch. 7)", "LSTM (ch. 2)", "modern GPT (ch. 10)"
COLORS = {LSTM2: "tab:red", "block LM (ch. 6)": "tab:olive", GPT7: "tab:blue", "RoPE GPT (ch. 9)": "tab:purple",
          MODERN: "tab:green"}


def check_and_glue_board(results_dir: Optional[Path] = None) -> dict:
    """benchmarks/budget_leaderboard.py's record: every model of the book at three budgets of one CPU thread, three
    seeds each. Prints the provenance and a table of mean (lowest-highest) per budget, draws the figure, asserts
    what the prose says (the LSTM leads every Transformer at the two short budgets; at the largest the GPT is
    behind it and the modern GPT ahead on every seed; the GPT gains more than twice the LSTM's gain from 1 to 4
    minutes; no model reaches the count table) and glues it. Returns {"figure", "budgets", "seeds_of", "kn_name",
    "kn_bpc", "neural"}."""
    from .. import plots
    from ..results import budget_summary, provenance, read_rows
    from ..utils import claim, glue

    board, prov = read_rows("budget_leaderboard", results_dir), provenance("budget_leaderboard", results_dir)
    summary = budget_summary(board)
    neural = {m: s for m, s in summary.items() if not s["count"]}
    counts = {m: next(iter(s["budgets"].values()))[0] for m, s in summary.items() if s["count"]}
    budgets = sorted({b for s in neural.values() for b in s["budgets"]})

    def seeds_of(m, b):
        return [float(r["val_bpc"]) for r in board if r["model"] == m and r["phase"] == "final"
                and float(r["budget_s"]) == b]

    fig, ax = plots.new_figure(figsize=(6.8, 3.8))
    for m, s in neural.items():
        ax.plot(budgets, [s["budgets"][b][0] for b in budgets], "-", color=COLORS.get(m), lw=1.5, label=m)
        for b in budgets:
            ax.plot([b] * len(seeds_of(m, b)), seeds_of(m, b), "o", ms=3, color=COLORS.get(m), alpha=0.7)
    for (m, v), ls in zip(counts.items(), ["--", ":"]):
        ax.axhline(v, color="tab:gray", ls=ls, lw=1, label=f"{m.split(' (')[0]} ({v:.2f})")
    ax.set(xscale="log", xlabel="training budget (seconds of one CPU thread)", ylabel="validation bits/char",
           ylim=(2.0, 3.7), xticks=budgets, xticklabels=[f"{b:g} s" for b in budgets],
           title="Every model of the book at equal compute (3 seeds each)")
    ax.minorticks_off()
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    top = budgets[-1]                        # the largest budget, zoomed: every seed of every model
    zoom = ax.inset_axes([0.55, 0.46, 0.42, 0.40])
    for i, m in enumerate(neural):
        zoom.plot([i] * len(seeds_of(m, top)), seeds_of(m, top), "o", ms=3, color=COLORS.get(m))
    zoom.set_xticks(range(len(neural)), [m.split(" (")[0] for m in neural], fontsize=6, rotation=20)
    zoom.set_title(f"at {top:g} s, every seed", fontsize=7)
    zoom.tick_params(labelsize=6)
    zoom.grid(alpha=0.3)

    print(f"recorded by {prov['script']} on {prov['date'][:10]}, {prov['wall_s'] / 60:.0f} min on 2 cores")
    print(f"    ({prov['cpu']}, one thread per run); seeds {prov['seeds']}")
    print(f"{'bits/char, mean (min-max)':26s}" + "".join(f" | {f'{b:g} s':>19s}" for b in budgets))
    for m, s in neural.items():
        print(f"{m:26s}" + "".join(" | {:.3f} ({:.3f}-{:.3f})".format(*s["budgets"][b][:3]) for b in budgets))
    for m, v in counts.items():
        print(f"{m.split(' (')[0] + ' (counts)':26s} | {v:.3f} at every budget")

    def verdict(a, b, budget):
        """'ahead' when every seed of a is below every seed of b, 'behind' when every seed is above, else 'level'."""
        sa, sb = seeds_of(a, budget), seeds_of(b, budget)
        return "ahead" if max(sa) < min(sb) else "behind" if min(sa) > max(sb) else "level"

    calls = {b: verdict(GPT7, LSTM2, b) for b in budgets}
    modern_calls = {b: verdict(MODERN, LSTM2, b) for b in budgets}
    print("against the LSTM, every seed: GPT", ", ".join(f"{b:g} s {v}" for b, v in calls.items()))
    print("                       modern GPT", ", ".join(f"{b:g} s {v}" for b, v in modern_calls.items()))
    top, mid = budgets[-1], budgets[1]
    best = min(neural, key=lambda m: neural[m]["budgets"][top][0])
    kn_name, kn_bpc = next((m, v) for m, v in counts.items() if not m.startswith("bigram"))
    gain = {m: neural[m]["budgets"][mid][0] - neural[m]["budgets"][top][0] for m in (GPT7, LSTM2)}
    # what the prose says, checked on the recorded seeds
    claim(len(budgets) >= 3 and all(len(seeds_of(m, b)) >= 3 for m in neural for b in budgets),
          "three budgets, three seeds each")
    claim(all(min(seeds_of(m, b)) > kn_bpc for m in neural for b in budgets), "no model reaches the count table")
    claim(all(neural[LSTM2]["budgets"][b][2] < min(neural[m]["budgets"][b][1] for m in neural if m != LSTM2)
              for b in budgets[:2]), "the LSTM leads every Transformer, every seed, at the two short budgets")
    claim(calls[top] == "behind" and modern_calls[top] == "ahead", f"at {top:g} s: GPT {calls[top]}, modern "
          f"GPT {modern_calls[top]} the LSTM")
    claim(gain[GPT7] > 2 * gain[LSTM2], f"the GPT gains more than twice the LSTM's gain: {gain}")
    for b in budgets:
        glue(f"ch7_eq_{b:g}s", calls[b])
        glue(f"ch7_eq_modern_{b:g}s", modern_calls[b])
    glue("ch7_eq_gpt_gain", f"{gain[GPT7]:.2f}")
    glue("ch7_eq_lstm_gain", f"{gain[LSTM2]:.2f}")
    glue("ch7_eq_gpt_mid", f"{neural[GPT7]['budgets'][mid][0]:.3f}")
    glue("ch7_eq_lstm_mid", f"{neural[LSTM2]['budgets'][mid][0]:.3f}")
    glue("ch7_eq_modern_top", f"{neural[MODERN]['budgets'][top][0]:.3f}")
    for key, m in (("modern", MODERN), ("lstm", LSTM2), ("gpt", GPT7)):
        glue(f"ch7_eq_{key}_range", "{1:.3f}–{2:.3f}".format(*neural[m]["budgets"][top]))
    glue("ch7_eq_budgets", ", ".join(f"{b / 60:g} min" if b >= 60 else f"{b:g} s" for b in budgets))
    glue("ch7_eq_top", f"{top / 60:g}")
    glue("ch7_eq_best", best)
    glue("ch7_eq_best_bpc", f"{neural[best]['budgets'][top][0]:.3f}")
    glue("ch7_eq_gpt_top", f"{neural[GPT7]['budgets'][top][0]:.3f}")
    glue("ch7_eq_lstm_top", f"{neural[LSTM2]['budgets'][top][0]:.3f}")
    glue("ch7_eq_gap_kn", f"{neural[best]['budgets'][top][0] - kn_bpc:.2f}")
    glue("ch7_eq_wall_min", f"{prov['wall_s'] / 60:.0f}")
    glue("ch7_eq_lstm_factor", f"{prov['best_lr_factor'][LSTM2]:g}")
    glue("ch7_eq_modern_factor", f"{prov['best_lr_factor'][MODERN]:g}")
    return {"figure": fig, "budgets": budgets, "seeds_of": seeds_of, "kn_name": kn_name, "kn_bpc": kn_bpc,
            "neural": neural}


def check_and_glue_position_curves(board: dict, model, val_data, context_len: int, device,
                             results_dir: Optional[Path] = None):
    """Loss by position in the window: the recorded curves (LSTM, GPT, modern GPT at the largest budget, 3 seeds)
    and this chapter's live model on 512 validation windows. Prints and glues at how many positions each GPT is
    below / above the LSTM on every seed and the mean difference over the last 16; asserts the live model gains
    from longer context. Returns the figure."""
    import math

    import torch.nn.functional as F

    from .. import plots
    from ..data import get_batch
    from ..results import read_rows
    from ..utils import claim, glue

    top, pos_rows = board["budgets"][-1], read_rows("budget_leaderboard_positions", results_dir)

    def by_position(m):
        """(seeds, T) bits at each position of the window: model m at the largest budget."""
        rows = [r for r in pos_rows if r["model"] == m and float(r["budget_s"]) == top]
        return torch.tensor([[float(r["bits"]) for r in rows if r["seed"] == s]
                             for s in sorted({r["seed"] for r in rows})])

    curves = {m: by_position(m) for m in (LSTM2, GPT7, MODERN)}
    xw, yw = get_batch(val_data, 512, context_len, torch.Generator().manual_seed(1234), device)
    with torch.no_grad():
        live = F.cross_entropy(model(xw).transpose(1, 2), yw, reduction="none").mean(0).cpu() / math.log(2)
    fig, ax = plots.new_figure(figsize=(6.4, 3.4))
    for m, c in curves.items():
        t = range(1, c.shape[1] + 1)
        ax.fill_between(t, c.min(0).values, c.max(0).values, color=COLORS[m], alpha=0.25, lw=0)
        ax.plot(t, c.mean(0), color=COLORS[m], lw=1.2, label=f"{m}, {top:g} s (recorded, 3 seeds)")
    ax.plot(range(1, len(live) + 1), live, color="black", lw=1, ls="-.", label="this chapter's GPT (live)")
    ax.axhline(board["kn_bpc"], color="tab:gray", ls="--", lw=1,
               label=f"{board['kn_name'].split(' (')[0]} (6 characters of context)")
    ax.set(xlabel="position in the window (characters read, including this one)", ylabel="validation bits/char",
           ylim=(2.0, 4.0), title="Loss by position in the 64-character window")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)

    late = slice(-16, None)                              # the last 16 positions: 49-64 characters read
    for m in (GPT7, MODERN):
        a, lstm = curves[m], curves[LSTM2]
        below = int((a.max(0).values < lstm.min(0).values).sum())       # every seed below every LSTM seed
        above = int((a.min(0).values > lstm.max(0).values).sum())
        gap = a.mean(0) - lstm.mean(0)
        print(f"{m}: below the LSTM on every seed at {below} of {a.shape[1]} positions, above it at {above}")
        print(f"    mean difference: positions 1-8 {gap[:8].mean():+.3f}, 49-64 {gap[late].mean():+.3f} bits/char")
        key = m.split(" (")[0].split()[0].lower()
        glue(f"ch7_pos_{key}_below", below)
        glue(f"ch7_pos_{key}_above", above)
        glue(f"ch7_pos_{key}_late", f"{gap[late].mean():+.2f}")
    print(f"this chapter's GPT, live: {live[:8].mean():.2f} bits/char at positions 1-8, {live[late].mean():.2f} "
          "at 49-64")
    claim(live[late].mean() < live[:8].mean() - 0.2, "the live GPT gains from longer context: "
          f"{live[:8].mean():.3f} -> {live[late].mean():.3f} bits/char")
    glue("ch7_pos_live_early", f"{live[:8].mean():.1f}", tol=0.3, spread="glue_spread", margin=2)
    glue("ch7_pos_live_late", f"{live[late].mean():.1f}", tol=0.2, spread="glue_spread", margin=2)
    return fig


# The quoting test as benchmarks/budget_leaderboard.py runs it (tests/test_agreement_ch07.py holds the two together):
# training windows of 65 characters from book.pretrain.quote_windows(..., 16, 31), and validation windows from its
# quote_eval_windows: a 20-character passage pasted twice, the second copy starting 2-4 characters after the first
# ends, both scored from their second character on.
QUOTE_TEST = {"train_len": (16, 31), "eval_len": 20, "gap": (2, 4), "eval_windows": 2048, "window": 65}


def check_and_glue_quote(board: dict, results_dir: Optional[Path] = None) -> dict:
    """The quoting test's record (book/results/budget_leaderboard_quote.csv): each model's bits/char on a passage's
    first and second copy. Prints the seeds' ranges; asserts the GPT beats the LSTM on the second copy on every
    seed, drops more than 0.3 bits from first to second copy, and the LSTM less than 0.05; glues the numbers and
    the test's set-up (QUOTE_TEST). Returns {model: [(first, second) per seed]}."""
    from ..results import read_rows
    from ..utils import claim, glue

    q = {}
    for r in read_rows("budget_leaderboard_quote", results_dir):
        q.setdefault(r["model"], []).append((float(r["first_bits"]), float(r["second_bits"])))
    short = lambda m: m.split(" (")[0] + " (counts)" if "counts" in m else m
    print(f"{'bits/char, seeds range':26s} | first copy | second copy | second minus first")
    for m, v in q.items():
        f1, f2, d = [a for a, _ in v], [b for _, b in v], [b - a for a, b in v]
        print(f"{short(m):26s} | {min(f1):.2f}-{max(f1):.2f}  | {min(f2):.2f}-{max(f2):.2f}   | "
              f"{min(d):+.3f} to {max(d):+.3f}")
    gpt_second, lstm_second = [b for _, b in q[GPT7]], [b for _, b in q[LSTM2]]
    gpt_drop, lstm_drop = [a - b for a, b in q[GPT7]], [a - b for a, b in q[LSTM2]]
    kn_first, kn_second = q[next(m for m in q if m.startswith(board["kn_name"].split(" (")[0]))][0]
    claim(len(gpt_second) >= 3 and len(lstm_second) >= 3, "three seeds of each")
    claim(max(gpt_second) < min(lstm_second), f"the GPT beats the LSTM on the second copy, every seed: {q}")
    claim(min(gpt_drop) > 0.3 and max(lstm_drop) < 0.05, f"the GPT copies, the LSTM does not: {q}")
    mean = lambda v: sum(v) / len(v)
    seeds_range = lambda v: (f"{min(v):.2f} on every seed" if f"{min(v):.2f}" == f"{max(v):.2f}"
                             else f"{min(v):.2f}–{max(v):.2f} over the seeds")
    glue("ch7_q_gpt", f"{mean(gpt_second):.2f}")
    glue("ch7_q_gpt_range", seeds_range(gpt_second))
    glue("ch7_q_lstm", f"{mean(lstm_second):.2f}")
    glue("ch7_q_lstm_range", seeds_range(lstm_second))
    glue("ch7_q_kn_first", f"{kn_first:.2f}")
    glue("ch7_q_kn_second", f"{kn_second:.2f}")
    glue("ch7_q_gpt_first", f"{mean([a for a, _ in q[GPT7]]):.2f}")
    glue("ch7_q_lstm_first", f"{mean([a for a, _ in q[LSTM2]]):.2f}")
    glue("ch7_q_gpt_drop", f"{min(gpt_drop):.2f}–{max(gpt_drop):.2f}")
    glue("ch7_q_lstm_drop", f"{min(lstm_drop):.3f}–{max(lstm_drop):.3f}")
    t = QUOTE_TEST
    glue("ch7_q_train_len", "{}–{}".format(*t["train_len"]))
    glue("ch7_q_len", t["eval_len"])
    glue("ch7_q_gap", "{}–{}".format(*t["gap"]))
    glue("ch7_q_back", "{}–{}".format(*(t["eval_len"] + g for g in t["gap"])))
    glue("ch7_q_windows", f"{t['eval_windows']:,}")
    glue("ch7_q_window", t["window"])
    return q


def sampling_figure(model, tok, prompt: str, title: str, **setting):
    """One frame of the sampling sliders: the next-character distribution after `prompt` (the model's own at τ = 1
    as outlines, filled: what `setting` samples from) beside a 120-character sample drawn with seed 7."""
    import textwrap

    from .. import plots
    from ..generate import generate, next_token_probs

    device = next(model.parameters()).device
    prompt_ids = torch.tensor([tok.encode(prompt)], device=device)
    with torch.no_grad():
        last_logits = model(prompt_ids)[0, -1].cpu()                  # (V,) logits for the next character
    base_probs = last_logits.softmax(-1)
    top_ids = base_probs.topk(12).indices
    probs = next_token_probs(last_logits, **setting)
    gen = torch.Generator(device=device).manual_seed(7)
    out = generate(model, prompt_ids, 120, generator=gen, **setting)[0, prompt_ids.shape[1]:]
    fig, (ax, ax_text) = plots.new_figure(figsize=(8, 3), ncols=2, width_ratios=[1, 1.15])
    ax.bar(range(12), base_probs[top_ids], color="none", edgecolor="tab:gray", label="model (τ=1)")
    ax.bar(range(12), probs[top_ids], color="tab:blue", alpha=0.8, label=title)
    ax.set_xticks(range(12), [repr(tok.itos[int(i)])[1:-1] for i in top_ids])
    ax.set(ylim=(0, 1), ylabel="probability", xlabel=f"next character (the 12 likeliest of {len(base_probs)})",
           title=f"next after '...{prompt[-10:]!s}'".replace("\n", "\\n"))
    ax.legend(fontsize=7)
    ax_text.axis("off")
    wrap = lambda text: [w for line in text.split("\n") for w in textwrap.wrap(line, 46) or [""]]
    head = wrap(prompt.rstrip())                                    # the prompt in grey, the sample below it
    ax_text.text(0, 1, "\n".join(head), family="monospace", fontsize=8, va="top", color="tab:gray")
    ax_text.text(0, 1 - 0.075 * len(head), "\n".join(["…" + line if n == 0 else line for n, line in
                                                       enumerate(wrap(tok.decode(out.tolist()))[:10])]),
                 family="monospace", fontsize=8, va="top")
    ax_text.set_title(f"prompt (grey) and sample, {title}", fontsize=9)
    return fig


def check_and_glue_kv_timing(positions: dict, kv_times: dict, prompt_len: int):
    """The KV cache's saving: `positions` {new tokens: (positions run without a cache, with it)} counted, and
    `kv_times` {"no cache": [s], "KV cache": [s]} timed in the same order. Prints both, asserts the counts (the
    prefix re-run at every step without a cache, one position per step with it; in a smoke run fewer tokens are
    written) and that the saving widens with length, glues them. Returns the figure of both."""
    from .. import plots
    from ..utils import claim, glue, step_budget

    lengths = sorted(positions)
    speedup = [a / b for a, b in zip(kv_times["no cache"], kv_times["KV cache"])]
    print(f"{'new tokens':>10} | {'positions, no cache':>19} | {'with cache':>10} | {'seconds, no cache':>17} | "
          f"{'with cache':>10}")                                 # seconds: on this machine
    for n, a, b, s in zip(lengths, kv_times["no cache"], kv_times["KV cache"], speedup):
        full, cached = positions[n]
        print(f"{n:10d} | {full:19,} | {cached:10,} | {a:17.2f} | {b:10.2f} ({s:.1f}x)")
    made = {n: step_budget(n) for n in lengths}               # new tokens written (fewer in a smoke run)
    claim(all(positions[n] == (sum(prompt_len + t for t in range(made[n])), prompt_len + made[n] - 1)
              for n in lengths), f"the counted positions follow the rule: {positions}")
    first, last = lengths[0], lengths[-1]
    claim(positions[last][0] / positions[last][1] > 4 * positions[first][0] / positions[first][1],
          f"the cache's saving should widen with length: positions run {positions}")
    glue(f"ch7_pos_full_{last}", f"{positions[last][0]:,}")
    glue(f"ch7_pos_cache_{last}", f"{positions[last][1]:,}")
    glue(f"ch7_pos_ratio_{last}", f"{positions[last][0] / positions[last][1]:.0f}")
    glue(f"ch7_pos_ratio_{first}", f"{positions[first][0] / positions[first][1]:.0f}")
    glue(f"ch7_kv_speedup_{last}", f"{speedup[-1]:.1f}", timing=True)
    glue(f"ch7_kv_speedup_{first}", f"{speedup[0]:.1f}", timing=True)
    fig, (ax1, ax2) = plots.new_figure(figsize=(8, 2.9), ncols=2)
    plots.line_plot(lengths, {"no cache": [positions[n][0] for n in lengths],
                              "KV cache": [positions[n][1] for n in lengths]},
                    "new tokens", "positions run (counted)", title="The work: positions run", ax=ax1)
    plots.line_plot(lengths, kv_times, "new tokens", "seconds", title="The time, on this machine", ax=ax2)
    return fig
