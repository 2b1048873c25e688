"""Chapter 8, the encoder-decoder: its drawing, the nn.Transformer twin it checks against, and the exercise checkers.
"""
from __future__ import annotations

import warnings

import torch
import torch.nn as nn
from matplotlib.figure import Figure

from ..attention import Attention, to_torch_mha
from ..blocks import DecoderBlock, _copy_position_wise, to_torch_encoder_layer
from ..checks import positive_int, returned
from ..diagrams import Diagram, ROLES
from ..transformer import Transformer

__all__ = ["draw_encoder_decoder", "to_torch_transformer", "check_transformer_params", "check_cross_attention",
           "transformer_params", "to_torch_decoder_layer"]

MAX_DRAWN_LAYERS = 4    # more layers per stack would not fit a page; the paper's N = 6 is named in the figure

MEMORY_ARROW = "memory-to-cross-attention"   # the gid of every arrow from the memory into a decoder layer


def _stack_input(d: Diagram, x: float, w: float, tokens: str) -> None:
    """Tokens, then the scaled embedding plus sinusoidal positions, at the bottom of a stack centred at x."""
    d.box(x, 0.6, tokens, role="token", w=w, h=0.65, fontsize=8)
    d.arrow((x, 0.93), (x, 1.37))
    d.box(x, 1.7, "embedding × √C  +  sinusoidal positions", role="embed", w=w, h=0.65, fontsize=8)
    d.arrow((x, 2.03), (x, 2.6))


