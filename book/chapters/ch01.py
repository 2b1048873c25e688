"""Chapter 1, the next token: the bigram model as a PyTorch module, the n-gram statistics behind the tables, the
longest seen context, and the chapter's exercise checkers.
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Sequence

import torch
import torch.nn as nn

from ..checks import positive_int, probability, tensor_dims, token_ids
from ..language import _
from ..ngram import _counted, _gram_keys, _id_list, ngram_counts, ngram_log_prob

__all__ = ["BigramLM", "ngram_stats", "check_ngram_log_prob", "longest_seen_context", "check_jelinek_mercer",
           "check_bits_per_char", "jelinek_mercer_prob", "glue_cosines", "draw_ngram_order"]


class BigramLM(nn.Module):
    """The neural bigram: one embedding row of V logits per current token. forward (B, T) -> (B, T, V).

    Trained with cross-entropy, its softmax rows approach the bigram count table's rows.
    """

    def __init__(self, vocab_size: int):
        super().__init__()
        positive_int(vocab_size=vocab_size)
        self.logits = nn.Embedding(vocab_size, vocab_size)
        nn.init.zeros_(self.logits.weight)   # start from the uniform distribution

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        token_ids(idx, self.logits.num_embeddings, "idx")
        return self.logits(idx)  # (B, T) -> (B, T, V)


def ngram_stats(train: Sequence, val: Sequence, n: int, counts: Optional[tuple] = None) -> Dict[str, float]:
    """How an order-n table copes: its size and how often validation meets an unseen context.

    Returns {"n", "contexts" (distinct (n-1)-grams seen in train), "table_entries" (distinct
    n-grams stored), "full_table" (V**(n-1) * V cells a dense table would need, V from train),
    "unseen_rate" (fraction of val positions whose (n-1)-token context never occurred in train)}.
    `counts`: ngram_counts(train, n), when already counted.
    """
    positive_int(n=n)
    train, val = _id_list(train, "train"), _id_list(val, "val")
    if not len(train):
        raise ValueError("train must hold at least one token: an empty training text has no n-grams to count")
    grams, contexts = _counted(train, n, counts)
    k = n - 1
    V = len(set(train))
    val_ctx = [tuple(val[i:i + k]) for i in range(len(val) - k)]
    unseen = sum(c not in contexts for c in val_ctx) / max(1, len(val_ctx))
    return {"n": n, "contexts": len(contexts), "table_entries": len(grams),
            "full_table": float(V) ** n, "unseen_rate": unseen}


def check_ngram_log_prob(fn) -> bool:
    """Self-check for the Chapter 1 exercise: fn(counts, context_counts, context, token, V, k) -> log P."""
    grams, contexts = ngram_counts("abracadabra", 3)
    cases = [(("a", "b"), "r", 0.1), (("b", "r"), "a", 1.0), (("z", "z"), "a", 0.5), (("a", "b"), "z", 0.1)]
    for context, token, k in cases:
        want = ngram_log_prob(grams, contexts, context, token, 5, k)
        got = fn(grams, contexts, context, token, 5, k)
        if not isinstance(got, (int, float)) or abs(got - want) > 1e-9:
            raise AssertionError(_("for context {context}, token {token!r}, k={k}: expected {want:.6f}, got {got!r}. "
                                   "Hint: (count + k) / (context count + k * V), then log.")
                                 .format(context=context, token=token, k=k, want=want, got=got))
    print("Correct: your add-k n-gram probability matches the reference on every case.")
    return True


def longest_seen_context(train_ids: torch.Tensor, val_ids: torch.Tensor, vocab_size: int, max_len: int) -> torch.Tensor:
    """How much of its context a table has seen: for each position t >= max_len of `val_ids`, the largest
    L <= max_len such that the L tokens before t occur in `train_ids` followed by some token (so a table has a row for
    them). (len(val_ids) - max_len,) ints in [0, max_len]. A seen context's suffixes are seen too, so L is the number of
    lengths 1..max_len whose context was seen."""
    tensor_dims(train_ids, 1, "train_ids")
    tensor_dims(val_ids, 1, "val_ids")
    positive_int(vocab_size=vocab_size, max_len=max_len)
    token_ids(train_ids, vocab_size, "train_ids")
    token_ids(val_ids, vocab_size, "val_ids")
    if len(val_ids) <= max_len or len(train_ids) <= max_len:
        raise ValueError(f"train_ids and val_ids must each hold more than max_len = {max_len} tokens, got "
                         f"{len(train_ids)} and {len(val_ids)}")
    if vocab_size ** max_len >= 2 ** 62:
        raise ValueError(f"vocab_size ** max_len must stay below 2**62, got {vocab_size}**{max_len}")
    train_ids, val_ids = train_ids.long(), val_ids.long()
    longest = torch.zeros(len(val_ids) - max_len, dtype=torch.long)
    for L in range(1, max_len + 1):
        seen = torch.unique(_gram_keys(train_ids[:-1], L, vocab_size))       # contexts followed by a token
        ctx = _gram_keys(val_ids[max_len - L:-1], L, vocab_size)            # the L tokens before each position
        i = torch.searchsorted(seen, ctx).clamp(max=len(seen) - 1)
        longest += seen[i] == ctx
    return longest


def check_jelinek_mercer(fn) -> bool:
    """Self-check for the Chapter 1 exercise: fn(tables, context, token, V, lam) -> P(token | context)."""
    tables = {k: ngram_counts("abracadabra", k) for k in (1, 2, 3)}
    cases = [(("a", "b"), "r", 0.5), (("c", "a"), "d", 0.8), (("z", "b"), "r", 0.5), (("z", "z"), "a", 0.3),
             (("a", "b"), "q", 0.9)]
    for context, token, lam in cases:
        want = jelinek_mercer_prob(tables, context, token, 6, lam)
        got = fn(tables, context, token, 6, lam)
        got = got.item() if isinstance(got, torch.Tensor) else got
        if not isinstance(got, (int, float)) or abs(got - want) > 1e-9:
            raise AssertionError(_("for context {context}, token {token!r}, lam={lam}: expected {want:.6f}, "
                                   "got {got!r}. Hint: start from 1/V, then for k = 1..n mix lam * c(h w)/c(h) with "
                                   "(1 - lam) times the order below, skipping an order whose context h was never "
                                   "seen.").format(context=context, token=token, lam=lam, want=want, got=got))
    print("Correct: your Jelinek-Mercer probability matches the reference on every case.")
    return True


def check_bits_per_char(fn) -> bool:
    """Self-check for the Chapter 1 exercise: fn(probs) -> mean -log2 p over the true next characters."""
    cases = [[0.5, 0.5], [1.0, 0.25, 0.125], [1 / 65] * 7, [0.9]]
    for probs in cases:
        want = sum(-math.log2(p) for p in probs) / len(probs)
        got = fn(torch.tensor(probs))
        got = got.item() if isinstance(got, torch.Tensor) else got
        if not isinstance(got, (int, float)) or abs(got - want) > 1e-5:
            raise AssertionError(_("for probabilities {probs}: expected {want:.4f} bits, got {got!r}. "
                                   "Hint: average -log2(p), not -ln(p), and not the sum.")
                                 .format(probs=probs, want=want, got=got))
    print("Correct: your bits-per-character matches the reference on every case.")
    return True


def jelinek_mercer_prob(tables: Dict[int, tuple], context: Sequence, token, vocab_size: int, lam: float) -> float:
    """P(token | context) interpolated over orders 1..n (Jelinek & Mercer 1980), one weight `lam` for every order.

    tables[k] = ngram_counts(train, k) for k = 1..n. With P_0 = 1/V and h the last k-1 tokens of the context:
        P_k(w | h) = lam * c(h w) / c(h) + (1 - lam) * P_{k-1}(w),   or P_{k-1}(w) when c(h) = 0 (h never seen).
    """
    positive_int(vocab_size=vocab_size)
    probability(closed=True, lam=lam)
    orders = sorted(tables)
    if orders != list(range(1, len(orders) + 1)):
        raise ValueError(f"tables must hold the orders 1..n (from ngram_counts), got orders {orders}")
    context, p = tuple(context), 1.0 / vocab_size
    for k in orders:
        grams, contexts = tables[k]
        h = context[len(context) - (k - 1):] if k > 1 else ()
        if contexts.get(h, 0) > 0:
            p = lam * grams.get(h + (token,), 0) / contexts[h] + (1 - lam) * p
    return p


def glue_cosines(mean_cos: dict, vowel_consonant: float) -> None:
    """Glue the embedding section's cosines: each group's mean within and to all other characters, and the vowels'
    mean to the lower-case consonants (tolerances from the recorded seed spread)."""
    from ..utils import claim, glue

    claim(vowel_consonant > mean_cos["vowels"][1],
          f"against the lower-case consonants alone the vowels sit closer ({vowel_consonant:.2f}) than against all "
          f"other characters ({mean_cos['vowels'][1]:.2f})")
    for name, (within, between) in mean_cos.items():
        glue(f"ch1_emb_{name.split()[0]}_within", f"{within:.2f}", tol=0.05, spread="glue_spread", margin=2)
        glue(f"ch1_emb_{name.split()[0]}_between", f"{between:.2f}", tol=0.05, spread="glue_spread", margin=2)
    glue("ch1_emb_vowel_consonant", f"{vowel_consonant:.2f}", tol=0.05, spread="glue_spread", margin=2)


def draw_ngram_order(n: int, tables: dict, kn_models: dict, tok, prompt: str, answer: str, seen: dict, stats: list,
                     top: int = 7):
    """One frame of the n-gram slider: add-0.1 and Kneser-Ney's next-character probabilities after the prompt's last
    n - 1 characters (the true next character in red, always shown), and where order n sits on the curve of unseen
    validation contexts."""
    from .. import ngram, plots

    V = tok.vocab_size
    grams, contexts = tables[n]
    ctx = tok.encode(prompt[len(prompt) - (n - 1):]) if n > 1 else []
    add_k = torch.tensor([ngram.ngram_log_prob(grams, contexts, tuple(ctx), j, V, 0.1) for j in range(V)]).exp()
    kn_row = kn_models[n].log_probs(torch.tensor(ctx, dtype=torch.long).view(1, n - 1))[0].exp()
    true = tok.stoi[answer]
    idx = [i for i in kn_row.topk(top).indices.tolist() if i != true][:top - 1] + [true]
    idx.sort(key=lambda i: -kn_row[i].item())
    fig, (ax1, ax2) = plots.new_figure(figsize=(8, 3.0), ncols=2)
    x = torch.arange(len(idx), dtype=torch.float)
    ax1.bar(x - 0.2, add_k[idx], width=0.4, color="tab:blue", label="add-0.1")
    ax1.bar(x + 0.2, kn_row[idx], width=0.4, color="tab:orange", label="Kneser-Ney")
    ax1.set_xticks(x.tolist(), plots.token_labels([tok.itos[i] for i in idx]))
    for label, i in zip(ax1.get_xticklabels(), idx):
        label.set_color("tab:red" if i == true else "black")
    shown = plots.token_labels([prompt[len(prompt) - (n - 1):]])[0]
    ax1.set(ylim=(0, 1), ylabel="probability", xlabel=f"red: the true next character '{answer}'",
            title=f"{n}-gram after '{shown}': context seen {seen[n]:,}x" if n > 1 else "1-gram: no context")
    ax1.legend(fontsize=7, loc="upper right")
    orders = list(range(1, len(stats) + 1))
    ax2.plot(orders, [s["unseen_rate"] for s in stats], "o-", color="tab:gray")
    ax2.plot([n], [stats[n - 1]["unseen_rate"]], "o", color="tab:red", markersize=9)
    ax2.set(title="unseen validation contexts", xlabel="order n", ylabel="fraction")
    return fig
