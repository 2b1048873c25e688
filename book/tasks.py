"""Synthetic tasks made in code, with clean, checkable answers. Chapters 2, 3 and 8.

- `ToyTranslation`: a seeded "translation" between two small token languages with real reordering
  (the noun moves to the front of its phrase, the verb to the end of its clause). Chapters 2, 3, 8.
- `recall_batch`: recall the token that followed a marker k steps ago. Chapter 2.
- `recall_many_batch`: recall n tokens at once, after k filler steps: where a fixed-size state runs out. Chapter 2.
- `copy_back_batch`: copy the token k steps back (chapter 5's relative-position task).
Tasks only one chapter uses live in its module (book.chapters): bites (ch05), repeat (ch06), needle (ch10).

Shape legend (batch first): B batch, S source length, T target length (with BOS/EOS), V vocab.
Both translation vocabularies start with the same specials: PAD = 0, BOS = 1, EOS = 2.
"""
from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch

from .checks import allocating, non_negative_int, optional_positive_int, positive_int, tensor_dims

__all__ = ["PAD", "BOS", "EOS", "SPECIALS", "LENGTH_BUCKETS", "TranslationBatch", "ToyTranslation",
           "sequence_accuracy", "position_accuracy", "evaluate_translation", "recall_batch", "recall_many_batch",
           "BITES_VOCAB"]

PAD, BOS, EOS = 0, 1, 2
SPECIALS = ("<pad>", "<bos>", "<eos>")
LENGTH_BUCKETS = ((3, 7), (8, 12), (13, 17), (18, 22), (23, 27), (28, 32))   # source lengths, Chapters 2, 3, 8


class TranslationBatch(NamedTuple):
    """A padded batch. src (B, S), tgt_in = BOS + target (B, T), tgt_out = target + EOS (B, T),
    src_lengths / tgt_lengths (B,) count real tokens (tgt_lengths includes EOS)."""
    src: torch.Tensor
    src_lengths: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    tgt_lengths: torch.Tensor

    @property
    def src_keep_mask(self) -> torch.Tensor:
        """Boolean (B, S), True at real tokens: the book's one mask convention, True = may attend."""
        return self.src != PAD


def _rng(generator: Optional[torch.Generator]) -> random.Random:
    """A Python RNG seeded from a torch.Generator (fast per-token sampling, still reproducible)."""
    seed = torch.randint(0, 2**62, (1,), generator=generator).item()
    return random.Random(seed)


