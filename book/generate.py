"""Generating text: sampling filters and the generate loop (Chapter 7); greedy translation (Chapter 8).

Shape legend (batch first): B batch, T time, V vocab.

`generate` works on any language model with this interface (book.gpt.GPT and book.rnn.CharRNN have it):
  model(idx (B, T)) -> logits (B, T, V), and its context length, the longest input it takes: model.context_len
  (None: any length, as a recurrent model) or else model.config.context_len (see context_len_of);
  for use_cache=True also model.new_cache(batch_size, context_len) -> a cache (book.kv_cache.KVCache), and
  model(idx_new, cache=cache), which reads only the tokens after the cached ones and advances the cache.
`greedy_translate` does the same for an encoder-decoder (book.transformer.Transformer): encode once, then decode.
The model never needs this module: generation sits on top of the models, as training does. Both loops are
book.decoding.decode_loop, the one decoding loop of the package, which every other decoder uses too.

Sampling works on logits (..., V): temperature divides them, top-k and top-p set the logits of
dropped tokens to -inf, so a softmax afterwards gives them probability exactly 0.
"""
from __future__ import annotations

import contextlib
from numbers import Integral, Real
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import inputs_checked, optional_positive_int, positive_int, positive_number, token_ids
from .decoding import decode_loop
from .utils import step_budget

__all__ = ["greedy", "apply_temperature", "top_k_filter", "top_p_filter", "next_token_probs",
           "sample_next", "context_len_of", "generate", "greedy_translate"]


# Below this temperature, logits / temperature overflows to inf for ordinary logits (|logit| ~ 1e8 at 1e-30 reaches
# float32's 3.4e38): the distribution is the argmax's, so it is taken as greedy, as temperature 0 is.
TINY_TEMPERATURE = 1e-30


def _sample(probs: torch.Tensor, generator) -> torch.Tensor:
    """torch.multinomial(probs, 1), with torch's error on NaN, inf or all-zero rows said in the book's words."""
    try:
        return torch.multinomial(probs, 1, generator=generator)
    except RuntimeError as e:
        if "probability" not in str(e) and "multinomial" not in str(e):
            raise
        raise ValueError("cannot sample: the logits give no probability distribution (NaN or inf logits, e.g. "
                         "from a diverged model, or every token filtered out); "
                         f"torch said: {str(e).splitlines()[0]}") from None


