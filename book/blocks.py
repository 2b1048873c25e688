"""Transformer blocks made of book.attention.Attention, book.layers.FeedForward and LayerNorm. Chapters 6 and 8.

TransformerBlock: Chapter 6's block, self-attention + FFN, each in a residual connection with a LayerNorm before
("pre", GPT-2) or after ("post", Vaswani 2017, BERT); causal=True for a language model, False for an encoder
(BERT, the encoder of Chapter 8). DecoderBlock: the encoder-decoder's decoder layer (Chapter 8), causal
self-attention + cross-attention + FFN. The GPT's own block is book.gpt.Block.
to_torch_encoder_layer / to_torch_decoder_layer copy a block into PyTorch's nn.TransformerEncoderLayer /
nn.TransformerDecoderLayer, the references the tests and chapters compare against.

Shape legend (batch first): B batch, T time, S source length, C = d_model, H = n_heads, F = d_ff.
Mask convention (as in book.attention): True = may attend.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn

from .attention import Attention, to_torch_mha
from .checks import one_of, positive_int, tensor_dims, token_ids
from .kv_cache import KVCache
from .layers import FeedForward, LayerNorm
from .positional import LearnedPositionalEmbedding

__all__ = ["TransformerBlock", "DecoderBlock", "BlockLM", "to_torch_encoder_layer"]

_NORMS = ("pre", "post")


class _Residual(nn.Module):
    """Residual sub-layers around f: pre-norm x + f(ln(x)) (GPT-2), post-norm ln(x + f(x)) (the paper, BERT)."""

    norm: str
    residual: bool = True

    def _input(self, x: torch.Tensor, ln: nn.Module) -> torch.Tensor:
        return ln(x) if self.norm == "pre" else x

    def _output(self, x: torch.Tensor, y: torch.Tensor, ln: nn.Module) -> torch.Tensor:
        y = self.resid_drop(y)
        y = x + y if self.residual else y
        return y if self.norm == "pre" else ln(y)

    def _check_x(self, x: torch.Tensor, C: int) -> None:
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != C:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x should have shape (B, T, {C}), got {got}")


class TransformerBlock(_Residual):
    """Self-attention + FFN, each wrapped in a residual connection and a LayerNorm (pre or post). Chapter 6.

    x (B, T, C) -> (B, T, C). causal (required): True for a language model (position t sees 0..t), False for an
    encoder (every position sees every other). The flags residual / use_ffn / use_norm switch parts off for the
    chapter's ablation ladder; eps is the LayerNorms' (BERT's checkpoints use 1e-12).
    forward(x, mask, need_weights=True) -> (out, weights (B, H, T, T)); mask is combined with the causal one.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: Optional[int] = None, *, causal: bool, norm: str = "pre",
                 bias: bool = False, dropout: float = 0.0, residual: bool = True, use_ffn: bool = True,
                 use_norm: bool = True, activation: str = "gelu", rope: bool = False, eps: float = 1e-5):
        super().__init__()
        one_of(_NORMS, norm=norm)
        if not isinstance(causal, bool):
            raise TypeError(f"causal must be True (a language model) or False (an encoder), got {causal!r}")
        self.norm, self.causal, self.residual = norm, causal, residual
        self.use_ffn, self.use_norm = use_ffn, use_norm
        self.attn = Attention(d_model, n_heads, bias=bias, dropout=dropout, rope=rope)
        self.ffn = FeedForward(d_model, d_ff, activation, bias=bias, dropout=dropout) if use_ffn else None
        self.ln1 = LayerNorm(d_model, eps) if use_norm else nn.Identity()
        self.ln2 = LayerNorm(d_model, eps) if (use_norm and use_ffn) else nn.Identity()
        self.resid_drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None, need_weights: bool = False):
        self._check_x(x, self.attn.d_model)
        out = self.attn(self._input(x, self.ln1), causal=self.causal, mask=mask, need_weights=need_weights)
        y, weights = out if need_weights else (out, None)
        x = self._output(x, y, self.ln1)
        if self.ffn is not None:
            x = self._output(x, self.ffn(self._input(x, self.ln2)), self.ln2)
        return (x, weights) if need_weights else x


class BlockLM(nn.Module):
    """Chapter 6's language model: token embeddings + learned positions -> n_layers TransformerBlocks -> logits.

    idx (B, T) -> logits (B, T, V). block_flags go to every TransformerBlock (n_heads, residual, use_ffn, use_norm,
    norm, ...), so one class serves every rung of the chapter's ablation ladder; a Pre-Norm stack ends with one
    more LayerNorm before the output head. forward(idx, return_stream=True) -> (logits, the residual stream after
    the embeddings and after each block: a list of n_layers + 1 tensors (B, T, C)).
    """

    def __init__(self, vocab_size: int, context_len: int, d_model: int, n_layers: int, n_heads: int, **block_flags):
        super().__init__()
        positive_int(vocab_size=vocab_size, context_len=context_len, d_model=d_model, n_layers=n_layers)
        self.vocab_size = vocab_size
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = LearnedPositionalEmbedding(d_model, context_len)
        self.blocks = nn.ModuleList(TransformerBlock(d_model, n_heads, causal=True, **block_flags)
                                    for _ in range(n_layers))
        pre_norm = block_flags.get("use_norm", True) and block_flags.get("norm", "pre") == "pre"
        self.ln_f = LayerNorm(d_model) if pre_norm else nn.Identity()   # Pre-Norm ends with one more norm
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, return_stream: bool = False):
        tensor_dims(idx, 2, "idx (B, T)")
        token_ids(idx, self.tok.num_embeddings, "idx")
        x = self.pos(self.tok(idx))                                       # (B, T, C)
        stream = [x]
        for block in self.blocks:
            x = block(x)
            stream.append(x)
        logits = self.head(self.ln_f(x))
        return (logits, stream) if return_stream else logits