def draw_encoder_decoder(n_layers: int = 2) -> Figure:
    """The encoder-decoder of Vaswani et al. (2017), with `n_layers` layers in each stack (at most 4). Chapter 8.

    The encoder reads the source once; its output, the memory M (S x C), is computed once per sentence, and an
    arrow (gid MEMORY_ARROW) carries it into the cross-attention of every decoder layer as keys and values. Each
    attention names its mask: encoder self-attention the source padding, decoder self-attention the causal mask
    (which also hides the target's trailing padding), cross-attention the source padding.

    Example: fig = draw_encoder_decoder(2)   # a Figure; the chapter shows it, tests read its labels and arrows
    """
    positive_int(n_layers=n_layers)
    if n_layers > MAX_DRAWN_LAYERS:
        raise ValueError(f"n_layers must be at most {MAX_DRAWN_LAYERS} (a taller figure does not fit a page; the "
                         f"paper's N = 6 is named in the figure), got {n_layers}")
    layer_h = 3.2
    top = 2.6 + layer_h * n_layers                      # where the last layer ends
    d = Diagram(15.2, top + 3.0, title="The encoder–decoder: the memory is computed once and read by every "
                                      "decoder layer")
    xe, xm, xd, we, wd = 2.95, 7.3, 12.0, 3.9, 4.9
    mem, att = ROLES["memory"][1], ROLES["attn"][1]
    _stack_input(d, xe, we, "source words  $x_1 \\ldots x_S$  (all of them)")
    _stack_input(d, xd, wd, "target so far  <bos> $y_1 \\ldots y_{t-1}$")
    cross_y = []
    for i in range(n_layers):
        y0 = 2.6 + layer_h * i
        # encoder layer: self-attention, then FFN
        d.group(xe - 2.15, y0 + 0.15, xe + 2.15, y0 + layer_h - 0.15, role="rnn")
        d.text(xe - 2.05, y0 + layer_h - 0.38, f"encoder layer {i + 1}", fontsize=7, ha="left",
               color=ROLES["rnn"][1])
        d.box(xe, y0 + 0.95, "self-attention (all words see all)\nmask: source padding", role="attn",
              w=we, h=0.85, fontsize=7.5)
        d.arrow((xe, y0 + 1.38), (xe, y0 + 1.95))
        d.box(xe, y0 + 2.25, "feed-forward, per position", role="ffn", w=we, h=0.6, fontsize=8)
        d.arrow((xe, y0 + 2.55), (xe, y0 + layer_h + (0.0 if i == n_layers - 1 else 0.52)))
        # decoder layer: causal self-attention, cross-attention, FFN
        d.group(xd - 2.6, y0 + 0.05, xd + 2.6, y0 + layer_h - 0.05, role="attn")
        d.text(xd + 2.5, y0 + layer_h - 0.28, f"decoder layer {i + 1}", fontsize=7, ha="right", color=att)
        d.box(xd, y0 + 0.55, "causal self-attention (target so far)\nmask: causal (+ target padding)",
              role="attn", w=wd, h=0.8, fontsize=7.5)
        d.arrow((xd, y0 + 0.95), (xd, y0 + 1.1))
        d.box(xd, y0 + 1.5, "cross-attention (Q: decoder, K and V: M)\nmask: source padding", role="attn",
              w=wd, h=0.8, fontsize=7.5)
        cross_y.append(y0 + 1.5)
        d.arrow((xd, y0 + 1.9), (xd, y0 + 2.15))
        d.box(xd, y0 + 2.45, "feed-forward, per position", role="ffn", w=wd, h=0.55, fontsize=8)
        d.arrow((xd, y0 + 2.73), (xd, y0 + layer_h))
    # the encoder's end: final LayerNorm -> the memory, once
    d.box(xe, top + 0.45, "final LayerNorm", role="norm", w=we, h=0.55, fontsize=8)
    d.arrow((xe, top), (xe, top + 0.17))
    mid = (cross_y[0] + cross_y[-1]) / 2
    m_lo, m_hi = min(cross_y[0] - 0.75, mid - 1.2), max(cross_y[-1] + 0.75, mid + 1.2)
    d.box(xm, (m_lo + m_hi) / 2, "memory M\nS × C\n\ncomputed once\nper sentence", role="memory", w=1.9,
          h=m_hi - m_lo, fontsize=8, bold=True)
    d.line([(xe + we / 2, top + 0.45), (xm, top + 0.45)], color=mem, width=1.6)
    d.arrow((xm, top + 0.45), (xm, m_hi), color=mem, width=1.6)
    for y in cross_y:                                   # one arrow per decoder layer: M as keys and values
        d.arrow((xm + 0.95, y), (xd - wd / 2, y), text="K, V", color=mem, width=1.6,
                text_offset=(0.0, 0.05)).set_gid(MEMORY_ARROW)
    # the decoder's head
    d.box(xd, top + 0.45, "final LayerNorm", role="norm", w=wd, h=0.55, fontsize=8)
    d.arrow((xd, top), (xd, top + 0.17))
    d.arrow((xd, top + 0.73), (xd, top + 1.05))
    d.box(xd, top + 1.35, "linear → softmax over the target vocabulary", role="embed", w=wd, h=0.55, fontsize=8)
    d.arrow((xd, top + 1.63), (xd, top + 1.95))
    d.box(xd, top + 2.25, "next word  $y_t$  (fed back as the next input)", role="token", w=wd, h=0.55, fontsize=8)
    d.text(xm, 1.15, "every sub-layer f sits in a residual:\nx ← LN(x + f(x)) in the paper (Post-Norm),\n"
           "x ← x + f(LN(x)) in Pre-Norm;\nthe paper: N = 6 layers per stack", fontsize=7, italic=True)
    return d.figure


def to_torch_transformer(model: Transformer) -> nn.Transformer:
    """An nn.Transformer (ReLU, no dropout, batch first) holding `model`'s encoder and decoder weights. Chapter 8.

    PyTorch packs q, k, v into one in_proj matrix; we keep three. Embeddings, positions and lm_head are not
    part of nn.Transformer: it maps embedded (B, S, C), (B, T, C) to decoder outputs (B, T, C).
    """
    c = model.config
    with warnings.catch_warnings():   # PyTorch's note that its nested-tensor fast path is off: not our concern
        warnings.simplefilter("ignore")
        ref = nn.Transformer(c.d_model, c.n_heads, c.n_layers, c.n_layers, c.d_ff or 4 * c.d_model, dropout=0.0,
                             batch_first=True, norm_first=c.norm == "pre").to(model.lm_head.weight.device).eval()
        ref.encoder.layers = nn.ModuleList(to_torch_encoder_layer(layer).eval() for layer in model.encoder)
        ref.decoder.layers = nn.ModuleList(to_torch_decoder_layer(layer).eval() for layer in model.decoder)
    ref.encoder.norm.load_state_dict(model.ln_enc.state_dict())
    ref.decoder.norm.load_state_dict(model.ln_dec.state_dict())
    return ref