def _generator(generator) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator (e.g. torch.Generator().manual_seed(0)) or None, "
                        f"got {type(generator).__name__}")


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """The most likely token: logits (..., V) -> ids (...). Chapter 7."""
    return logits.argmax(dim=-1)


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """logits / temperature (> 0): below 1 sharpens the distribution, above 1 flattens it. Chapter 7."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 here (use greedy for temperature 0), got {temperature}")
    return logits / temperature


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits (..., V), set the rest to -inf (ties with the k-th are kept). Chapter 7."""
    if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:     # numpy ints pass
        raise ValueError(f"k must be a positive int, got {k!r}")
    if not isinstance(logits, torch.Tensor) or logits.dim() < 1:
        raise ValueError(f"logits must be a tensor (..., V) with at least one dimension, got "
                         f"{tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__}")
    k = min(int(k), logits.shape[-1])
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest logit
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens whose mass reaches p. Chapter 7.

    logits (..., V) -> (..., V) with dropped tokens at -inf (Holtzman et al. 2019). A token is kept
    when the mass of the tokens ranked above it is still below p, so the top token always stays.
    Example: probs [0.5, 0.3, 0.2], p=0.7 -> keeps the first two (0.5 < 0.7, then 0.8 >= 0.7).
    """
    if isinstance(p, bool) or not isinstance(p, Real) or not 0.0 < p <= 1.0:
        raise ValueError(f"p must lie in (0, 1], got {p!r}")
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # (..., V): mass of the tokens ranked above each one
    drop_sorted = mass_before >= p
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def next_token_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
                     top_p: Optional[float] = None) -> torch.Tensor:
    """The distribution a sampler draws from: logits (..., V) -> probs (..., V). Chapter 7.

    Order: temperature, then top-k, then top-p (as in Hugging Face). temperature=0 means greedy:
    all mass on the argmax (as any temperature below TINY_TEMPERATURE, where logits / temperature would overflow).
    """
    if isinstance(temperature, bool) or not isinstance(temperature, Real):
        raise TypeError(f"temperature must be a number >= 0, got {temperature!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature < TINY_TEMPERATURE:
        return F.one_hot(greedy(logits), logits.shape[-1]).to(logits.dtype)
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return logits.softmax(dim=-1)


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
                top_p: Optional[float] = None, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Draw one token per row: logits (B, V) -> ids (B,). temperature=0 is greedy. Chapter 7."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2:
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"logits should be a tensor of shape (B, V), got {got}")
    _generator(generator)
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and temperature < TINY_TEMPERATURE \
            and temperature >= 0:
        return greedy(logits)
    probs = next_token_probs(logits, temperature, top_k, top_p)
    return _sample(probs, generator).squeeze(-1)


def context_len_of(model: nn.Module) -> Optional[int]:
    """The longest input a language model takes: model.context_len if it has one (None: any length, e.g. a
    recurrent model), else model.config.context_len. The one way the book asks an LM for its context length."""
    if hasattr(model, "context_len"):
        return model.context_len
    ctx = getattr(getattr(model, "config", None), "context_len", None)
    if ctx is None:
        raise TypeError(f"{type(model).__name__} tells no context length: give it a context_len attribute "
                        "(None if it reads any length) or a config with context_len")
    return ctx


@torch.no_grad()
def generate(model: nn.Module, idx: torch.Tensor, max_new_tokens: int, *, temperature: float = 1.0,
             top_k: Optional[int] = None, top_p: Optional[float] = None,
             generator: Optional[torch.Generator] = None, use_cache: bool = False) -> torch.Tensor:
    """Extend prompts idx (B, T) by max_new_tokens sampled tokens -> (B, T + max_new_tokens). Chapter 7.

    Without a cache every step reruns the model on the whole sequence, cropped to its context length
    (context_len_of; a model with None reads it all); with use_cache=True the model (a book.gpt.GPT)
    sees the prompt once, then one new token per step. The model is left in the mode it came in.
    """
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if vocab is None and isinstance(getattr(model, "embed", None), nn.Embedding):   # e.g. a CharRNN
        vocab = model.embed.num_embeddings
    token_ids(idx, vocab, name="idx")
    if idx.dim() != 2 or idx.shape[1] < 1 or idx.shape[0] < 1:
        raise ValueError(f"idx should have shape (B, T) with B >= 1 and T >= 1, got {tuple(idx.shape)}")
    _generator(generator)
    max_new_tokens = step_budget(positive_int(max_new_tokens=max_new_tokens))   # BOOK_MAX_STEPS: a smoke run
    positive_number(temperature=temperature, allow_zero=True)
    optional_positive_int(top_k=top_k)
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float))
                              or not 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must lie in (0, 1] or be None, got {top_p!r}")
    ctx = context_len_of(model)
    cache = None
    if use_cache:
        if not hasattr(model, "new_cache"):
            raise ValueError(f"use_cache=True needs a model with new_cache (a book.gpt.GPT); "
                             f"{type(model).__name__} has none")
        if ctx is not None and idx.shape[1] + max_new_tokens > ctx:
            raise ValueError(f"with a KV cache, prompt + new tokens must fit context_len={ctx} "
                             f"(absolute positions cannot slide), got {idx.shape[1]} + {max_new_tokens}")
        cache = model.new_cache(idx.shape[0], idx.shape[1] + max_new_tokens)
    step = (lambda x: model(x, cache=cache)[:, -1, :]) if use_cache else (lambda x: model(x)[:, -1, :])
    # the prompt was checked above against the vocabulary and sampled ids lie in it: no check (host sync) per token
    with inputs_checked() if vocab is not None else contextlib.nullcontext():
        return decode_loop(step, idx, max_new_tokens,
                           lambda logits: sample_next(logits, temperature, top_k, top_p, generator),
                           context_len=ctx, incremental=use_cache, model=model, name="max_new_tokens")


@torch.no_grad()
def greedy_translate(model: nn.Module, src: torch.Tensor, max_len: int, *, bos: int = 1, eos: int = 2,
                     pad: int = 0, use_cache: bool = True, reencode: bool = False, need_weights: bool = False):
    """Greedy decoding for an encoder-decoder: from BOS, append the argmax until EOS or max_len. Chapter 8.

    src (B, S) -> ids (B, T') without BOS; after a row's EOS it holds pad. With need_weights=True also the
    cross-attention of each generated token, (L, B, H, T', S). The model (a book.transformer.Transformer)
    needs encode(src, src_keep) -> memory, decode(tgt, memory, memory_keep, cache=, need_weights=) -> logits,
    src_keep_mask(src) and new_cache(B, context_len). The encoder runs once and its memory is reused by every
    step (reencode=True runs it again each step, to measure what reuse saves); use_cache=True feeds the decoder
    only the newest token and keeps the keys and values of its self-attention in a KV cache.
    """
    token_ids(src, name="src")
    positive_int(max_len=max_len)
    missing = [m for m in ("src_keep_mask", "encode") if not hasattr(model, m)]
    if missing:
        raise TypeError(f"greedy_translate needs an encoder-decoder (a book.transformer.Transformer); "
                        f"{type(model).__name__} has no {', '.join(missing)}")
    cfg = getattr(model, "config", None)
    V, ctx = getattr(cfg, "tgt_vocab_size", None), getattr(cfg, "context_len", None)
    for name, v in (("bos", bos), ("eos", eos), ("pad", pad)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0 or (V is not None and v >= V):
            raise ValueError(f"{name} must be a token id in [0, {V if V is not None else 'vocab_size'}), got {v!r}")
    was_training = model.training
    model.eval()
    try:
        B = src.shape[0]
        keep = model.src_keep_mask(src)
        memory = model.encode(src, keep)
        cache = model.new_cache(B, max_len) if use_cache else None
        weights = []

        def step(tgt):          # tgt: the newest token with a cache, else all of them; -> (B, V)
            nonlocal memory
            if reencode:
                memory = model.encode(src, keep)
            out = model.decode(tgt, memory, keep, cache=cache, need_weights=need_weights)
            logits, w = out if need_weights else (out, None)
            if need_weights:
                weights.append(torch.stack([lw[:, :, -1] for lw in w]))   # (L, B, H, S) for the newest token
            return logits[:, -1]

        bos_column = torch.full((B, 1), bos, dtype=torch.long, device=src.device)
        ctx = getattr(getattr(model, "config", None), "context_len", None)     # the decoder's positions
        with inputs_checked():     # src checked by encode, bos above; generated ids are in range: no check per step
            tgt = decode_loop(step, bos_column, max_len, greedy, context_len=ctx, slide=False,
                              incremental=use_cache, eos=eos, pad=pad, name="max_len")
    finally:
        model.train(was_training)
    ids = tgt[:, 1:]
    return (ids, torch.stack(weights, dim=3)) if need_weights else ids
