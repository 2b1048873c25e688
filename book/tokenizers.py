"""Text to integers: a character tokenizer and a small byte-pair-encoding (BPE) tokenizer. Chapter 1.

The BPE trainer is written for teaching (after Sennrich et al. 2016 and minbpe): it works on
UTF-8 bytes, repeatedly merges the most frequent adjacent pair, and encodes by applying the
learned merges in the order they were learned.
"""
from __future__ import annotations

import operator
from collections import Counter
from typing import Dict, Iterable, List, Sequence, Tuple

from .checks import positive_int

__all__ = ["CharTokenizer", "BPETokenizer", "merge_pair", "pair_counts"]


def _as_id(i) -> int:
    """A token id as an int: ints, numpy ints and integer tensor elements pass; a float is a TypeError."""
    if isinstance(i, bool):
        raise TypeError(f"token ids must be integers, got the bool {i!r}")
    try:
        return operator.index(i)
    except TypeError:
        raise TypeError(f"token ids must be integers, got {i!r} ({type(i).__name__})") from None


def _chars(text, name: str):
    """Text for a tokenizer: a str (or, for CharTokenizer, any iterable of characters); never None or bytes."""
    if text is None or isinstance(text, (bytes, bytearray)) or not hasattr(text, "__iter__"):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}"
                        + (": decode bytes first, e.g. data.decode('utf-8')" if isinstance(text, (bytes, bytearray))
                           else ""))
    return text


def _str(text):
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return text


def _ids(ids):
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise TypeError(f"ids must be a sequence of token ids (a list of ints), got {type(ids).__name__}")
    return ids


class CharTokenizer:
    """One id per distinct character, in sorted order.

    Example: CharTokenizer.from_text("hello").encode("hell") -> [1, 0, 2, 2]
    """

    def __init__(self, chars: Iterable[str]):
        self.itos: List[str] = sorted(set(_chars(chars, "chars")))
        if not self.itos:
            raise ValueError("a CharTokenizer needs at least one character")
        if any(len(c) != 1 for c in self.itos):
            raise ValueError("every vocabulary entry must be a single character")
        self.stoi: Dict[str, int] = {c: i for i, c in enumerate(self.itos)}

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        return cls(text)

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> List[int]:
        unknown = sorted(set(_chars(text, "text")) - self.stoi.keys())
        if unknown:
            raise ValueError(f"characters not in the vocabulary: {unknown!r} "
                             f"(the tokenizer knows {self.vocab_size} characters)")
        return [self.stoi[c] for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        out = []
        for i in _ids(ids):
            j = _as_id(i)
            if not 0 <= j < self.vocab_size:  # a negative id would silently index from the end
                raise ValueError(f"ids must be in [0, {self.vocab_size}), got {j}")
            out.append(self.itos[j])
        return "".join(out)


def pair_counts(ids: Sequence[int]) -> Counter:
    """Counts of adjacent pairs. Example: [1, 2, 1, 2] -> {(1, 2): 2, (2, 1): 1}."""
    return Counter(zip(ids, ids[1:]))


def merge_pair(ids: Sequence[int], pair: Tuple[int, int], new_id: int) -> List[int]:
    """Replace every non-overlapping occurrence of `pair`, left to right, by `new_id`.

    Example: merge_pair([1, 2, 1, 2, 3], (1, 2), 9) -> [9, 9, 3]
    """
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class BPETokenizer:
    """Byte-level BPE: 256 byte tokens plus `len(merges)` learned ones."""

    def __init__(self, merges: Sequence[Tuple[int, int]] = ()):
        self.merges: List[Tuple[int, int]] = [tuple(m) for m in merges]
        self.vocab: Dict[int, bytes] = {i: bytes([i]) for i in range(256)}
        for new_id, m in enumerate(self.merges, start=256):
            if len(m) != 2 or not all(isinstance(i, int) and not isinstance(i, bool) for i in m):
                raise ValueError(f"merges must be pairs of token ids (a, b); merge {new_id - 256} is {m!r}")
            a, b = m
            if min(a, b) < 0 or a >= new_id or b >= new_id:
                raise ValueError(f"merge {new_id - 256} uses an id that does not exist yet: {(a, b)}")
            self.vocab[new_id] = self.vocab[a] + self.vocab[b]

    @classmethod
    def train(cls, text: str, vocab_size: int) -> "BPETokenizer":
        """Learn `vocab_size - 256` merges from `text`, most frequent pair first."""
        if positive_int(vocab_size=vocab_size) < 256:
            raise ValueError(f"vocab_size must be >= 256 (the byte tokens), got {vocab_size}")
        ids = list(_str(text).encode("utf-8"))
        merges = []
        for new_id in range(256, vocab_size):
            counts = pair_counts(ids)
            if not counts:
                break
            pair = max(counts, key=counts.get)   # ties: first seen, as Counter keeps insertion order
            ids = merge_pair(ids, pair, new_id)
            merges.append(pair)
        return cls(merges)

    @property
    def vocab_size(self) -> int:
        return 256 + len(self.merges)

    def encode(self, text: str) -> List[int]:
        """Bytes, then the learned merges applied in the order they were learned."""
        ids = list(_str(text).encode("utf-8"))
        for new_id, pair in enumerate(self.merges, start=256):
            if len(ids) < 2:
                break
            ids = merge_pair(ids, pair, new_id)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        try:
            data = b"".join(self.vocab[_as_id(i)] for i in _ids(ids))
        except KeyError as e:
            raise ValueError(f"unknown token id {e.args[0]} (vocab_size is {self.vocab_size})") from None
        return data.decode("utf-8", errors="replace")

    def pieces(self, text: str) -> List[str]:
        """The text as the pieces its tokens stand for, e.g. ['the', ' king', 'dom']."""
        return [self.vocab[i].decode("utf-8", errors="replace") for i in self.encode(text)]
