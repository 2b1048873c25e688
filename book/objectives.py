"""Three ways to pre-train one architecture on unlabelled text. Chapter 9.

- causal language modelling (GPT): predict every next token (the window shifted by one, as since Chapter 1);
- masked language modelling (BERT, Devlin et al. 2018): choose 15 % of the positions; of those, 80 % become
  [MASK], 10 % a random token, 10 % stay as they are; predict the original token there only, `mask_tokens`;
- span corruption (T5, Raffel et al. 2019): drop about 15 % of the tokens in spans of mean length 3, put one
  sentinel where each span was; the target lists the spans, each after its sentinel, `span_corrupt`.

`PretrainVocab` adds the special tokens to a character vocabulary: ids 0 .. n_chars-1 are the characters, then
[PAD], [MASK], [BOS], [EOS] and the sentinels <X0>, <X1>, ... Labels that carry no loss are IGNORE (-100), the
default ignore_index of F.cross_entropy. Shape legend (batch first): B batch, T window length, S encoder input
length, U target length.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, NamedTuple, Optional, Sequence, Tuple

import torch

from .checks import positive_int, positive_number, probability, tensor_dims, token_ids

__all__ = ["IGNORE", "PretrainVocab", "MaskedBatch", "SpanBatch", "mask_tokens",
           "span_lengths", "span_corrupt", "span_layout"]

IGNORE = -100


@dataclass(frozen=True)
class PretrainVocab:
    """A character vocabulary of n_chars ids plus specials: [PAD], [MASK], [BOS], [EOS], n_sentinels sentinels."""
    n_chars: int
    n_sentinels: int = 16

    def __post_init__(self):
        positive_int(n_chars=self.n_chars, n_sentinels=self.n_sentinels)

    @property
    def pad(self) -> int:
        return self.n_chars

    @property
    def mask(self) -> int:
        return self.n_chars + 1

    @property
    def bos(self) -> int:
        return self.n_chars + 2

    @property
    def eos(self) -> int:
        return self.n_chars + 3

    def sentinel(self, i: int) -> int:
        if not 0 <= i < self.n_sentinels:
            raise ValueError(f"sentinel index must lie in [0, {self.n_sentinels}), got {i}: make the vocabulary "
                             "with more n_sentinels, or corrupt fewer spans per window")
        return self.n_chars + 4 + i

    @property
    def size(self) -> int:
        return self.n_chars + 4 + self.n_sentinels

    def is_sentinel(self, i: int) -> bool:
        return self.n_chars + 4 <= i < self.size

    def names(self, chars: Sequence[str]) -> List[str]:
        """Display names of every id, given the n_chars characters: specials in brackets."""
        if len(chars) != self.n_chars:
            raise ValueError(f"expected {self.n_chars} characters, got {len(chars)}")
        return [*chars, "[PAD]", "[MASK]", "[BOS]", "[EOS]", *(f"<X{i}>" for i in range(self.n_sentinels))]


def _character_windows(ids, vocab: PretrainVocab) -> None:
    """ids: (B, T) windows, T >= 2, of character ids only (the specials come in later)."""
    token_ids(tensor_dims(ids, 2, "ids (B, T)"), vocab.n_chars, "ids (character ids, no specials yet)")
    if ids.shape[1] < 2:
        raise ValueError(f"ids should have shape (B, T) with T >= 2, got {tuple(ids.shape)}")


class MaskedBatch(NamedTuple):
    """inputs (B, T) with masks and random tokens in; labels (B, T): the original id where chosen, else IGNORE;
    kind (B, T): 0 not chosen, 1 -> [MASK], 2 -> random token, 3 -> kept unchanged."""
    inputs: torch.Tensor
    labels: torch.Tensor
    kind: torch.Tensor


def mask_tokens(ids: torch.Tensor, vocab: PretrainVocab, p: float = 0.15, *, mask_frac: float = 0.8,
                random_frac: float = 0.1, generator: Optional[torch.Generator] = None) -> MaskedBatch:
    """BERT's masking: each position is chosen with probability p; a chosen position becomes [MASK] with
    probability mask_frac, a random character with probability random_frac, and stays unchanged otherwise.
    The loss is taken at chosen positions only. ids (B, T) character ids."""
    _character_windows(ids, vocab)
    positive_number(p=p)
    probability(p=p, mask_frac=mask_frac, random_frac=random_frac)
    if mask_frac + random_frac > 1:
        raise ValueError(f"mask_frac + random_frac must be at most 1, got {mask_frac} + {random_frac}")
    dev = ids.device
    chosen = torch.rand(ids.shape, generator=generator, device=dev) < p
    u = torch.rand(ids.shape, generator=generator, device=dev)
    kind = torch.zeros_like(ids)
    kind[chosen & (u < mask_frac)] = 1
    kind[chosen & (u >= mask_frac) & (u < mask_frac + random_frac)] = 2
    kind[chosen & (u >= mask_frac + random_frac)] = 3
    inputs = ids.clone()
    inputs[kind == 1] = vocab.mask
    rand = torch.randint(0, vocab.n_chars, ids.shape, generator=generator, device=dev)
    inputs[kind == 2] = rand[kind == 2]
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
    return MaskedBatch(inputs, labels, kind)


def span_lengths(total: int, n_parts: int, rng: torch.Generator) -> List[int]:
    """total split into n_parts positive lengths, uniformly at random (T5's random_segmentation)."""
    if n_parts < 1 or total < n_parts:
        raise ValueError(f"cannot split {total} tokens into {n_parts} non-empty parts")
    cuts = torch.randperm(total - 1, generator=rng)[:n_parts - 1].sort().values + 1
    edges = [0, *cuts.tolist(), total]
    return [b - a for a, b in zip(edges, edges[1:])]


def span_layout(T: int, noise: float = 0.15, mean_span: float = 3.0) -> Tuple[int, int]:
    """(noise tokens, spans) for a window of T tokens: round(T * noise) tokens in round(noise tokens / mean_span)
    spans, at least one of each, as in T5."""
    positive_number(noise=noise)
    probability(noise=noise)
    positive_number(mean_span=mean_span)
    if mean_span < 1:
        raise ValueError(f"mean_span must be a number >= 1, got {mean_span!r}")
    n_noise = min(max(int(round(T * noise)), 1), T - 1)
    n_spans = max(int(round(n_noise / mean_span)), 1)
    return n_noise, n_spans


class SpanBatch(NamedTuple):
    """enc_in (B, S): the window with each dropped span replaced by one sentinel; dec_in (B, U) = [BOS] + target
    without its last token (the shifted target, as in any encoder-decoder); dec_out (B, U) = target =
    <X0> span0 <X1> span1 ... <Xn-1> span(n-1) <Xn> [EOS]; noise (B, T) True where a token was dropped."""
    enc_in: torch.Tensor
    dec_in: torch.Tensor
    dec_out: torch.Tensor
    noise: torch.Tensor


def span_corrupt(ids: torch.Tensor, vocab: PretrainVocab, noise: float = 0.15, mean_span: float = 3.0, *,
                 generator: Optional[torch.Generator] = None) -> SpanBatch:
    """T5's span corruption of windows ids (B, T) (Raffel et al. 2019, section 3.1.4). Every window of length T
    has the same number of noise tokens and spans (span_layout), so the batch needs no padding: spans alternate
    with kept runs, the window starting with a kept run, and the lengths of both are drawn at random."""
    _character_windows(ids, vocab)
    B, T = ids.shape
    n_noise, n_spans = span_layout(T, noise, mean_span)
    if n_spans + 1 > vocab.n_sentinels:
        raise ValueError(f"{n_spans} spans need {n_spans + 1} sentinels, the vocabulary has {vocab.n_sentinels}")
    if T - n_noise < n_spans:
        raise ValueError(f"a window of {T} tokens cannot keep {n_spans} runs around {n_spans} spans")
    enc, tgt, masks = [], [], []
    rows = ids.tolist()
    for row in rows:
        spans = span_lengths(n_noise, n_spans, generator)
        keeps = span_lengths(T - n_noise, n_spans, generator)
        e, t, m, pos = [], [], [False] * T, 0
        for i, (k, s) in enumerate(zip(keeps, spans)):
            e += row[pos:pos + k]
            pos += k
            e.append(vocab.sentinel(i))
            t += [vocab.sentinel(i), *row[pos:pos + s]]
            m[pos:pos + s] = [True] * s
            pos += s
        e += row[pos:]
        t += [vocab.sentinel(n_spans), vocab.eos]
        enc.append(e)
        tgt.append(t)
        masks.append(m)
    dev = ids.device
    enc_in = torch.tensor(enc, dtype=torch.long, device=dev)
    dec_out = torch.tensor(tgt, dtype=torch.long, device=dev)
    dec_in = torch.cat([torch.full((B, 1), vocab.bos, dtype=torch.long, device=dev), dec_out[:, :-1]], dim=1)
    return SpanBatch(enc_in, dec_in, dec_out, torch.tensor(masks, device=dev))
