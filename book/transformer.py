"""The original Transformer (Vaswani et al. 2017): an encoder, a decoder and cross-attention between them. Chapter 8.

Read it top to bottom: TransformerConfig (the sizes), then Transformer (encode, decode, forward).
Shape legend (batch first): B batch, S source length, T target length, C = d_model, H = n_heads, V vocab.

src ids (B, S) -> embeddings * sqrt(C) + sinusoidal positions -> n_layers encoder layers (self-attention
that sees the whole source, FFN) -> memory (B, S, C).
tgt ids (B, T) -> embeddings * sqrt(C) + positions -> n_layers decoder layers (causal self-attention,
cross-attention into memory, FFN) -> lm_head -> logits (B, T, V).
Each sub-layer has a residual and a LayerNorm, after the sum by default ("post", as in the paper and
nn.Transformer). The final LayerNorms of encoder and decoder are nn.Transformer's: redundant after a
post-norm layer, needed with norm="pre". Mask convention: True = may attend: src_keep and memory_keep are
(B, S) keep masks, True at real source tokens (src_keep_mask(src) = src != pad), unlike nn.Transformer's
src_mask/memory_mask (attention masks with True = blocked). The layers are book.blocks' (encoder:
TransformerBlock(causal=False), decoder: DecoderBlock), all on book.attention.Attention; greedy decoding sits
on top, in book.generate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn

from .blocks import DecoderBlock, TransformerBlock
from .checks import divides, inputs_checked, one_of, positive_int, probability, token_ids, values_checked
from .kv_cache import KVCache
from .layers import LayerNorm
from .positional import SinusoidalPositionalEncoding

__all__ = ["TransformerConfig", "Transformer"]


@dataclass
class TransformerConfig:
    """Sizes of an encoder-decoder. n_layers each in encoder and decoder; d_ff=None means 4 * d_model.

    share_embeddings: one table for source and target tokens (needs one shared vocabulary, as the paper's
    37,000 BPE tokens); tie_output: the output layer reuses the target embedding (Press & Wolf 2017).
    pad_id: the padding token of the source (no key may be padding); None if sources are never padded.
    """
    src_vocab_size: int
    tgt_vocab_size: int
    context_len: int = 64
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: Optional[int] = None
    dropout: float = 0.0
    norm: str = "post"
    share_embeddings: bool = False
    tie_output: bool = False
    pad_id: Optional[int] = 0
    positions: str = "sinusoidal"   # as the paper; or "rope": the self-attentions rotate q and k (Chapter 5)

    def __post_init__(self):
        positive_int(src_vocab_size=self.src_vocab_size, tgt_vocab_size=self.tgt_vocab_size,
                     context_len=self.context_len, d_model=self.d_model, n_heads=self.n_heads, n_layers=self.n_layers)
        divides("n_heads", self.n_heads, "d_model", self.d_model)
        if self.d_model % 2:
            raise ValueError("d_model must be even (the sinusoidal positions come in sin/cos pairs), "
                             f"got {self.d_model}")
        if self.d_ff is not None:
            positive_int(d_ff=self.d_ff)
        one_of(("post", "pre"), norm=self.norm)
        probability(dropout=self.dropout)
        one_of(("sinusoidal", "rope"), positions=self.positions)
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(f"share_embeddings needs one vocabulary, got src_vocab_size={self.src_vocab_size} "
                             f"and tgt_vocab_size={self.tgt_vocab_size}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads


def _check_ids(ids, name: str, vocab_size: int, context_len: int, offset: int = 0) -> None:
    """Raise unless ids is a (B, T) integer tensor with values in [0, vocab_size) and offset + T <= context_len."""
    token_ids(ids, name=name)
    if ids.dim() != 2 or ids.shape[1] < 1:
        raise ValueError(f"{name} should have shape (B, T) with T >= 1, got {tuple(ids.shape)}")
    if offset + ids.shape[1] > context_len:
        raise ValueError(f"{name} reaches position {offset + ids.shape[1]}, longer than context_len={context_len}")
    token_ids(ids, vocab_size, name)


class Transformer(nn.Module):
    """Encoder-decoder Transformer. Chapter 8.

    forward(src (B, S), tgt_in (B, T)) -> logits (B, T, V_tgt), with teacher forcing.
    encode(src) -> memory (B, S, C), once per sentence; decode(tgt_in, memory, memory_keep) -> logits, as often
    as needed; with a KVCache (new_cache), tgt_in holds only the target tokens after the cached ones.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = c = config
        self.src_emb = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_emb = self.src_emb if c.share_embeddings else nn.Embedding(c.tgt_vocab_size, c.d_model)
        rope = c.positions == "rope"   # then no position vectors are added; cross-attention has no positions
        self.pos = None if rope else SinusoidalPositionalEncoding(c.d_model, c.context_len)   # Chapter 5
        self.drop = nn.Dropout(c.dropout)
        self.encoder = nn.ModuleList([
            TransformerBlock(c.d_model, c.n_heads, c.d_ff, causal=False, norm=c.norm, bias=True,
                             dropout=c.dropout, activation="relu", rope=rope) for _ in range(c.n_layers)])
        self.decoder = nn.ModuleList([
            DecoderBlock(c.d_model, c.n_heads, c.d_ff, norm=c.norm, bias=True, dropout=c.dropout,
                         activation="relu", rope=rope) for _ in range(c.n_layers)])
        self.ln_enc, self.ln_dec = LayerNorm(c.d_model), LayerNorm(c.d_model)
        self.lm_head = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        for name, p in self.named_parameters():
            if p.dim() > 1 and "emb" not in name:
                nn.init.xavier_uniform_(p)   # as nn.Transformer
        # source, then target (once if shared): a set's order follows memory addresses, so two models built
        # from the same seed could draw their embeddings in either order and differ from run to run
        for emb in dict.fromkeys((self.src_emb, self.tgt_emb)):
            nn.init.normal_(emb.weight, std=c.d_model ** -0.5)   # times sqrt(C): unit size, like the positions
        if c.tie_output:
            self.lm_head.weight = self.tgt_emb.weight

    def _embed(self, emb: nn.Embedding, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
        x = emb(ids) * math.sqrt(self.config.d_model)   # (B, T) -> (B, T, C), scaled as in the paper
        return self.drop(x if self.pos is None else self.pos(x, offset=offset))

    def src_keep_mask(self, src: torch.Tensor) -> Optional[torch.Tensor]:
        """(B, S) True at real source tokens (may be attended to); None when config.pad_id is None."""
        return None if self.config.pad_id is None else src != self.config.pad_id

    def encode(self, src: torch.Tensor, src_keep: Optional[torch.Tensor] = None) -> torch.Tensor:
        """src (B, S) -> memory (B, S, C). src_keep (B, S), True = real token; default: src != pad_id."""
        c = self.config
        _check_ids(src, "src", c.src_vocab_size, c.context_len)
        keep = self.src_keep_mask(src) if src_keep is None else src_keep
        if keep is not None:
            if keep.shape != src.shape or keep.dtype != torch.bool:
                raise ValueError(f"src_keep must be a bool (B, S) = {tuple(src.shape)} tensor, True = real token, "
                                 f"got {keep.dtype} {tuple(keep.shape)}")
            if not values_checked() and not keep.any(1).all():
                raise ValueError("every source sentence needs at least one non-padding token")
            keep = keep[:, None, None, :]   # (B, S) -> (B, 1, 1, S): the same keys for every query
        x = self._embed(self.src_emb, src)
        with inputs_checked():              # checked once above: the layers do not check the mask again
            for layer in self.encoder:
                x = layer(x, mask=keep)
        return self.ln_enc(x)

    def new_cache(self, batch_size: int, context_len: Optional[int] = None) -> KVCache:
        """An empty KV cache for the decoder's self-attention: batch_size targets of up to context_len tokens."""
        c, p = self.config, self.lm_head.weight
        return KVCache(c.n_layers, batch_size, c.n_heads, context_len or c.context_len, c.d_head,
                       dtype=p.dtype, device=p.device)

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, memory_keep: Optional[torch.Tensor] = None,
               cache: Optional[KVCache] = None, need_weights: bool = False):
        """tgt_in (B, T), memory (B, S, C), memory_keep (B, S) True = real source token -> logits (B, T, V).

        With need_weights=True -> (logits, [cross-attention weights (B, H, T, S) of each layer]).
        With a cache, tgt_in holds the new tokens only (positions cache.length ..), and the cache advances.
        """
        c = self.config
        start = 0 if cache is None else cache.length
        _check_ids(tgt_in, "tgt_in", c.tgt_vocab_size, c.context_len, start)
        B = tgt_in.shape[0]
        if memory.dim() != 3 or memory.shape[0] != B or memory.shape[2] != c.d_model:
            raise ValueError(f"memory should have shape ({B}, S, {c.d_model}) (the output of encode), "
                             f"got {tuple(memory.shape)}")
        if memory_keep is not None and (memory_keep.dtype != torch.bool or memory_keep.shape != memory.shape[:2]):
            raise ValueError(f"memory_keep must be a bool (B, S) = {tuple(memory.shape[:2])} tensor, True = real "
                             f"token, got {memory_keep.dtype} {tuple(memory_keep.shape)}")
        if memory_keep is not None and not values_checked() and not memory_keep.any(1).all():
            raise ValueError("memory_keep must keep at least one source token in every row (True = real token)")
        if cache is not None and (cache.k.shape[0], cache.k.shape[1]) != (c.n_layers, B):
            raise ValueError(f"this cache holds (n_layers, batch) = {tuple(cache.k.shape[:2])}, need "
                             f"{(c.n_layers, B)}: make it with model.new_cache({B})")
        x, weights = self._embed(self.tgt_emb, tgt_in, offset=start), []
        with inputs_checked():              # memory_keep checked once above, not again in every layer
            for i, layer in enumerate(self.decoder):
                x = layer(x, memory, memory_keep, cache=cache, layer=i, need_weights=need_weights)
                if need_weights:
                    x, w = x
                    weights.append(w)
        if cache is not None:
            cache.advance(tgt_in.shape[1])
        logits = self.lm_head(self.ln_dec(x))   # (B, T, C) -> (B, T, V)
        return (logits, weights) if need_weights else logits

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: src (B, S), tgt_in = BOS + target (B, T) -> logits (B, T, V) for every position at once."""
        c = self.config
        _check_ids(src, "src", c.src_vocab_size, c.context_len)
        _check_ids(tgt_in, "tgt_in", c.tgt_vocab_size, c.context_len)
        if tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"src and tgt_in need the same batch size, got {src.shape[0]} and {tgt_in.shape[0]}")
        keep = self.src_keep_mask(src)
        if keep is not None and not values_checked() and not keep.any(1).all():
            raise ValueError("every source sentence needs at least one non-padding token")
        with inputs_checked():              # src, tgt_in and the mask are checked: once per call, here
            return self.decode(tgt_in, self.encode(src, keep), keep)
