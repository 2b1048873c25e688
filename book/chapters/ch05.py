"""Chapter 5, positional encoding: the shift and rotation matrices it proves things with, the order task (bites), and
the exercise checkers.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch

from ..checks import positive_int, probability, returned
from ..positional import RotaryEmbedding, _check_even, pair_frequencies, sinusoidal_table
from ..tasks import _BITES, _N_NOUNS

__all__ = ["sinusoidal_shift_matrix", "rope_rotation_matrix", "check_shift_matrix", "check_rotate_half", "bites_batch"]


def sinusoidal_shift_matrix(k: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The (C, C) matrix M_k with PE[pos + k] = M_k @ PE[pos] for every pos. Chapter 5.

    Block diagonal: pair i gets [[cos k theta_i, sin k theta_i], [-sin k theta_i, cos k theta_i]],
    from sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b - sin a sin b.
    """
    c, s = (k * pair_frequencies(d_model, base)).cos(), (k * pair_frequencies(d_model, base)).sin()
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    idx = torch.arange(0, d_model, 2)
    M[idx, idx], M[idx, idx + 1], M[idx + 1, idx], M[idx + 1, idx + 1] = c, s, -s, c
    return M


def rope_rotation_matrix(pos: int, d_head: int, base: float = 10000.0) -> torch.Tensor:
    """The (D, D) block-diagonal rotation R_pos of RoPE: pair i turns by pos * theta_i. Chapter 5.

    Rows act on column vectors: rotated = R_pos @ x. Orthogonal, and R_m^T R_n = R_(n-m).
    """
    ang = pos * pair_frequencies(d_head, base)
    c, s = ang.cos(), ang.sin()
    R = torch.zeros(d_head, d_head, dtype=torch.float64)
    idx = torch.arange(0, d_head, 2)
    R[idx, idx], R[idx, idx + 1], R[idx + 1, idx], R[idx + 1, idx + 1] = c, -s, s, c
    return R


def check_shift_matrix(fn: Callable, d_model: int = 8, base: float = 10000.0) -> bool:
    """Self-check for the chapter 5 exercise: does `fn(k, d_model)` return M_k with PE[pos+k] = M_k PE[pos]?

    Tries k in {0, 1, 3, 17} on positions 0..49; raises AssertionError with a hint on the first miss.
    """
    pe = sinusoidal_table(50 + 17, d_model, base).double()
    for k in (0, 1, 3, 17):
        M = torch.as_tensor(returned(fn(k, d_model)), dtype=torch.float64)
        if tuple(M.shape) != (d_model, d_model):
            raise AssertionError(f"M_{k} should have shape ({d_model}, {d_model}), got {tuple(M.shape)}")
        got = pe[:50] @ M.T  # row pos holds (M_k PE[pos])^T
        if not torch.allclose(got, pe[k : k + 50], atol=1e-5):
            raise AssertionError(f"M_{k} @ PE[pos] is not PE[pos + {k}] (check the signs of the sin terms)")
    return True


def check_rotate_half(fn: Callable, d_head: int = 8) -> bool:
    """Self-check for the chapter 5 exercise: is `fn(x, offset)` RoPE in the rotate-half layout (GPT-NeoX, HF)?

    In that layout pair i is the dims (i, i + D/2) instead of (2i, 2i+1). Permuting the dims of an interleaved
    vector to [0, 2, 4, ..., 1, 3, 5, ...] gives the rotate-half vector, and then fn must equal the
    interleaved RoPE permuted the same way. Tries offsets 0 and 3 on x (2, 3, 5, d_head); raises on a miss.
    """
    _check_even(d_head, "d_head")
    perm = torch.cat([torch.arange(0, d_head, 2), torch.arange(1, d_head, 2)])
    x = torch.randn(2, 3, 5, d_head, generator=torch.Generator().manual_seed(0))
    rope = RotaryEmbedding(d_head)
    for offset in (0, 3):
        got = fn(x[..., perm], offset)
        if not isinstance(got, torch.Tensor) or got.shape != x.shape:
            raise AssertionError(f"fn(x, offset) should return a tensor of shape {tuple(x.shape)}")
        if not torch.allclose(got, rope(x, offset)[..., perm], atol=1e-5):
            raise AssertionError(f"offset {offset}: not the interleaved RoPE permuted to the rotate-half layout "
                                 "(pair i is dims i and i + D/2; the first half gets x1 cos - x2 sin)")
    return True


def bites_batch(batch_size: int, seq_len: int, min_verb_pos: int = 1, distractor_p: float = 0.0,
                generator: Optional[torch.Generator] = None):
    """Who bites? One "noun bites noun" inside filler words; the answer is the noun before "bites". Chapter 5.

    "dog bites man" and "man bites dog" hold the same words, so only word order tells them apart.
    Returns x (B, T) ids into BITES_VOCAB, verb_pos (B,) in min_verb_pos..T-2, y (B,) the biter's id.
    The two nouns differ; with distractor_p > 0 other filler slots hold random nouns too.
    """
    positive_int(batch_size=batch_size, seq_len=seq_len, min_verb_pos=min_verb_pos)
    probability(distractor_p=distractor_p, closed=True)
    if seq_len < 3 or min_verb_pos > seq_len - 2:
        raise ValueError(f"need seq_len >= 3 and 1 <= min_verb_pos <= seq_len - 2, got seq_len={seq_len}, "
                         f"min_verb_pos={min_verb_pos}")
    B, T = batch_size, seq_len
    x = torch.randint(_N_NOUNS, _BITES, (B, T), generator=generator)  # filler words
    nouns = torch.randint(0, _N_NOUNS, (B, T), generator=generator)
    x = torch.where(torch.rand(B, T, generator=generator) < distractor_p, nouns, x)
    pos = torch.randint(min_verb_pos, T - 1, (B,), generator=generator)
    biter = torch.randint(0, _N_NOUNS, (B,), generator=generator)
    bitten = (biter + torch.randint(1, _N_NOUNS, (B,), generator=generator)) % _N_NOUNS  # never the biter
    rows = torch.arange(B)
    x[rows, pos - 1], x[rows, pos], x[rows, pos + 1] = biter, _BITES, bitten
    return x, pos, biter
