"""The encoder-only Transformer (BERT, Devlin et al. 2018): every token sees every token. Chapter 9.

Read it top to bottom: EncoderConfig (the sizes), then BERT (the stack and its masked-LM head).
Shape legend (batch first): B batch, T time, C = d_model, H = n_heads, V vocab.

ids (B, T) -> token embeddings + learned positions -> n_layers blocks of bidirectional self-attention and FFN
(book.layers.TransformerBlock with causal=False, pre-norm as in the GPT of Chapter 7) -> final LayerNorm ->
lm_head (tied to the token embedding) -> logits (B, T, V) at every position. Trained with masked language
modelling (book.objectives.mask_tokens), the logits at a masked position guess the hidden token from both
sides. The same parts make the GPT (book.models) and the encoder-decoder (book.transformer).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn

from .layers import LayerNorm, TransformerBlock
from .positional import LearnedPositionalEmbedding
from .utils import check_config

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

    def __post_init__(self):
        check_config(self, ["vocab_size", "context_len", "d_model", "n_heads", "n_layers"], ["d_ff"],
                     divides=("n_heads", "d_model"))
        if self.positions not in ("learned", "rope"):
            raise ValueError(f"positions must be 'learned' or 'rope', got {self.positions!r}")


class BERT(nn.Module):
    """Encoder-only Transformer with a masked-LM head. Chapter 9.

    forward(idx (B, T), keep=None) -> logits (B, T, V). keep (B, T) bool, True = a real token that may be
    attended to (padding False); None: every token is real. No causal mask: position t reads t+1, t+2, ...
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        rope = c.positions == "rope"
        self.pos_emb = None if rope else LearnedPositionalEmbedding(c.d_model, c.context_len)   # Chapter 5
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList([
            TransformerBlock(c.d_model, c.n_heads, c.d_ff, norm="pre", causal=False, bias=False, dropout=c.dropout,
                             activation="gelu", rope=rope) for _ in range(c.n_layers)])
        self.ln_f = LayerNorm(c.d_model)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight   # tied, as in BERT and our GPT
        for name, p in self.named_parameters():   # the GPT's initialisation (Chapter 7), so recipes carry over
            if p.dim() > 1:
                std = 0.02 / (2 * c.n_layers) ** 0.5 if name.endswith(("out_proj.weight", "down.weight")) else 0.02
                nn.init.normal_(p, mean=0.0, std=std)

    def hidden(self, idx: torch.Tensor, keep: Optional[torch.Tensor] = None) -> torch.Tensor:
        """idx (B, T) -> the last layer's normalised states (B, T, C): one contextual vector per token."""
        c = self.config
        if not isinstance(idx, torch.Tensor) or idx.dtype.is_floating_point or idx.dtype == torch.bool:
            got = idx.dtype if isinstance(idx, torch.Tensor) else type(idx).__name__
            raise TypeError(f"idx must be an integer tensor of token ids (torch.long), got {got}")
        if idx.dim() != 2 or idx.shape[1] < 1:
            raise ValueError(f"idx should have shape (B, T) with T >= 1, got {tuple(idx.shape)}")
        if idx.shape[1] > c.context_len:
            raise ValueError(f"sequence of {idx.shape[1]} tokens is longer than context_len={c.context_len}")
        if int(idx.min()) < 0 or int(idx.max()) >= c.vocab_size:
            raise ValueError(f"token ids must lie in [0, vocab_size={c.vocab_size}), got ids from "
                             f"{int(idx.min())} to {int(idx.max())}")
        mask = None
        if keep is not None:
            if keep.dtype != torch.bool or keep.shape != idx.shape:
                raise ValueError(f"keep must be a bool (B, T) = {tuple(idx.shape)} tensor, True = real token, "
                                 f"got {keep.dtype} {tuple(keep.shape)}")
            if not keep.any(1).all():
                raise ValueError("every sequence needs at least one real (keep=True) token")
            mask = keep[:, None, None, :]   # (B, T) -> (B, 1, 1, T): the same keys for every query
        x = self.tok_emb(idx)   # (B, T, C)
        x = self.drop(x if self.pos_emb is None else self.pos_emb(x))
        for block in self.blocks:
            x = block(x, mask=mask)
        return self.ln_f(x)

    def forward(self, idx: torch.Tensor, keep: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.lm_head(self.hidden(idx, keep))   # (B, T, C) -> (B, T, V)
