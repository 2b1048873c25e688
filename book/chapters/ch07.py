"""Chapter 7, training a GPT: the stack drawing, the budget leaderboard reader, and the exercise checkers.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import torch

from ..checks import returned
from ..diagrams import Diagram, ROLES
from ..kv_cache import kv_cache_bytes
from ..results import _read_json

__all__ = ["draw_gpt_stack", "check_kv_cache_bytes", "check_top_p", "leaderboard_bpc"]


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
