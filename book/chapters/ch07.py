"""Chapter 7, training a GPT: the stack drawing, the budget leaderboard reader, the samples-by-loss reader, and the
exercise checkers.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import torch

from ..checks import returned
from ..diagrams import Diagram, ROLES
from ..kv_cache import kv_cache_bytes
from ..results import _read_json

__all__ = ["draw_gpt_stack", "check_kv_cache_bytes", "check_top_p", "leaderboard_bpc", "samples_by_loss",
           "samples_html", "real_word_share", "glue_samples_by_loss", "check_and_glue_live_place"]


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
            raise AssertionError(f"for (n_layers, n_kv_heads, d_head, context_len, batch, bytes) = {args}: expected "
                                 f"{want:,} bytes, got {got!r}. Hint: K and V are both cached, in every layer.")
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
            raise AssertionError(f"output should have the logits' shape {tuple(probs.shape)}, got {tuple(got.shape)}")
        kept = torch.isfinite(got)
        if kept.tolist() != keep:
            raise AssertionError(f"p={p}, probs {probs.tolist()}: should keep {keep}, kept {kept.tolist()}. "
                                 "Hint: keep a token while the mass ranked above it is still < p.")
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
