"""Chapter 8, the encoder-decoder: its drawing, the nn.Transformer twin it checks against, the exercise checkers, and
the live section (a typed toy sentence translated, with its cross-attention: exported for the website, a widget).
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
           "transformer_params", "to_torch_decoder_layer", "translate_words", "export_translator", "load_translator",
           "live_translator"]

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


# ---- the live section: the reader's own toy sentence, translated (the website runs the export; a kernel, this) ----

TRANSLATE_FORMAT = "book-live-translate/1"   # the JSON's layout; _ext/live_gpt.js checks it
EXTRA_WORDS = 5                              # greedy decoding stops at EOS or after len(source) + 5 words


class _TranslateGraph(nn.Module):
    """(src (B, S), tgt (B, T)) -> (logits (B, T, V), cross-attention (L, B, H, T, S)): the exported graph."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, src, tgt):
        m = self.model
        keep = m.src_keep_mask(src)
        logits, cross = m.decode(tgt, m.encode(src, keep), keep, need_weights=True)
        return logits, torch.stack(cross)


def _source_words(task, sentence: str):
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a str, got {type(sentence).__name__}")
    words = sentence.lower().split()
    return [w for w in words if w in task.source_words], sorted(set(words) - set(task.source_words))


@torch.no_grad()
def translate_words(model: Transformer, task, sentence: str) -> dict:
    """Greedy translation of a typed sentence (its words of the toy language; others skipped): {"source": the words
    read, "skipped": the unknown ones, "output": the words written (up to and with <eos>), "cross": (L, H, T, S)
    tensor, the cross-attention of each written word over the source words}."""
    from ..generate import greedy_translate
    from ..tasks import EOS

    words, skipped = _source_words(task, sentence)
    ctx = model.config.context_len
    if not words:
        raise ValueError(f"sentence must hold at least one word of the toy language, got {sentence!r}")
    if len(words) > ctx:
        raise ValueError(f"sentence has {len(words)} known words; the model reads at most {ctx}")
    stoi = {w: i for i, w in enumerate(task.src_vocab)}
    src = torch.tensor([[stoi[w] for w in words]], device=next(model.parameters()).device)
    ids, cross = greedy_translate(model, src, min(len(words) + EXTRA_WORDS, ctx - 1), need_weights=True)
    ids = ids[0].tolist()
    n = ids.index(EOS) + 1 if EOS in ids else len(ids)
    return {"source": words, "skipped": skipped, "output": [task.tgt_vocab[i] for i in ids[:n]],
            "cross": cross[:, 0, :, :n].float().cpu()}


def export_translator(model: Transformer, task, path, *, example: str, provenance: dict) -> dict:
    """Export the chapter's trained Transformer for the website (book.export.export_onnx): the graph, and a JSON
    with both vocabularies, the config, the provenance and `example` translated (shown while the page loads)."""
    import dataclasses
    from ..export import example_outputs, export_onnx
    from ..tasks import BOS, EOS, PAD

    cfg = model.config
    shown = translate_words(model, task, example)
    meta = {"format": TRANSLATE_FORMAT, "kind": "translate",
            "inputs": {"src": "int64 (B, S) source ids", "tgt": "int64 (B, T): <bos> and the words written so far"},
            "outputs": {"logits": "float32 (B, T, V)", "cross": "float32 (L, B, H, T, S)"},
            "src_vocab": list(task.src_vocab), "tgt_vocab": list(task.tgt_vocab),
            "specials": {"pad": PAD, "bos": BOS, "eos": EOS}, "extra_words": EXTRA_WORDS,
            "config": dataclasses.asdict(cfg), "provenance": provenance,
            "example": {"text": example, **example_outputs(shown)}}
    S = torch.export.Dim("S", min=1, max=cfg.context_len)
    T = torch.export.Dim("T", min=1, max=cfg.context_len)
    src, tgt = torch.full((1, 4), 3, dtype=torch.long), torch.full((1, 3), 1, dtype=torch.long)
    stoi = {w: i for i, w in enumerate(task.tgt_vocab)}
    words = torch.tensor([[task.src_vocab.index(w) for w in shown["source"]]])
    written = torch.tensor([[BOS] + [stoi[w] for w in shown["output"][:-1]]])
    longest = torch.arange(cfg.context_len)[None] % (len(task.src_vocab) - 3) + 3
    checks = [(words, written), (longest, longest[:, :-1])]
    return export_onnx(_TranslateGraph(model), (src, tgt), path, input_names=["src", "tgt"],
                       output_names=["logits", "cross"], dynamic_shapes={"src": {1: S}, "tgt": {1: T}}, meta=meta,
                       verify=checks)


def load_translator(path):
    """(book.transformer.Transformer with the export's weights, the JSON) for export_translator's files."""
    from ..export import read_meta, read_weights
    from ..transformer import TransformerConfig

    meta = read_meta(path, TRANSLATE_FORMAT, writer="export_translator")
    with torch.random.fork_rng(devices=[]):
        model = Transformer(TransformerConfig(**meta["config"]))
    return read_weights(path, model, prefix="model."), meta


def live_translator(model: Transformer, task, sentence: str = "shy owl sees big red fox and hen likes cat"):
    """The live section for a kernel: a text box for a toy sentence; the model's greedy translation, and the
    cross-attention of each written word over the source words, with layer and head selectors."""
    import html
    import ipywidgets as widgets
    from ..plots import alt_text, display_width, heatmap, new_figure, to_png
    from ..widgets import frame_html

    cfg = model.config
    box = widgets.Text(value=sentence, description="sentence", layout=widgets.Layout(width="95%"))
    layer = widgets.Dropdown(options=[(f"layer {i + 1}", i) for i in range(cfg.n_layers)], value=cfg.n_layers - 1,
                             description="layer")
    head = widgets.Dropdown(options=[(f"head {i + 1}", i) for i in range(cfg.n_heads)], value=0, description="head")
    out, picture = widgets.HTML(), widgets.HTML()
    state = {}

    def draw_map(_=None):
        shown = state.get("shown")
        if shown is None:
            picture.value = ""
            return
        w = shown["cross"][layer.value, head.value]
        fig, ax = new_figure(figsize=(min(7.0, 2.2 + 0.45 * len(shown["source"])),
                                      min(6.0, 1.6 + 0.4 * len(shown["output"]))))
        heatmap(w, shown["source"], shown["output"], ax=ax, vmin=0, vmax=1, xlabel="source word",
                ylabel="word written", title=f"Cross-attention, layer {layer.value + 1}, head {head.value + 1}")
        picture.value = frame_html(to_png(fig, palette=True), display_width(fig), alt_text(fig))

    def translate(_=None):
        words, _skipped = _source_words(task, box.value)
        if not words or len(words) > cfg.context_len:
            state["shown"] = None
            out.value = f"Type a sentence of the toy language (1 to {cfg.context_len} known words)."
        else:
            shown = state["shown"] = translate_words(model, task, box.value)
            skipped = (f"<br>Not in the vocabulary, skipped: {html.escape(' '.join(shown['skipped']))}"
                       if shown["skipped"] else "")
            out.value = (f"<pre style=\"margin:0\">source:      {html.escape(' '.join(shown['source']))}\n"
                         f"translation: {html.escape(' '.join(shown['output']))}</pre>{skipped}")
        draw_map()

    box.observe(translate, names="value")
    layer.observe(draw_map, names="value")
    head.observe(draw_map, names="value")
    translate()
    section = widgets.VBox([box, out, widgets.HBox([layer, head]), picture])
    section.translate = translate
    return section
