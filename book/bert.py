"""The encoder-only Transformer (BERT, Devlin et al. 2018): every token sees every token. Chapter 9.

Read it top to bottom: EncoderConfig (the sizes), then BERT (the stack and its masked-LM head).
Shape legend (batch first): B batch, T time, C = d_model, H = n_heads, V vocab.

ids (B, T) -> token embeddings + learned positions -> n_layers blocks of bidirectional self-attention and FFN
(book.blocks.TransformerBlock with causal=False; pre-norm by default, as the GPT of Chapter 7) -> final
LayerNorm -> lm_head (tied to the token embedding) -> logits (B, T, V) at every position. Trained with masked
language modelling (book.objectives.mask_tokens), the logits at a masked position guess the hidden token from
both sides. Its attention is the GPT's (book.gpt) and the encoder-decoder's (book.transformer):
book.attention.Attention, here with causal=False; its FFN and LayerNorm are book.layers', as theirs.

The defaults are the book's own encoder (pre-norm, no biases). Four fields make it the published BERT, so that a
real checkpoint fits the same class (book.chapters.ch09 loads one): norm="post" (LN(x + f(x)) in every block, no final
LayerNorm), bias=True, embedding_norm=True (a LayerNorm over token + position + token-type embeddings),
n_token_types=2 (sentence A / B), eps=1e-12.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn

from .blocks import TransformerBlock
from .checks import (divides, inputs_checked, non_negative_int, one_of, positive_int, positive_number, probability,
                     token_ids, values_checked)
from .layers import LayerNorm
from .positional import LearnedPositionalEmbedding

__all__ = ["EncoderConfig", "BERT"]


@dataclass
class EncoderConfig:
    """Sizes of an encoder. d_ff=None means 4 * d_model."""
    vocab_size: int
    context_len: int = 64
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 2
    d_ff: Optional[int] = None
    dropout: float = 0.0
    positions: str = "learned"   # as BERT; or "rope": rotate queries and keys (Chapter 5), no position table
    norm: str = "pre"            # "post" as the published BERT
    bias: bool = False           # True: every Linear has a bias, as the published BERT
    embedding_norm: bool = False  # True: LayerNorm (and dropout) over the summed embeddings, as BERT
    n_token_types: int = 0       # BERT's segment embeddings (sentence A = 0, B = 1); 0 = none
    eps: float = 1e-5            # every LayerNorm's; BERT's checkpoints use 1e-12

    def __post_init__(self):
        positive_int(vocab_size=self.vocab_size, context_len=self.context_len, d_model=self.d_model,
                     n_heads=self.n_heads, n_layers=self.n_layers)
        if self.d_ff is not None:
            positive_int(d_ff=self.d_ff)
        divides("n_heads", self.n_heads, "d_model", self.d_model)
        probability(dropout=self.dropout)
        one_of(("learned", "rope"), positions=self.positions)
        one_of(("pre", "post"), norm=self.norm)
        for name in ("bias", "embedding_norm"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        non_negative_int(n_token_types=self.n_token_types)   # 0 = no token-type embeddings
        positive_number(eps=self.eps)


class BERT(nn.Module):
    """Encoder-only Transformer with a masked-LM head. Chapter 9.

    forward(idx (B, T), keep=None, token_types=None) -> logits (B, T, V). keep (B, T) bool, True = a real token
    that may be attended to (padding False); None: every token is real. token_types (B, T) ints in
    [0, n_token_types), None = all 0. No causal mask: position t reads t+1, t+2, ...
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        rope = c.positions == "rope"
        self.pos_emb = None if rope else LearnedPositionalEmbedding(c.d_model, c.context_len)   # Chapter 5
        self.type_emb = nn.Embedding(c.n_token_types, c.d_model) if c.n_token_types else None
        self.emb_norm = LayerNorm(c.d_model, c.eps) if c.embedding_norm else None
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList([
            TransformerBlock(c.d_model, c.n_heads, c.d_ff, causal=False, norm=c.norm, bias=c.bias, dropout=c.dropout,
                             activation="gelu", rope=rope, eps=c.eps) for _ in range(c.n_layers)])
        # post-norm blocks end in a LayerNorm already; pre-norm ones leave the residual stream unnormalised
        self.ln_f = LayerNorm(c.d_model, c.eps) if c.norm == "pre" else nn.Identity()
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight   # tied, as in BERT and our GPT
        for name, p in self.named_parameters():   # the GPT's initialisation (Chapter 7), so recipes carry over
            if p.dim() > 1:
                std = 0.02 / (2 * c.n_layers) ** 0.5 if name.endswith(("out_proj.weight", "down.weight")) else 0.02
                nn.init.normal_(p, mean=0.0, std=std)
            elif name.endswith("bias"):   # Linear biases start at zero, as BERT's (LayerNorm's already are)
                nn.init.zeros_(p)

    def _check_inputs(self, idx: torch.Tensor, keep, token_types) -> Optional[torch.Tensor]:
        """Raise on bad ids, keep or token_types; -> the attention mask (B, 1, 1, T) from keep, or None."""
        c = self.config
        token_ids(idx, name="idx")
        if idx.dim() != 2 or idx.shape[1] < 1:
            raise ValueError(f"idx should have shape (B, T) with T >= 1, got {tuple(idx.shape)}")
        if idx.shape[1] > c.context_len:
            raise ValueError(f"sequence of {idx.shape[1]} tokens is longer than context_len={c.context_len}")
        token_ids(idx, c.vocab_size, "token ids")
        if token_types is not None:
            _check_token_types(token_types, idx.shape, c.n_token_types)
        if keep is None:
            return None
        if keep.dtype != torch.bool or keep.shape != idx.shape:
            raise ValueError(f"keep must be a bool (B, T) = {tuple(idx.shape)} tensor, True = real token, "
                             f"got {keep.dtype} {tuple(keep.shape)}")
        if not values_checked() and not keep.any(1).all():
            raise ValueError("every sequence needs at least one real (keep=True) token")
        return keep[:, None, None, :]   # (B, T) -> (B, 1, 1, T): the same keys for every query

    def embed(self, idx: torch.Tensor, token_types: Optional[torch.Tensor] = None) -> torch.Tensor:
        """idx (B, T) -> token + position (+ token-type) embeddings (B, T, C), normalised if embedding_norm."""
        x = self.tok_emb(idx)   # (B, T, C)
        if self.pos_emb is not None:
            x = self.pos_emb(x)
        if self.type_emb is not None:
            x = x + self.type_emb(torch.zeros_like(idx) if token_types is None else token_types)
        if self.emb_norm is not None:
            x = self.emb_norm(x)
        return self.drop(x)

    def hidden(self, idx: torch.Tensor, keep: Optional[torch.Tensor] = None,
               token_types: Optional[torch.Tensor] = None, need_weights: bool = False):
        """idx (B, T) -> the last layer's states (B, T, C): one contextual vector per token.

        need_weights=True -> (states, [attention weights (B, H, T, T) of each layer]).
        """
        mask = self._check_inputs(idx, keep, token_types)
        x, weights = self.embed(idx, token_types), []
        with inputs_checked():              # ids and mask checked once above, not again in every layer
            for block in self.blocks:
                x = block(x, mask=mask, need_weights=need_weights)
                if need_weights:
                    x, w = x
                    weights.append(w)
        x = self.ln_f(x)
        return (x, weights) if need_weights else x

    def forward(self, idx: torch.Tensor, keep: Optional[torch.Tensor] = None,
                token_types: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.lm_head(self.hidden(idx, keep, token_types))   # (B, T, C) -> (B, T, V)


def _check_token_types(token_types, shape, n_token_types: int) -> None:
    if n_token_types == 0:
        raise ValueError("this encoder has no token-type embeddings (n_token_types=0): pass token_types=None")
    if not isinstance(token_types, torch.Tensor) or token_types.dtype.is_floating_point \
            or token_types.dtype == torch.bool or token_types.shape != shape:
        got = (f"{token_types.dtype} {tuple(token_types.shape)}" if isinstance(token_types, torch.Tensor)
               else type(token_types).__name__)
        raise ValueError(f"token_types must be an integer tensor of shape {tuple(shape)} like idx, got {got}")
    if values_checked() or not token_types.numel():
        return
    lo, hi = torch.stack([token_types.min(), token_types.max()]).tolist()    # one read of the device
    if lo < 0 or hi >= n_token_types:
        raise ValueError(f"token_types must lie in [0, n_token_types={n_token_types}), got values from {lo} to {hi}")