@dataclass(frozen=True)
class ToyTranslation:
    """A toy language pair with reordering. Chapters 2, 3 and 8.

    Source grammar: sentence = clause ("and" clause)*, clause = NP verb NP, NP = adj{0..2} noun.
    Translation: every word becomes its upper-case twin (a separate vocabulary, unrelated ids),
    each NP puts its noun first, and each clause puts its verb last:
    "big red cat sees old dog" -> "CAT BIG RED DOG OLD SEES". The map is invertible (`detranslate`).
    Sentences whose hash falls in the test partition never appear in training (`is_test`).
    """
    nouns: Tuple[str, ...] = ("cat", "dog", "fox", "owl", "bee", "ant", "cow", "hen")
    adjectives: Tuple[str, ...] = ("red", "big", "old", "shy", "wet", "odd")
    verbs: Tuple[str, ...] = ("sees", "eats", "likes", "helps", "finds")
    conj: str = "and"
    max_adjectives: int = 2
    test_percent: int = 10

    def __post_init__(self):
        words = self.source_words
        if len(set(words)) != len(words) or self.conj in self.nouns + self.adjectives + self.verbs:
            raise ValueError("the word lists must be disjoint and without repeats")
        if not (self.nouns and self.adjectives and self.verbs):
            raise ValueError("need at least one noun, adjective and verb")
        if not non_negative_int(max_adjectives=self.max_adjectives) <= len(self.adjectives):
            raise ValueError(f"max_adjectives must be in 0..{len(self.adjectives)}, got {self.max_adjectives}")
        if not positive_int(test_percent=self.test_percent) < 100:
            raise ValueError(f"test_percent must be in 1..99, got {self.test_percent}")

    # ---- vocabularies -------------------------------------------------------------------
    @property
    def source_words(self) -> List[str]:
        return list(self.nouns) + list(self.adjectives) + list(self.verbs) + [self.conj]

    @property
    def src_vocab(self) -> List[str]:
        return list(SPECIALS) + self.source_words

    @property
    def tgt_vocab(self) -> List[str]:
        return list(SPECIALS) + [w.upper() for w in self.source_words]

    @property
    def min_len(self) -> int:
        return 3

    def lengths(self, n_clauses: int) -> Tuple[int, int]:
        """Shortest and longest sentence with `n_clauses` clauses."""
        return 4 * n_clauses - 1, (4 + 2 * self.max_adjectives) * n_clauses - 1

    # ---- the translation itself -----------------------------------------------------------
    def alignment(self, src: Sequence[str]) -> List[int]:
        """For each target position, the index of the source word it translates (a permutation).

        Example: "big cat sees dog" -> [1, 0, 3, 2], i.e. CAT BIG DOG SEES.
        """
        unknown = [w for w in src if w not in self.source_words]
        if unknown:
            raise ValueError(f"unknown source word {unknown[0]!r}")
        out: List[int] = []
        clause: List[int] = []
        for i, w in enumerate(list(src) + [self.conj]):
            if w != self.conj:
                clause.append(i)
                continue
            np1, pos = self._parse_np(src, clause, 0)
            if pos >= len(clause) or src[clause[pos]] not in self.verbs:
                raise ValueError(f"not a sentence of this grammar: {' '.join(src)!r}")
            np2, end = self._parse_np(src, clause, pos + 1)
            if end != len(clause):
                raise ValueError(f"not a sentence of this grammar: {' '.join(src)!r}")
            out += np1 + np2 + [clause[pos]] + ([i] if i < len(src) else [])   # verb last, then "and"
            clause = []
        return out

    def _parse_np(self, src, idx: List[int], pos: int) -> Tuple[List[int], int]:
        """Parse adj* noun from idx[pos:]; return [noun, adjs...] (the noun leads) and the next position."""
        adjs = []
        while pos < len(idx) and src[idx[pos]] in self.adjectives:
            adjs.append(idx[pos])
            pos += 1
        if pos >= len(idx) or src[idx[pos]] not in self.nouns or len(adjs) > self.max_adjectives:
            raise ValueError(f"not a sentence of this grammar: {' '.join(src)!r}")
        return [idx[pos]] + adjs, pos + 1

    def translate(self, src: Sequence[str]) -> List[str]:
        """Source words -> target words (noun first in each NP, verb last in each clause)."""
        return [src[i].upper() for i in self.alignment(src)]

    def detranslate(self, tgt: Sequence[str]) -> List[str]:
        """Target words -> source words; the inverse of `translate`."""
        out: List[str] = []
        nps: List[List[str]] = []
        for w in (x.lower() for x in tgt):
            if w in self.nouns:
                nps.append([w])
            elif w in self.adjectives:
                if not nps:
                    raise ValueError("an adjective must follow its noun in the target language")
                nps[-1].insert(len(nps[-1]) - 1, w)
            elif w in self.verbs:
                if len(nps) != 2:
                    raise ValueError(f"a clause needs two noun phrases before its verb, got {len(nps)}")
                out += nps[0] + [w] + nps[1]
                nps = []
            elif w == self.conj:
                out.append(w)
            else:
                raise ValueError(f"unknown target word {w!r}")
        return out

    # ---- sampling ---------------------------------------------------------------------------
    def sample(self, rng: random.Random, length: int) -> List[str]:
        """One source sentence of exactly `length` words (3, 4, ... up to the grammar's limits)."""
        options = [n for n in range(1, length + 1) if self.lengths(n)[0] <= length <= self.lengths(n)[1]]
        if not options:
            raise ValueError(f"no sentence of length {length} exists in this grammar")
        n = rng.choice(options)
        extra = length - self.lengths(n)[0]          # adjectives to spread over the 2n NPs
        counts = [0] * (2 * n)
        for _ in range(extra):
            slot = rng.choice([i for i, c in enumerate(counts) if c < self.max_adjectives])
            counts[slot] += 1
        words: List[str] = []
        for c in range(n):
            if c:
                words.append(self.conj)
            for j in (2 * c, 2 * c + 1):
                words += rng.sample(self.adjectives, counts[j]) + [rng.choice(self.nouns)]
                if j == 2 * c:
                    words.append(rng.choice(self.verbs))
        return words

    def is_test(self, src: Sequence[str]) -> bool:
        """True if the sentence belongs to the held-out partition (a stable hash of its words)."""
        return zlib.crc32(" ".join(src).encode()) % 100 < self.test_percent

    def sample_split(self, rng: random.Random, length: int, split: str) -> List[str]:
        """A sentence of `length` words from the "train" or "test" partition (rejection sampling)."""
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        for _ in range(10_000):
            s = self.sample(rng, length)
            if self.is_test(s) == (split == "test"):
                return s
        raise RuntimeError(f"could not draw a {split} sentence of length {length}")  # pragma: no cover

    # ---- tensors ------------------------------------------------------------------------------
    def encode(self, words: Sequence[str], side: str) -> List[int]:
        """Words -> ids in the "src" or "tgt" vocabulary."""
        vocab = {"src": self.src_vocab, "tgt": self.tgt_vocab}.get(side)
        if vocab is None:
            raise ValueError(f"side must be 'src' or 'tgt', got {side!r}")
        index = {w: i for i, w in enumerate(vocab)}
        return [index[w] for w in words]

    def decode(self, ids: Sequence[int], side: str) -> List[str]:
        """Ids -> words, stopping at EOS and dropping PAD/BOS."""
        vocab = self.src_vocab if side == "src" else self.tgt_vocab
        out = []
        for i in (int(t) for t in ids):
            if i == EOS:
                break
            if i not in (PAD, BOS):
                out.append(vocab[i])
        return out

    def make_batch(self, sentences: Sequence[Sequence[str]]) -> TranslationBatch:
        """Source sentences -> a padded TranslationBatch with their translations."""
        src = [self.encode(s, "src") for s in sentences]
        tgt = [self.encode(self.translate(s), "tgt") for s in sentences]
        B, S, T = len(src), max(map(len, src)), max(map(len, tgt)) + 1
        batch = TranslationBatch(torch.full((B, S), PAD), torch.tensor([len(s) for s in src]),
                                 torch.full((B, T), PAD), torch.full((B, T), PAD),
                                 torch.tensor([len(t) + 1 for t in tgt]))
        for b, (s, t) in enumerate(zip(src, tgt)):
            batch.src[b, :len(s)] = torch.tensor(s)
            batch.tgt_in[b, :len(t) + 1] = torch.tensor([BOS] + t)
            batch.tgt_out[b, :len(t) + 1] = torch.tensor(t + [EOS])
        return batch

    def train_batch(self, batch_size: int, min_len: int, max_len: int,
                    generator: Optional[torch.Generator] = None) -> TranslationBatch:
        """A random training batch, lengths uniform in [min_len, max_len], never a test sentence."""
        positive_int(batch_size=batch_size, min_len=min_len, max_len=max_len)
        if not self.min_len <= min_len <= max_len:
            raise ValueError(f"need {self.min_len} <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
        rng = _rng(generator)
        return self.make_batch([self.sample_split(rng, rng.randint(min_len, max_len), "train")
                                for _ in range(batch_size)])

    def test_sets(self, buckets: Sequence[Tuple[int, int]], n_per_bucket: int,
                  seed: int = 1234) -> Dict[Tuple[int, int], TranslationBatch]:
        """Fixed, distinct held-out test sentences for each (lo, hi) length bucket."""
        rng = random.Random(seed)
        out = {}
        for lo, hi in buckets:
            seen: Dict[str, List[str]] = {}
            for _ in range(50 * n_per_bucket):
                s = self.sample_split(rng, rng.randint(lo, hi), "test")
                seen.setdefault(" ".join(s), s)
                if len(seen) == n_per_bucket:
                    break
            out[(lo, hi)] = self.make_batch(list(seen.values()))
        return out


def _aligned(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """pred (B, T') cut or PAD-padded to target's (B, T)."""
    B, T = target.shape
    if pred.shape[0] != B:
        raise ValueError(f"pred and target need the same batch size, got {pred.shape[0]} and {B}")
    if pred.shape[1] < T:
        pred = torch.cat([pred, torch.full((B, T - pred.shape[1]), PAD, dtype=pred.dtype)], 1)
    return pred[:, :T]


def sequence_accuracy(pred: torch.Tensor, target: torch.Tensor) -> Tuple[float, float]:
    """(exact-match, token) accuracy of predicted ids (B, T') against targets (B, T), both ending in
    EOS then PAD. A sequence is exact only if every token up to and including EOS matches."""
    pred = _aligned(pred, target)
    if target.shape[0] == 0:
        raise ValueError("target holds no sequence (batch size 0): an accuracy over nothing is undefined")
    real = target != PAD
    match = (pred == target) & real
    exact = (match | ~real).all(1).float().mean().item()
    return exact, (match.sum() / real.sum()).item()


def position_accuracy(pred: torch.Tensor, target: torch.Tensor, skip: Sequence[int] = ()) -> Tuple[torch.Tensor,
                                                                                                  torch.Tensor]:
    """Accuracy at every target position: pred (B, T') against target (B, T) (ending in EOS then PAD) ->
    (accuracy (T,), count (T,)), over the rows whose target there is real (not PAD) and not one of the ids
    in `skip` (e.g. a token whose place the grammar fixes); a position with count 0 has accuracy nan. Chapter 2.
    """
    tensor_dims(pred, 2, "pred")
    tensor_dims(target, 2, "target")
    pred = _aligned(pred, target)
    keep = target != PAD
    for i in skip:
        keep &= target != i
    count = keep.sum(0)
    right = ((pred == target) & keep).sum(0)
    return right / count.clamp(min=1) + torch.where(count == 0, float("nan"), 0.0), count


def evaluate_translation(decode: Callable[[torch.Tensor, int], torch.Tensor],
                         test_sets: Dict[Tuple[int, int], TranslationBatch],
                         extra_len: int = 5) -> Dict[Tuple[int, int], Tuple[float, float]]:
    """{bucket: (exact, token accuracy)} for `decode(src (B, S), max_len) -> ids (B, T')`.

    Any model fits (RNN encoder-decoder here, a Transformer in Chapter 8) via its greedy decoder.
    """
    out = {}
    with torch.no_grad():
        for bucket, batch in test_sets.items():
            pred = decode(batch.src, batch.tgt_out.shape[1] + extra_len).cpu()
            out[bucket] = sequence_accuracy(pred, batch.tgt_out)
    return out


def recall_batch(batch_size: int, seq_len: int, n_values: int = 8,
                 distance: Optional[int] = None, generator: Optional[torch.Generator] = None,
                 max_distance: Optional[int] = None):
    """Recall at distance k. Chapter 2.

    Random value tokens (0..n_values-1) with one marker token (id n_values) somewhere; the answer is
    the value right after the marker, which sits k = distance steps before the end (k = 1: last token).
    Returns x (B, T) ids, y (B,) answers, k (B,) distances; k is uniform in 1..max_distance (default T-1)
    unless `distance` is given.
    """
    positive_int(batch_size=batch_size, seq_len=seq_len, n_values=n_values)
    if seq_len < 2 or n_values < 2:
        raise ValueError(f"need seq_len >= 2 and n_values >= 2, got seq_len={seq_len}, n_values={n_values}")
    if distance is not None and optional_positive_int(distance=distance) > seq_len - 1:
        raise ValueError(f"distance must be in 1..{seq_len - 1}, got {distance}")
    if max_distance is not None and (optional_positive_int(max_distance=max_distance) > seq_len - 1
                                     or distance is not None):
        raise ValueError(f"max_distance must be in 1..{seq_len - 1} and not given with distance, got "
                         f"max_distance={max_distance}, distance={distance}")
    with allocating("(batch_size, seq_len) ids", batch_size=batch_size, seq_len=seq_len):
        x = torch.randint(0, n_values, (batch_size, seq_len), generator=generator)
        if distance is None:
            k = torch.randint(1, (max_distance or seq_len - 1) + 1, (batch_size,), generator=generator)
        else:
            k = torch.full((batch_size,), distance)
        rows = torch.arange(batch_size)
        x[rows, seq_len - k - 1] = n_values
        return x, x[rows, seq_len - k], k


def recall_many_batch(batch_size: int, n_digits: int, delay: int, n_values: int = 8,
                      generator: Optional[torch.Generator] = None):
    """Recall n values at once: the test of a fixed-size state's capacity. Chapter 2.

    Each row reads a marker (id n_values), then `n_digits` random values (0..n_values-1), then `delay` random
    filler values, then `n_digits` query tokens (id n_values + 1); at the i-th query the answer is the i-th value.
    So every value waits n_digits + delay steps before it is asked for, whatever n_digits is, and the state must
    hold all n_digits of them at once while it reads the filler. Vocabulary: n_values + 2 ids.
    Returns x (B, 1 + 2 n_digits + delay) ids and y (B, n_digits): the answers at the last n_digits positions.
    """
    positive_int(batch_size=batch_size, n_digits=n_digits, n_values=n_values)
    non_negative_int(delay=delay)
    if n_values < 2:
        raise ValueError(f"need n_values >= 2, got {n_values}")
    y = torch.randint(0, n_values, (batch_size, n_digits), generator=generator)
    filler = torch.randint(0, n_values, (batch_size, delay), generator=generator)
    marker = torch.full((batch_size, 1), n_values)
    queries = torch.full((batch_size, n_digits), n_values + 1)
    return torch.cat([marker, y, filler, queries], 1), y


# ---- who bites whom? (Chapter 5) ---------------------------------------------------------------
BITES_VOCAB = ("dog", "man", "cat", "fox", "owl", "bee", "cow", "hen",      # nouns: ids 0..7
               "the", "a", "big", "old", "then", "so", "and", "very",       # fillers: ids 8..15
               "bites")                                                     # the verb: id 16
_N_NOUNS, _BITES = 8, len(BITES_VOCAB) - 1


# ---- copy the token k back (Chapter 5) ---------------------------------------------------------
def copy_back_batch(batch_size: int, seq_len: int, k, n_letters: int = 4, n_values: int = 16,
                    generator: Optional[torch.Generator] = None):
    """Copy the token k back: n_letters random letters, then k - 1 dots, then "?"; the answer is the last letter.

    The query "?" is the last token; the letter to copy sits exactly k places before it, and the run of dots
    tells the model nothing but "keep looking further back". Dots also pad the front up to seq_len.
    Ids: letters 0..n_values-1, dot n_values, "?" n_values+1. `k` is an int or a (B,) tensor of distances
    in 1..seq_len - n_letters. Returns x (B, T) ids, y (B,) the letter k back, k (B,).
    Example (k=2, n_letters=2, seq_len=6): ". . c a . ?" -> a.
    """
    positive_int(batch_size=batch_size, seq_len=seq_len, n_letters=n_letters, n_values=n_values)
    k = torch.as_tensor(k).expand(batch_size) if torch.as_tensor(k).dim() == 0 else torch.as_tensor(k)
    if k.dtype.is_floating_point or k.dtype == torch.bool:
        raise ValueError(f"k must be an int or a (batch_size,) tensor of integer distances, got dtype {k.dtype}")
    if k.shape != (batch_size,) or k.min() < 1 or k.max() > seq_len - n_letters:
        raise ValueError(f"k must be an int or ({batch_size},) tensor of distances in 1..{seq_len - n_letters} "
                         f"(seq_len - n_letters), got shape {tuple(k.shape)}, range {k.min().item()}..{k.max().item()}")
    x = torch.full((batch_size, seq_len), n_values)
    x[:, -1] = n_values + 1
    letters = torch.randint(0, n_values, (batch_size, n_letters), generator=generator)
    first = seq_len - 1 - k - (n_letters - 1)  # position of the first letter; the last is k before the end
    cols = first[:, None] + torch.arange(n_letters)[None, :]  # (B, n_letters)
    x.scatter_(1, cols, letters)
    return x, letters[:, -1], k