class DecoderBlock(_Residual):
    """The encoder-decoder's decoder layer: causal self-attention, cross-attention, FFN. Chapter 8.

    x (B, T, C) (the target so far), memory (B, S, C) (the encoder's output) -> (B, T, C). Each sub-layer
    has a residual connection and a LayerNorm: norm="post" LN(x + f(x)) as in the paper and
    nn.TransformerDecoderLayer, or norm="pre" x + f(LN(x)). Cross-attention takes its queries from the
    decoder and its keys and values from memory, so its weights are (B, H, T, S). memory_keep (B, S) is True
    at real source tokens (False at padding): a keep mask, unlike nn.Transformer's memory_mask.
    With a KVCache (one layer per block), x holds only the new target tokens: the self-attention reads the
    cached keys and values; memory is the same every step (encode once, reuse).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: Optional[int] = None, *, norm: str = "post",
                 bias: bool = True, dropout: float = 0.0, activation: str = "relu", rope: bool = False):
        super().__init__()
        self.norm = one_of(_NORMS, norm=norm)
        self.self_attn = Attention(d_model, n_heads, bias=bias, dropout=dropout, rope=rope)
        self.cross_attn = Attention(d_model, n_heads, bias=bias, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, activation, bias=bias, dropout=dropout)
        self.ln1, self.ln2, self.ln3 = LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)
        self.resid_drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, memory_keep: Optional[torch.Tensor] = None,
                cache: Optional[KVCache] = None, layer: int = 0, need_weights: bool = False):
        """-> out (B, T, C); with need_weights=True (out, cross-attention weights (B, H, T, S))."""
        C = self.cross_attn.d_model
        self._check_x(x, C)
        if memory.dim() != 3 or memory.shape[0] != x.shape[0] or memory.shape[-1] != C:
            raise ValueError(f"memory should have shape ({x.shape[0]}, S, {C}) (the encoder's output), "
                             f"got {tuple(memory.shape)}")
        mask = None
        if memory_keep is not None:
            if memory_keep.shape != memory.shape[:2]:
                raise ValueError(f"memory_keep (B, S) should have shape {tuple(memory.shape[:2])}, "
                                 f"got {tuple(memory_keep.shape)}")
            mask = memory_keep[:, None, None, :]   # (B, S) -> (B, 1, 1, S): the same keys for every query
        h = self.self_attn(self._input(x, self.ln1), causal=True, cache=cache, layer=layer)
        x = self._output(x, h, self.ln1)
        out = self.cross_attn(self._input(x, self.ln2), memory, causal=False, mask=mask, need_weights=need_weights)
        h, weights = out if need_weights else (out, None)
        x = self._output(x, h, self.ln2)
        x = self._output(x, self.ffn(self._input(x, self.ln3)), self.ln3)
        return (x, weights) if need_weights else x


def _copy_position_wise(block: nn.Module, theirs: nn.Module, norms) -> nn.Module:
    """Copy block's FFN and LayerNorms (ours, theirs pairs) into a PyTorch layer; missing biases become 0."""
    pairs = [(block.ffn.up, theirs.linear1), (block.ffn.down, theirs.linear2), *norms]
    with torch.no_grad():
        for mine, ref in pairs:
            ref.weight.copy_(mine.weight)
            ref.bias.copy_(mine.bias if mine.bias is not None else torch.zeros_like(ref.bias))
    return theirs.train(block.training)


def to_torch_encoder_layer(block: TransformerBlock) -> nn.TransformerEncoderLayer:
    """PyTorch's nn.TransformerEncoderLayer holding `block`'s weights. Chapter 6.

    Its biases are zero where the block has none. It has no causal flag: pass src_mask=~causal_mask(T) (PyTorch's
    masks are True = blocked). The block must have all its parts (residual, FFN, norms), ReLU or GELU, no RoPE.
    """
    if not (block.residual and block.use_ffn and block.use_norm) or block.attn.rotary is not None \
            or block.ffn.activation not in ("relu", "gelu"):
        raise ValueError("nn.TransformerEncoderLayer has a residual, an FFN (ReLU or GELU) and two LayerNorms, "
                         "and no RoPE: only such a block can be copied into it")
    C, w = block.attn.d_model, block.ffn.up.weight
    theirs = nn.TransformerEncoderLayer(C, block.attn.n_heads, block.ffn.d_ff, dropout=block.resid_drop.p,
                                        activation=block.ffn.activation, layer_norm_eps=block.ln1.eps,
                                        batch_first=True, norm_first=block.norm == "pre", bias=True,
                                        device=w.device, dtype=w.dtype)
    theirs.self_attn.load_state_dict(to_torch_mha(block.attn, bias=True).state_dict())
    return _copy_position_wise(block, theirs, [(block.ln1, theirs.norm1), (block.ln2, theirs.norm2)])