def check_transformer_params(fn) -> bool:
    """Self-check for the chapter 8 exercise: fn(vocab_size, d_model, d_ff, n_layers) -> parameter count."""
    for args in [(37000, 512, 2048, 6), (37000, 1024, 4096, 6), (23, 64, 128, 2), (10, 6, 7, 1)]:
        want, got = transformer_params(*args), fn(*args)
        if got != want:
            raise AssertionError(f"(vocab_size, d_model, d_ff, n_layers) = {args}: expected {want:,}, got {got!r}. "
                                 "Hints: every Linear has a bias; a decoder layer has two attentions and three "
                                 "norms; the embedding is counted once; both stacks end with a LayerNorm.")
    print("Correct: your count matches the model's in every case.")
    return True


def check_cross_attention(fn, seed: int = 0) -> bool:
    """Self-check for the chapter 8 exercise: fn(y (B, T, C), memory (B, S, C), attn, keep (B, S)) -> weights
    (B, H, T, S) of a book.attention.Attention `attn` used as cross-attention. Tried with B=2, T=5, S=7, H=3."""
    torch.manual_seed(seed)
    attn = Attention(12, 3, bias=True)
    g = torch.Generator().manual_seed(seed)
    y, memory = torch.randn(2, 5, 12, generator=g), torch.randn(2, 7, 12, generator=g)
    keep = torch.ones(2, 7, dtype=torch.bool)
    keep[1, 4:] = False
    with torch.no_grad():
        want = attn(y, memory, causal=False, mask=keep[:, None, None, :], need_weights=True)[1]
        got = returned(fn(y, memory, attn, keep))
    if tuple(got.shape) != (2, 3, 5, 7):
        raise AssertionError(f"weights should have shape (B, H, T, S) = (2, 3, 5, 7), got {tuple(got.shape)}")
    if not torch.allclose(got, want, atol=1e-5):
        raise AssertionError("values differ. Hints: queries from y, keys from memory; scale by sqrt(D) with "
                             "D = C // H; padding (keep False) gets -inf before the softmax over S.")
    print("Correct: your cross-attention weights match Attention's.")
    return True


def transformer_params(vocab_size: int, d_model: int, d_ff: int, n_layers: int) -> int:
    """Parameters of the paper's layout with one shared, tied vocabulary (biases and norms included). Chapter 8."""
    attn = 4 * (d_model * d_model + d_model)             # q, k, v, out projections with biases
    ffn = 2 * d_model * d_ff + d_ff + d_model
    enc, dec = attn + ffn + 2 * 2 * d_model, 2 * attn + ffn + 3 * 2 * d_model
    return vocab_size * d_model + n_layers * (enc + dec) + 2 * 2 * d_model   # + final norms of both stacks


def to_torch_decoder_layer(block: DecoderBlock) -> nn.TransformerDecoderLayer:
    """PyTorch's nn.TransformerDecoderLayer holding `block`'s weights (zero where the block has no bias). Chapter 8.

    Call it with tgt_mask=~causal_mask(T), tgt_is_causal=True and memory_key_padding_mask=~memory_keep.
    """
    if block.self_attn.rotary is not None or block.ffn.activation not in ("relu", "gelu"):
        raise ValueError("nn.TransformerDecoderLayer has a ReLU or GELU FFN and no RoPE: this block cannot be "
                         "copied into it")
    C, w = block.cross_attn.d_model, block.ffn.up.weight
    theirs = nn.TransformerDecoderLayer(C, block.cross_attn.n_heads, block.ffn.d_ff, dropout=block.resid_drop.p,
                                        activation=block.ffn.activation, batch_first=True,
                                        norm_first=block.norm == "pre", bias=True, device=w.device, dtype=w.dtype)
    theirs.self_attn.load_state_dict(to_torch_mha(block.self_attn, bias=True).state_dict())
    theirs.multihead_attn.load_state_dict(to_torch_mha(block.cross_attn, bias=True).state_dict())
    norms = [(block.ln1, theirs.norm1), (block.ln2, theirs.norm2), (block.ln3, theirs.norm3)]
    return _copy_position_wise(block, theirs, norms)
