"""Count-based language models: the bigram table, n-gram counts and Kneser-Ney. Chapter 1 (its bigram module: ch01).

Shape legend: B batch, T time, V vocab.
"""
from __future__ import annotations

import math
import operator
from collections import Counter
from typing import Dict, Optional, Sequence

import torch

from .checks import (allocating, check_shape, non_negative_int, positive_int, positive_number, probability, tensor_dims,
                     token_ids)

__all__ = ["bigram_counts", "bigram_log_probs", "nll_bits", "sample_bigram",
           "ngram_counts", "ngram_log_prob", "ngram_bits", "KneserNey", "kneser_ney",
           "kneser_ney_bits", "strongest_count_model"]


def _transitions(ids, vocab_size: int) -> None:
    """ids: a 1-D tensor of at least two ids (one transition), each in [0, vocab_size): a negative id would
    silently index a table from the end."""
    tensor_dims(ids, 1, "ids")
    if len(ids) < 2:
        raise ValueError(f"ids should be a 1-D tensor with at least 2 tokens (one transition), got {tuple(ids.shape)}")
    token_ids(ids, vocab_size, "ids")


def bigram_counts(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """(V, V) table: counts[a, b] = how often token b follows token a in `ids` (1-D)."""
    _transitions(ids, positive_int(vocab_size=vocab_size))
    flat = ids[:-1] * vocab_size + ids[1:]
    with allocating("a (V, V) table of counts", vocab_size=vocab_size):
        return torch.bincount(flat, minlength=vocab_size * vocab_size).view(vocab_size, vocab_size)


def bigram_log_probs(counts: torch.Tensor, smoothing: float = 1.0) -> torch.Tensor:
    """Row-normalised log-probabilities log P(next | current) with add-`smoothing` counts, (V, V)."""
    positive_number(smoothing=smoothing, allow_zero=True)
    tensor_dims(counts, 2, "counts")
    if counts.numel() and bool((counts < 0).any()):
        raise ValueError("counts must be >= 0 (how often each token follows another), got a negative entry")
    if smoothing == 0 and counts.numel() and bool((counts.sum(dim=1) == 0).any()):
        rows = (counts.sum(dim=1) == 0).nonzero().flatten().tolist()
        raise ValueError(f"with smoothing=0, every row of counts needs a count: the tokens {rows[:10]} are never "
                         "followed by anything, so P(next | them) is 0/0; use smoothing > 0")
    p = counts.double() + smoothing
    return (p / p.sum(dim=1, keepdim=True)).log().float()


def sample_bigram(log_probs: torch.Tensor, start: int, n: int,
                  generator: Optional[torch.Generator] = None) -> list:
    """Draw `n` (at most 10**6: one draw at a time) tokens after `start` from a (V, V) table of log-probabilities."""
    non_negative_int(n=n)
    if n > 10**6:
        raise ValueError(f"n={n:,} is more than sample_bigram draws in one call (at most 1,000,000, one token at a "
                         f"time, already seconds): ask for fewer")
    tensor_dims(log_probs, 2, "log_probs")
    V = log_probs.shape[0]
    if log_probs.shape[1] != V:
        raise ValueError(f"log_probs should be a square (V, V) table, got shape {tuple(log_probs.shape)}")
    try:
        start = operator.index(start)  # an int or an integer tensor element; never a float
    except TypeError:
        raise TypeError(f"start must be an integer token id, got {start!r}") from None
    if not 0 <= start < V:  # a negative id would silently index from the end
        raise ValueError(f"start must be a token id in [0, {V}), got {start}")
    out, cur = [], start
    probs = log_probs.exp()
    if n and not bool(torch.isfinite(probs).all() and (probs.sum(dim=1) > 0).all()):
        raise ValueError("log_probs must be finite log-probabilities with some mass in every row (NaN, +inf, or a "
                         "row of -inf found): normalise the table first, e.g. bigram_log_probs(counts, smoothing)")
    for _ in range(n):
        cur = int(torch.multinomial(probs[cur], 1, generator=generator))
        out.append(cur)
    return out


def nll_bits(log_probs: torch.Tensor, ids: torch.Tensor) -> float:
    """Mean negative log-likelihood of a 1-D token tensor under a bigram table, in bits per token."""
    if log_probs.dim() != 2 or log_probs.shape[0] != log_probs.shape[1]:
        raise ValueError(f"log_probs should be a (V, V) table, got shape {tuple(log_probs.shape)}")
    _transitions(ids, log_probs.shape[0])
    if log_probs.numel() and bool(log_probs.max() > 1e-4):
        top = log_probs.max().item()
        raise ValueError(f"log_probs must be log-probabilities (<= 0), got a largest entry {top:.3g}: "
                         "probabilities instead of their logs? Pass probs.log()")
    lp = log_probs[ids[:-1], ids[1:]]
    return float(-lp.mean() / math.log(2))


def ngram_log_prob(counts: Counter, context_counts: Counter, context: tuple, token, vocab_size: int,
                   k: float = 0.1) -> float:
    """log P(token | context) with add-k smoothing: (c(context, token) + k) / (c(context) + k V)."""
    positive_number(k=k)   # > 0, so that unseen n-grams keep some probability
    positive_int(vocab_size=vocab_size)
    num = counts.get(tuple(context) + (token,), 0) + k
    den = context_counts.get(tuple(context), 0) + k * vocab_size
    return math.log(num / den)


def _id_list(ids, name: str):
    """A token sequence for the counting functions: a 1-D tensor becomes a list of ints (tuples of 0-d tensors
    hash by identity, so no n-gram of a tensor would ever match another); lists, tuples and strings stay as given."""
    if isinstance(ids, torch.Tensor):
        tensor_dims(ids, 1, name)
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise TypeError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
        return ids.tolist()
    if not (hasattr(ids, "__len__") and hasattr(ids, "__getitem__")) or isinstance(ids, (dict, bytes)):
        raise TypeError(f"{name} must be a sequence of token ids (a list, tuple, str or 1-D tensor), "
                        f"got {type(ids).__name__}")
    return ids


def _counted(train: Sequence, n: int, counts: Optional[tuple]):
    """ngram_counts(train, n), or `counts` if the caller counted them already (checked to be of order n)."""
    if counts is None:
        return ngram_counts(train, n)
    grams = counts[0]
    if len(counts) != 2 or (grams and len(next(iter(grams))) != n):
        raise ValueError(f"counts must be ngram_counts(train, {n}): (n-gram Counter, context Counter) of order {n}")
    return counts


def ngram_counts(ids: Sequence, n: int):
    """(Counter of n-grams, Counter of their (n-1)-token contexts) over a token sequence."""
    positive_int(n=n)
    ids = _id_list(ids, "ids")
    grams = Counter(tuple(ids[i:i + n]) for i in range(len(ids) - n + 1))
    contexts = Counter()
    for g, c in grams.items():
        contexts[g[:-1]] += c
    return grams, contexts


def ngram_bits(train: Sequence, val: Sequence, n: int, vocab_size: int, k: float = 0.1,
               counts: Optional[tuple] = None) -> float:
    """Validation cross-entropy (bits per token) of an add-k smoothed order-n model.
    `counts`: ngram_counts(train, n), when already counted."""
    positive_int(n=n, vocab_size=vocab_size)
    train, val = _id_list(train, "train"), _id_list(val, "val")
    if len(set(val)) > vocab_size:
        raise ValueError(f"vocab_size must count every symbol: val alone holds {len(set(val))} distinct tokens, "
                         f"got vocab_size={vocab_size}")
    if len(val) < n:
        raise ValueError(f"val must hold at least n = {n} tokens to score one {n}-gram, got {len(val)}")
    grams, contexts = _counted(train, n, counts)
    total = 0.0
    for i in range(n - 1, len(val)):
        total -= ngram_log_prob(grams, contexts, tuple(val[i - n + 1:i]), val[i], vocab_size, k)
    return total / (len(val) - n + 1) / math.log(2)


def _gram_keys(ids: torch.Tensor, k: int, V: int) -> torch.Tensor:
    """Base-V integers of every k-gram in a 1-D tensor (or of each row's last k tokens in a 2-D one)."""
    if ids.dim() == 2:
        ids = ids[:, ids.shape[1] - k:]
        return (ids * V ** torch.arange(k - 1, -1, -1)).sum(1)
    return sum(ids[j:len(ids) - k + 1 + j] * V ** (k - 1 - j) for j in range(k))


class KneserNey:
    """An interpolated Kneser-Ney model of order n over token ids (Chen & Goodman 1998, with one discount D).

    For each order k = n, n-1, ..., 1 and context h of k-1 tokens (h' is h without its first token):
        P_k(w | h) = max(c_k(h w) - D, 0) / c_k(h) + D * N_k(h) / c_k(h) * P_{k-1}(w | h'),   P_0(w) = 1 / V,
    where c_n counts n-grams, c_k for k < n counts a k-gram's distinct left neighbours (its continuation count:
    in how many contexts it appears, not how often), c_k(h) = sum over w of c_k(h w), and N_k(h) = number of w with
    c_k(h w) > 0. A context with c_k(h) = 0 (never seen) hands all its mass to the order below. (Left neighbours
    are counted within the corpus: a k-gram seen only at its very start has none.)
    Every k-gram is one integer, its tokens in base V, so the tables are sorted tensors and a lookup is a
    binary search. log_prob(context (B, n-1), next (B,)) -> (B,) natural logs; log_probs(context) -> (B, V).
    """

    def __init__(self, ids: torch.Tensor, vocab_size: int, n: int, discount: float = 0.75):
        positive_int(vocab_size=vocab_size, n=n)
        positive_number(discount=discount)
        probability(discount=discount)   # 0 < D < 1
        tensor_dims(ids, 1, "ids")
        token_ids(ids, vocab_size, "ids")
        if len(ids) < n:
            raise ValueError(f"ids must hold at least n = {n} tokens to count one {n}-gram, got {len(ids)}")
        if vocab_size ** n >= 2 ** 62:
            raise ValueError(f"vocab_size ** n must stay below 2**62 (one int64 per n-gram), got {vocab_size}**{n}")
        self.V, self.n, self.D = vocab_size, n, float(discount)
        ids = ids.long()
        self.tables = []                                             # per order k = 1..n: (grams, counts, ctx tables)
        grams, counts = torch.unique(_gram_keys(ids, n, vocab_size), return_counts=True)   # order n: how often
        for k in range(n, 0, -1):
            # the k-grams' (k-1)-token contexts: sorted already, because the k-grams are
            ctx, inverse = torch.unique_consecutive(grams // vocab_size, return_inverse=True)
            total = torch.zeros(len(ctx), dtype=torch.long).index_add_(0, inverse, counts)
            types = torch.bincount(inverse, minlength=len(ctx))
            self.tables.insert(0, (grams, counts, ctx, total, types))
            # order k-1: after how many distinct tokens each (k-1)-gram appears (one per distinct k-gram ending in it)
            grams, counts = torch.unique(grams % vocab_size ** (k - 1), return_counts=True)

    @staticmethod
    def _lookup(keys: torch.Tensor, table: torch.Tensor, *values: torch.Tensor) -> list:
        """For each of `values`: values[i] where table[i] == key, else 0, as float64 (table sorted)."""
        i = torch.searchsorted(table, keys).clamp(max=len(table) - 1)
        hit = table[i] == keys
        return [torch.where(hit, v[i], 0).double() for v in values]

    def log_prob(self, context: torch.Tensor, nxt: torch.Tensor) -> torch.Tensor:
        """log P(nxt | context): context (B, n-1) ids, nxt (B,) ids -> (B,) natural logs (float64)."""
        tensor_dims(nxt, 1, "nxt")
        check_shape(context, (len(nxt), self.n - 1), "context")   # (B, n-1)
        token_ids(context, self.V, "context")
        token_ids(nxt, self.V, "nxt")
        seq = torch.cat([context.long(), nxt.long()[:, None]], dim=1)
        p = torch.full((len(nxt),), 1.0 / self.V, dtype=torch.float64)
        for k, (grams, counts, ctx, total, types) in enumerate(self.tables, start=1):
            key = _gram_keys(seq, k, self.V)
            c, = self._lookup(key, grams, counts)
            tot, typ = self._lookup(key // self.V, ctx, total, types)
            seen = (c - self.D).clamp(min=0) + self.D * typ * p
            p = torch.where(tot > 0, seen / tot.clamp(min=1), p)
        return p.log()

    __call__ = log_prob

    def log_probs(self, context: torch.Tensor) -> torch.Tensor:
        """log P(w | context) for every w in the vocabulary: context (B, n-1) -> (B, V)."""
        check_shape(context, (None, self.n - 1), "context")
        B = context.shape[0]
        nxt = torch.arange(self.V).repeat(B)
        return self.log_prob(context.repeat_interleave(self.V, dim=0), nxt).view(B, self.V)


def kneser_ney(ids: torch.Tensor, vocab_size: int, n: int, discount: float = 0.75) -> KneserNey:
    """An interpolated Kneser-Ney model of order `n` counted on a 1-D tensor of token ids (see KneserNey)."""
    return KneserNey(ids, vocab_size, n, discount)


def kneser_ney_bits(model: KneserNey, val_ids: torch.Tensor, batch: int = 65536) -> float:
    """Validation cross-entropy in bits per token: every position from n-1 on (as ngram_bits scores them)."""
    if not isinstance(model, KneserNey):
        raise TypeError(f"model must be a KneserNey (from kneser_ney(...)), got {type(model).__name__}")
    tensor_dims(val_ids, 1, "val_ids")
    positive_int(batch=batch)
    n = model.n
    if len(val_ids) < n:
        raise ValueError(f"val_ids must hold at least n = {n} tokens to score one {n}-gram, got {len(val_ids)}")
    windows = val_ids.long().unfold(0, n, 1)                       # (positions, n): context then next
    total = sum(float(model.log_prob(w[:, :-1], w[:, -1]).sum()) for w in windows.split(batch))
    return -total / len(windows) / math.log(2)


def strongest_count_model(train_ids: torch.Tensor, val_ids: torch.Tensor, vocab_size: int,
                          orders: Sequence[int] = tuple(range(2, 9)),
                          discounts: Sequence[float] = (0.75, 0.9)) -> Dict[str, object]:
    """The book's count baseline: interpolated Kneser-Ney with its order n and discount D tuned fairly.

    (n, D) is chosen on the last tenth of `train_ids` (a dev split, counted from the first nine tenths), never on
    `val_ids`; the chosen setting is then recounted on all of `train_ids` and scored on `val_ids`.
    Returns {"name", "n", "discount", "dev_bits", "bits" (validation bits/token), "model", "params" (stored counts)}.
    """
    tensor_dims(train_ids, 1, "train_ids")
    tensor_dims(val_ids, 1, "val_ids")
    positive_int(vocab_size=vocab_size)
    orders, discounts = list(orders), list(discounts)
    if not orders or not discounts:
        raise ValueError(f"orders and discounts must each hold at least one value, got {orders} and {discounts}")
    for n in orders:
        positive_int(n=n)
    for d in discounts:
        positive_number(discount=d)
        probability(discount=d)   # 0 < D < 1
    cut = len(train_ids) * 9 // 10
    fit_ids, dev_ids = train_ids[:cut], train_ids[cut:]
    dev = {}
    for n in orders:
        counted = kneser_ney(fit_ids, vocab_size, n, discounts[0])       # the counts do not depend on D
        for d in discounts:
            counted.D = float(d)
            dev[(n, d)] = kneser_ney_bits(counted, dev_ids)
    n, d = min(dev, key=dev.get)
    model = kneser_ney(train_ids, vocab_size, n, d)
    params = sum(int(counts.numel()) + int(total.numel()) for _, counts, _, total, _ in model.tables)
    return {"name": f"Kneser-Ney {n}-gram (counts, D={d:g})", "n": n, "discount": d, "dev_bits": dev[(n, d)],
            "bits": kneser_ney_bits(model, val_ids), "model": model, "params": params}
