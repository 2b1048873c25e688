"""Chapter 8, the encoder-decoder: its drawing, the nn.Transformer twin it checks against, the exercise checkers, the
live section (a typed toy sentence translated, with its cross-attention: exported for the website, a widget), and the
measurements' plumbing (recorded rows read, tables printed, claims asserted, numbers glued, figures drawn).
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
from ..language import _
from ..transformer import Transformer

__all__ = ["draw_encoder_decoder", "to_torch_transformer", "check_transformer_params", "check_cross_attention",
           "transformer_params", "to_torch_decoder_layer", "translate_words", "export_translator", "load_translator",
           "live_translator", "behind_buckets", "check_behind_buckets", "recorded_race", "race_figure",
           "chapter3_rnns", "check_and_glue_live_race", "live_vs_record_sentence", "seed0_reruns",
           "count_base_model",
           "check_and_glue_decoding", "check_and_glue_exposure", "check_cross_attention_slider", "check_step_replay",
           "post_norm_sentence"]

MAX_DRAWN_LAYERS = 4    # more layers per stack would not fit a page; the paper's N = 6 is named in the figure

MEMORY_ARROW = "memory-to-cross-attention"   # the gid of every arrow from the memory into a decoder layer


def _stack_input(d: Diagram, x: float, w: float, tokens: str) -> None:
    """Tokens, then the scaled embedding plus sinusoidal positions, at the bottom of a stack centred at x."""
    d.box(x, 0.6, tokens, role="token", w=w, h=0.65, fontsize=8)
    d.arrow((x, 0.93), (x, 1.37))
    d.box(x, 1.7, "embedding × √C\n+ sinusoidal positions", role="embed", w=w, h=0.65, fontsize=8)
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
    _stack_input(d, xe, we, "source words  x₁ … xₛ  (all of them)")       # plain text: the alt text reads it
    _stack_input(d, xd, wd, "target so far  <bos> y₁ … yₜ₋₁")
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
        d.box(xd, y0 + 0.55, "causal self-attention (target so far)\nmask: causal (it hides the target padding too)",
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
            raise AssertionError(_("(vocab_size, d_model, d_ff, n_layers) = {args}: expected {want:,}, got {got!r}. "
                                   "Hints: every Linear has a bias; a decoder layer has two attentions and three "
                                   "norms; the embedding is counted once; both stacks end with a LayerNorm.")
                                 .format(args=args, want=want, got=got))
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
        raise AssertionError(_("weights should have shape (B, H, T, S) = (2, 3, 5, 7), got {shape}")
                             .format(shape=tuple(got.shape)))
    if not torch.allclose(got, want, atol=1e-5):
        raise AssertionError(_("values differ. Hints: queries from y, keys from memory; scale by sqrt(D) with "
                               "D = C // H; padding (keep False) gets -inf before the softmax over S."))
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
    box = widgets.Text(value=sentence, description=_("sentence"), layout=widgets.Layout(width="95%"))
    layer = widgets.Dropdown(options=[(_("layer {n}").format(n=i + 1), i) for i in range(cfg.n_layers)],
                             value=cfg.n_layers - 1, description=_("layer"))
    head = widgets.Dropdown(options=[(_("head {n}").format(n=i + 1), i) for i in range(cfg.n_heads)], value=0,
                            description=_("head"))
    out, picture = widgets.HTML(), widgets.HTML()
    state = {}

    def draw_map(_change=None):
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

    def translate(_change=None):
        words, _skipped = _source_words(task, box.value)
        if not words or len(words) > cfg.context_len:
            state["shown"] = None
            out.value = _("Type a sentence of the toy language (1 to {ctx} known words).").format(ctx=cfg.context_len)
        else:
            shown = state["shown"] = translate_words(model, task, box.value)
            skipped = ("<br>" + _("Not in the vocabulary, skipped: {list}").format(
                list=html.escape(" ".join(shown["skipped"]))) if shown["skipped"] else "")
            lines = _("source:      {source}\ntranslation: {output}").format(
                source=html.escape(" ".join(shown["source"])), output=html.escape(" ".join(shown["output"])))
            out.value = f'<pre style="margin:0">{lines}</pre>{skipped}'
        draw_map()

    box.observe(translate, names="value")
    layer.observe(draw_map, names="value")
    head.observe(draw_map, names="value")
    translate()
    section = widgets.VBox([box, out, widgets.HBox([layer, head]), picture])
    section.translate = translate
    return section


# ---- the measurements' plumbing: recorded rows read, tables printed, claims asserted, numbers glued ----

def _span(values) -> str:
    """The lowest-highest seed as percentages ("27%–62%"; one number when both ends show alike)."""
    from ..results import value_range

    return value_range(min(values), max(values), "{:.0%}")


def behind_buckets(rec: dict, steps: int) -> list:
    """The length buckets where every attention-RNN seed beats every Transformer seed after `steps` steps, in the
    record `rec` ({(model, steps): {bucket: [exact match per seed]}}, recorded_race()). Chapter 8, exercise 7."""
    from ..tasks import LENGTH_BUCKETS

    attn, tf = rec["attention RNN", steps], rec["Transformer", steps]
    return [b for b in LENGTH_BUCKETS if min(attn[b]) > max(tf[b])]


def check_behind_buckets(fn) -> bool:
    """Self-check for the chapter 8 exercise: fn(rec, steps) -> the buckets where every attention-RNN seed beats every
    Transformer seed. Tried on the record at 200 and 500 steps, and on a made-up record where the seeds' means and
    their ranges disagree."""
    from ..tasks import LENGTH_BUCKETS

    b = LENGTH_BUCKETS
    made_up = {("attention RNN", 1): {b[0]: [0.5, 0.5], b[1]: [0.5, 0.9], b[2]: [0.8, 0.9]},
               ("Transformer", 1): {b[0]: [0.5, 0.5], b[1]: [0.6, 0.7], b[2]: [0.1, 0.2]}}
    for model in ("attention RNN", "Transformer"):   # the other buckets: level
        made_up[model, 1].update({k: [1.0, 1.0] for k in b[3:]})
    cases = [(recorded_race(show=False), 200), (recorded_race(show=False), 500), (made_up, 1)]
    for rec, steps in cases:
        want, got = behind_buckets(rec, steps), returned(fn(rec, steps))
        if [tuple(x) for x in got] != want:
            raise AssertionError(_("steps={steps}: expected the buckets {want}, got {got!r}. Hints: compare the "
                                   "attention RNN's lowest seed with the Transformer's highest (every seed beats "
                                   "every seed), strictly; keep the buckets in LENGTH_BUCKETS' order.")
                                 .format(steps=steps, want=want, got=got))
    print("Correct: your buckets match the record's at 200 and 500 steps, and the made-up case.")
    return True


def recorded_race(show: bool = True) -> dict:
    """benchmarks/seq2seq_three.py's record, {(model, steps): {bucket: [exact match, one per seed]}}. With `show`,
    the table is printed, its claims asserted and its numbers glued (the figure: race_figure)."""
    from ..results import provenance, read_rows
    from ..tasks import LENGTH_BUCKETS
    from ..utils import claim, glue

    rows, run = read_rows("seq2seq_three"), provenance("seq2seq_three")
    rec = {}
    for r in rows:
        rec.setdefault((r["model"], int(r["steps"])), {}).setdefault((int(r["lo"]), int(r["hi"])), []).append(
            float(r["exact"]))
    if not show:
        return rec
    n_seeds, longest = len(run["seeds"]), LENGTH_BUCKETS[-1]
    claim(all(len(v) == n_seeds for acc in rec.values() for v in acc.values()), "one row per seed, bucket and run")
    print(f"recorded by {run['script']}: {n_seeds} seeds per row, {run['wall_s'] / 60:.0f} min on one thread")
    print(f"of {run['cpu']}; exact match on 200 held-out sentences per bucket, lowest-highest seed")
    print(f"{'model':14s}{'steps':>6s} | " + " | ".join(f"{lo}-{hi}".center(9) for lo, hi in LENGTH_BUCKETS))
    for (model, steps), acc in rec.items():
        print(f"{model:14s}{steps:6d} | " + " | ".join(f"{_span(acc[b]):>9s}" for b in LENGTH_BUCKETS))
    for model, key, steps in (("RNN", "rnn", 500), ("attention RNN", "attn", 500), ("Transformer", "tf", 500),
                              ("Transformer", "tf", 1200)):
        glue(f"ch8_rec_{key}{steps}_long", _span(rec[model, steps][longest]))
    mid = LENGTH_BUCKETS[2]
    glue("ch8_rec_attn200_mid", _span(rec["attention RNN", 200][mid]))
    glue("ch8_rec_tf200_mid", _span(rec["Transformer", 200][mid]))
    worst = min(min(v) for v in rec["Transformer", 1200].values())
    glue("ch8_rec_tf1200_min", f"{worst:.1%}")
    glue("ch8_rec_seeds", n_seeds)
    glue("ch8_rec_minutes", f"{run['wall_s'] / 60:.0f}")
    glue("ch8_rec_cpu", run["cpu"])
    for steps in (200, 500):   # fixed data: the prose cites one run of buckets up to the longest
        wins = behind_buckets(rec, steps)
        claim(bool(wins) and wins == list(LENGTH_BUCKETS[-len(wins):]), f"behind on a tail of buckets: {wins}")
        glue(f"ch8_rec_wins{steps}", f"{wins[0][0]}–{longest[1]}")
    claim(min(rec["Transformer", 1200][longest]) > max(rec["attention RNN", 500][longest]),
          "every 1,200-step Transformer seed beats every 500-step attention-RNN seed on the longest sentences")
    gap = min(min(rec[m, 500][b]) - max(rec["RNN", 500][b]) for m in ("attention RNN", "Transformer")
              for b in LENGTH_BUCKETS[1:])
    claim(gap > 0.25, f"beyond 7 words, every seed of both leaves every plain-RNN seed far behind (by > 0.25): {gap}")
    return rec


def race_figure(rec: dict) -> Figure:
    """The recorded race: exact match by length, one panel per budget, a thin line per seed, a band over the seeds;
    the last panel repeats the attention RNN's 500-step seeds (dashed), the bar the Transformer must reach."""
    from ..plots import new_figure
    from ..tasks import LENGTH_BUCKETS

    budgets = sorted({s for _, s in rec})
    models = list(dict.fromkeys(m for m, _ in rec))
    mids = [(lo + hi) / 2 for lo, hi in LENGTH_BUCKETS]
    colors = dict(zip(models, ["tab:red", "tab:blue", "tab:green"]))
    fig, axes = new_figure(figsize=(10, 3.3), ncols=len(budgets), sharey=True)
    for ax, steps in zip(axes, budgets):
        for model in models:
            if (model, steps) not in rec:
                continue
            acc = rec[model, steps]
            ax.fill_between(mids, [min(acc[b]) for b in LENGTH_BUCKETS], [max(acc[b]) for b in LENGTH_BUCKETS],
                            color=colors[model], alpha=0.2)
            for one_seed in zip(*(acc[b] for b in LENGTH_BUCKETS)):
                ax.plot(mids, one_seed, color=colors[model], lw=0.9)
            ax.plot([], [], color=colors[model], label=model)
        ax.set(title=f"{steps:,} steps ({64 * steps:,} sentences)", xlabel="source length (bucket middle)",
               ylim=(0, 1.03))
        ax.grid(alpha=0.3)
    for one_seed in zip(*(rec["attention RNN", 500][b] for b in LENGTH_BUCKETS)):
        axes[-1].plot(mids, one_seed, color=colors["attention RNN"], lw=0.9, ls="--")
    axes[-1].plot([], [], color=colors["attention RNN"], ls="--", label="attention RNN, 500 steps")
    axes[-1].legend(fontsize=8, loc="lower left")
    for ax in axes:   # every panel's alt text names its y axis; only the first panel shows it (shared)
        ax.set_ylabel("exact match, held-out")
        ax.yaxis.label.set_visible(ax is axes[0])
    axes[0].legend(fontsize=8, loc="upper right")
    return fig


def chapter3_rnns(task) -> dict:
    """The two RNN translators as Chapter 3 last ran them (its glued values, book.data.recorded_glue): {"acc":
    {bucket: (exact without attention, with)}, "secs": (train s, train s), "params": {kind: n}, "steps": n}."""
    from ..data import recorded_glue
    from ..seq2seq import Seq2SeqConfig, build_seq2seq
    from ..tasks import LENGTH_BUCKETS
    from ..utils import claim, count_params, glue

    ch3 = recorded_glue("03_bahdanau_attention")
    acc = ch3["ch3_exact_by_length"]
    claim(set(acc) == set(LENGTH_BUCKETS) and all(0 <= a <= 1 for pair in acc.values() for a in pair),
          f"Chapter 3's glued exact match covers every bucket: {acc}")
    params = {kind: count_params(build_seq2seq(Seq2SeqConfig(len(task.src_vocab), len(task.tgt_vocab),
                                                             attention=kind))) for kind in ("none", "additive")}
    glue("ch8_rnn_steps", ch3["ch3_steps"])
    return {"acc": acc, "secs": (ch3["ch3_train_s"]["no attention"], ch3["ch3_train_s"]["additive"]),
            "params": params, "steps": ch3["ch3_steps"]}


def check_and_glue_live_race(rnn: dict, tf_eq_acc: dict, tf_acc: dict, tf_params: int, steps: int, tf_secs: float,
              rec: dict) -> None:
    """The live race, printed: Chapter 3's RNNs (chapter3_rnns) against this notebook's Transformer after the RNNs'
    steps (tf_eq_acc) and after `steps` (tf_acc); its claims asserted, its numbers glued, and the sentence placing
    the live 500-step run among the recorded seeds glued whole."""
    from ..tasks import LENGTH_BUCKETS
    from ..utils import claim, glue

    acc, secs, longest = rnn["acc"], rnn["secs"], LENGTH_BUCKETS[-1]
    live = {b: [acc[b][0], acc[b][1], tf_eq_acc[b][0], tf_acc[b][0]] for b in LENGTH_BUCKETS}
    names = ["RNN (Ch. 2)", "+ attention", "Transformer", "Transformer"]
    print("exact match, 200 held-out sentences per bucket; the RNNs as Chapter 3 last ran them")
    print(f"{'length':8s}| " + " | ".join(f"{n:>13s}" for n in names))
    for b in LENGTH_BUCKETS:
        print(f"{b[0]:2d}-{b[1]:<5d}| " + " | ".join(f"{v:13.3f}" for v in live[b]))
    print(f"{'params':8s}| " + " | ".join(f"{p:>13,}" for p in [*rnn["params"].values(), tf_params, tf_params]))
    print(f"{'steps':8s}| " + " | ".join(f"{s:>13,}" for s in [rnn["steps"]] * 3 + [steps]))
    print(f"{'train s':8s}| {secs[0]:>13.0f} | {secs[1]:>13.0f} | {'':>13s} | {tf_secs:>13.0f}")
    rec_tf, rec_attn = rec["Transformer", 500][longest], rec["attention RNN", 500][longest]
    ahead = min(rec_attn) > max(rec_tf)
    long_live = live[longest]
    claim((long_live[1] > long_live[2]) == ahead,
          f"at equal data the live run should point the way the recorded seeds do on {longest}: live attention RNN "
          f"{long_live[1]:.3f} vs Transformer {long_live[2]:.3f}; recorded attention RNN {_span(rec_attn)}, "
          f"Transformer {_span(rec_tf)}")
    claim(min(tf_acc[b][0] - acc[b][1] for b in LENGTH_BUCKETS) >= -0.03,
          f"after {steps} steps level with the attention RNN (within 3 points) in every bucket: {tf_acc}")
    claim(all(tf_eq_acc[b][0] > acc[b][0] for b in LENGTH_BUCKETS[1:]),
          f"at equal data better than the plain RNN from 8 words on: {tf_eq_acc}")
    glue("ch8_plain_long", f"{acc[longest][0]:.0%}", tol=5, spread="glue_spread", margin=2)
    glue("ch8_attn_long", f"{acc[longest][1]:.1%}", tol=5, spread="glue_spread", margin=2)
    glue("ch8_tf_eq_long", f"{tf_eq_acc[longest][0]:.1%}", tol=25, spread="glue_spread", margin=2)
    glue("ch8_tf_long", f"{tf_acc[longest][0]:.1%}", tol=15, spread="glue_spread", margin=2)
    glue("ch8_tf_min", f"{min(a[0] for a in tf_acc.values()):.1%}", tol=15, spread="glue_spread", margin=2)
    from ..results import provenance
    from ..timing import cpu_model
    glue("ch8_live_vs_record", live_vs_record_sentence(tf_eq_acc[longest][0], rec_tf, rec_tf[0],
                                                       provenance("seq2seq_three")["cpu"], seed0_reruns(), cpu_model()),
         tol="any")
    glue("ch8_tf_secs", f"{tf_secs:.0f}", timing=True)
    glue("ch8_attn_secs", f"{secs[1]:.0f}", timing=True)
    glue("ch8_tf_steps", steps)
    glue("ch8_tf_ms", f"{1000 * tf_secs / steps:.0f}", timing=True)
    glue("ch8_attn_ms", f"{1000 * secs[1] / rnn['steps']:.0f}", timing=True)
    glue("ch8_step_ratio", f"{steps / rnn['steps']:.1f}")


def seed0_reruns() -> dict:
    """The record's script re-run with seed 0 on other processors (book/results/seq2seq_seed0_*.csv):
    {cpu model: the 500-step Transformer's exact match on the longest sentences}."""
    from ..results import RESULTS_DIR, provenance, read_rows
    from ..tasks import LENGTH_BUCKETS

    lo = LENGTH_BUCKETS[-1][0]
    out = {}
    for path in sorted(RESULTS_DIR.glob("seq2seq_seed0_*.csv")):
        rows = [r for r in read_rows(path.stem) if r["model"] == "Transformer" and int(r["steps"]) == 500
                and int(r["lo"]) == lo and int(r["seed"]) == 0]
        if len(rows) != 1:
            raise ValueError(f"{path.name}: expected one 500-step Transformer row of seed 0 at {lo} words")
        out[provenance(path.stem)["cpu"]] = float(rows[0]["exact"])
    return out


def live_vs_record_sentence(live: float, recorded: list, seed0: float, record_cpu: str = "",
                            reruns: "dict | None" = None, here: str = "") -> str:
    """Where the live 500-step Transformer's exact match on the longest sentences falls among the recorded seeds
    (seed0: the recorded seed 0's, on record_cpu), as one sentence (inside their range, or outside it and why it can
    be). reruns: {cpu: seed 0's value from the record's script run there} (seed0_reruns); here: this machine's CPU."""
    span = _span(recorded)
    if min(recorded) <= live <= max(recorded):
        return f"That lies inside the range of the recorded seeds ({span})"
    side = "below" if live < min(recorded) else "above"
    said = f"That lies {side} all {len(recorded)} recorded seeds ({span}), which do not bound every other seed"
    same = (reruns or {}).get(here)
    if same is not None and abs(same - live) < 5e-4:
        return (f"{said}. The cause is the processor: the record's own script, run with the same seed on this "
                f"page's processor ({here}), gives exactly {live:.1%}, where the record's ({record_cpu}) gave "
                f"{seed0:.1%}. Their vector instructions round differently, and 500 steps of training carry that "
                "into what is in effect another seed")
    return (f"{said}. The live run uses the same code, seed and thread count as the record's seed 0 ({seed0:.1%}), "
            "but on another processor the arithmetic rounds differently, and a few hundred steps of training carry "
            "such differences into another run, in effect another seed"
            + "".join(f"; on {cpu} the record's script gives this seed {v:.1%}" for cpu, v in (reruns or {}).items()))


def count_base_model(model: Transformer) -> None:
    """The paper's base model counted part by part, then the variants of the count that might explain the paper's
    65 M (none does), printed and asserted; the numbers the chapter cites glued."""
    from ..utils import claim, count_params, glue

    c = model.config
    parts = {"shared embedding = output layer": count_params(model.src_emb),
             "encoder, 6 layers": count_params(model.encoder), "decoder, 6 layers": count_params(model.decoder),
             "final LayerNorms": count_params(model.ln_enc) + count_params(model.ln_dec)}
    for name, k in parts.items():
        print(f"{name:32s} {k:>12,}")
    total = count_params(model)
    claim(total == sum(parts.values()), f"the parts add up: {parts} vs {total}")
    V, C = c.tgt_vocab_size, c.d_model
    untied = total + V * C
    print(f"{'total':32s} {total:>12,}   (the paper: 65 M; untied output layer: {untied / 1e6:.1f} M)")
    attn_bias = sum(p.numel() for name, p in model.named_parameters() if "attn" in name and name.endswith("bias"))
    variants = {"+ learned positions, 512 x C per stack": 2 * c.context_len * C,
                "+ a bias on the output layer": V,
                "- the attention projections' biases": -attn_bias,
                "EN-FR's 32,000-token vocabulary": (32_000 - V) * C,
                "+ separate target embedding (or untied)": V * C}
    print(f"\n{'variant of the count':40s} {'total':>12s}  within rounding of 65 M?")   # 65 M: 64.5-65.5 M
    for name, extra in variants.items():
        print(f"{name:40s} {total + extra:>12,}  {'yes' if abs(total + extra - 65e6) < 0.5e6 else 'no'}")
    claim(not any(abs(total + extra - 65e6) < 0.5e6 for extra in variants.values()), "no variant explains the gap")
    vocab_for_65 = V + (65e6 - total) / C                    # the shared vocabulary that would give 65.0 M exactly
    print(f"a shared vocabulary of {vocab_for_65:,.0f} tokens (not about 37,000) would give 65.0 M")
    glue("ch8_base_gap", f"{(65e6 - total) / 1e6:.1f} M")
    glue("ch8_vocab_for_65", f"{round(vocab_for_65, -2):,.0f}")
    glue("ch8_base_params", f"{total / 1e6:.1f} M")
    glue("ch8_base_untied", f"{untied / 1e6:.1f} M")
    glue("ch8_emb_share", f"{parts['shared embedding = output layer'] / total:.0%}")


def check_and_glue_decoding(model: Transformer, src: torch.Tensor, max_new_tokens: int, ways: dict) -> None:
    """Greedy decoding of `src` in each of `ways` ({name: greedy_translate keywords}): the translations compared,
    the FLOPs counted and the time measured in turns, printed; the savings asserted and glued."""
    from ..generate import greedy_translate
    from ..timing import count_flops, time_in_turns
    from ..utils import claim, glue

    runs = {name: (lambda kw=kw: greedy_translate(model, src, max_new_tokens, **kw)) for name, kw in ways.items()}
    outs = [run() for run in runs.values()]
    if not all(torch.equal(o, outs[-1]) for o in outs):
        raise AssertionError("the ways of decoding should write the same translations")
    with torch.no_grad():
        flops = {name: count_flops(run) for name, run in runs.items()}                     # the work, counted
        secs = dict(zip(runs, time_in_turns(list(runs.values()), min_run_time=0.5)))       # the time, here
    print(f"greedy decoding of {src.shape[0]} sentences of 28-32 words, the same translations every way")
    for name in runs:
        print(f"{name:32s} {flops[name] / 1e9:6.2f} GFLOPs | {1000 * secs[name]:5.0f} ms on this machine")
    (a, b, c) = list(runs)
    reuse_flops, cache_flops = flops[a] / flops[b], flops[b] / flops[c]
    claim(reuse_flops > 1.5 and cache_flops > 1.5,          # counted; only a smoke run's few steps could break it
          f"encoding once and the KV cache should each remove much repeated work: FLOPs / {reuse_flops:.1f} and / "
          f"{cache_flops:.1f}")
    reuse, cached = secs[a] / secs[b], secs[b] / secs[c]
    # counted; decoding stops where the trained model writes its last EOS, which may move between CPUs
    glue("ch8_reuse_flops", f"{reuse_flops:.1f}", tol=0.3, spread="glue_spread", margin=2)
    glue("ch8_cache_flops", f"{cache_flops:.1f}", tol=0.3, spread="glue_spread", margin=2)
    glue("ch8_reuse_speedup", f"{reuse:.1f}", timing=True)
    glue("ch8_cache_speedup", f"{cached:.1f}", timing=True)
    glue("ch8_total_speedup", f"{reuse * cached:.1f}", timing=True)


def check_and_glue_exposure(forced: dict, free_token: dict, free_exact: dict, longer: list, eq: tuple) -> None:
    """Token accuracy teacher-forced and free-running, and free-running exact match, per bucket (the `longer` ones
    beyond training), printed; the claims asserted and the numbers glued. eq: (teacher-forced token, free-running
    token) of the 500-step model on the longest trained bucket."""
    from ..tasks import LENGTH_BUCKETS
    from ..utils import claim, glue

    print(f"{'length':8s}| {'teacher forcing: token':>22s} | {'free running: token':>19s} | "
          f"{'free running: exact':>19s}")
    for b in forced:
        print(f"{b[0]:2d}-{b[1]:<5d}| {forced[b]:22.3f} | {free_token[b]:19.3f} | {free_exact[b]:19.3f}"
              + ("  <- longer" if b in longer else ""))
    claim(all(forced[b] >= free_token[b] - 1e-6 for b in forced),
          f"teacher-forced token accuracy is never below free-running token accuracy: {forced} vs {free_token}")
    far, longest = longer[0], LENGTH_BUCKETS[-1]
    claim(forced[far] - free_token[far] > 0.01 and free_exact[far] < 0.5,
          f"beyond the trained lengths, free running loses words that teacher forcing keeps: {forced} vs {free_token}")
    eq_forced, eq_free = eq
    print(f"500-step model, {longest[0]}-{longest[1]} words: token accuracy {eq_forced:.3f} teacher-forced, "
          f"{eq_free:.3f} free-running")
    claim(eq_forced - eq_free > 0.01, f"inside the trained lengths, free running loses words that teacher forcing "
          f"keeps: {eq_forced:.3f} vs {eq_free:.3f}")
    glue("ch8_eq_forced_long", f"{eq_forced:.1%}", tol=5, spread="glue_spread", margin=2)
    glue("ch8_eq_free_long", f"{eq_free:.1%}", tol=10, spread="glue_spread", margin=2)
    glue("ch8_tf_token_long", f"{forced[longest]:.1%}", tol=2, spread="glue_spread", margin=2)
    glue("ch8_fr_exact_long", f"{free_exact[longest]:.1%}", tol=15, spread="glue_spread", margin=2)
    glue("ch8_tf_token_far", f"{forced[far]:.1%}", tol=8, spread="glue_spread", margin=2)
    glue("ch8_fr_token_far", f"{free_token[far]:.1%}", tol=10, spread="glue_spread", margin=2)
    glue("ch8_fr_exact_far", f"{free_exact[far]:.1%}", tol=25, spread="glue_spread", margin=2)


def check_cross_attention_slider(att: torch.Tensor, words: list, out_words: list, truth: list):
    """A slider over every layer and head (and the last layer's mean) of one sentence's cross-attention `att`
    (L, H, T_out, S), red squares on the true alignment `truth`; the head that follows it best named, asserted and
    glued."""
    from ..plots import heatmap, new_figure
    from ..utils import claim, glue
    from ..widgets import slider

    frames = [f"layer {l + 1}, head {h + 1}" for l in range(att.shape[0]) for h in range(att.shape[1])]
    frames.append(f"layer {att.shape[0]}, mean of heads")

    def draw_cross(name):
        l, h = (att.shape[0] - 1, None) if "mean" in name else (int(name[6]) - 1, int(name.split()[-1]) - 1)
        w = att[l].mean(0) if h is None else att[l, h]
        fig, ax = new_figure(figsize=(7, 6))
        heatmap(w, x_labels=words, y_labels=out_words, ax=ax, xlabel="source word (encoder)",
                ylabel="output word (decoder step)", title=f"Cross-attention, {name}", vmin=0, vmax=1)
        rows = range(min(len(truth), len(out_words)))
        ax.scatter([truth[t] for t in rows], list(rows), marker="s", s=60, facecolors="none", edgecolors="red")
        return fig

    m = min(len(truth), att.shape[2])
    hits = [(att[l, h, :m, :].argmax(-1) == torch.tensor(truth[:m])).float().mean().item()
            for l in range(att.shape[0]) for h in range(att.shape[1])]
    best = max(range(len(hits)), key=hits.__getitem__)
    print(f"best head: {frames[best]}, its largest weight is on the true source word for {hits[best]:.0%} of words")
    claim(hits[best] >= 0.4, f"some head follows the alignment (chance: 1 in {len(words)}): {dict(zip(frames, hits))}")
    glue("ch8_best_head", frames[best], tol="any")
    glue("ch8_best_head_hit", f"{hits[best]:.0%}", tol="any")
    return slider(frames, draw_cross, description="layer / head", default=frames[best])


def check_step_replay(model: Transformer, task, src: torch.Tensor):
    """One sentence decoded greedily, replayed step by step: a slider whose frame t shows the last layer's
    cross-attention (heads averaged) of the words written so far, the newest row boxed; only written rows labelled."""
    from matplotlib.patches import Rectangle

    from ..generate import greedy_translate
    from ..plots import heatmap, new_figure
    from ..utils import claim
    from ..widgets import slider

    words = task.decode(src, "src")
    device = next(model.parameters()).device
    ids, att = greedy_translate(model, src[None].to(device), len(words) + 5, need_weights=True)
    w = att[-1, 0].mean(0).cpu()                                   # last layer, heads averaged: (T_out, S)
    out = [task.tgt_vocab[i] for i in ids[0].tolist()]
    truth = task.alignment(words)

    def draw_step(t):
        shown = w.clone()
        shown[t:] = float("nan")                                   # not written yet at step t
        looked = words[int(w[t - 1].argmax())]
        fig, ax = new_figure(figsize=(6, 4.6))
        heatmap(shown, x_labels=words, y_labels=out[:t] + [""] * (len(out) - t), ax=ax, vmin=0, vmax=1,
                xlabel="source word (encoder)", ylabel="output so far",
                title=f"step {t}: writes '{out[t - 1]}', looks most at '{looked}'")
        ax.set_yticks(range(t), out[:t])                           # no tick marks on the rows not yet written
        ax.add_patch(Rectangle((-0.5, t - 1.5), len(words), 1, fill=False, edgecolor="black", lw=2))
        return fig

    print("source:", " ".join(words))
    print("output:", " ".join(out))
    hits = sum(int(w[t].argmax()) == truth[t] for t in range(len(truth)))
    print(f"the most-attended source word is the aligned one at {hits} of {len(truth)} steps (heads averaged)")
    claim(out[:-1] == task.translate(words), f"the short example is translated right: {out}")
    return slider(list(range(1, len(out) + 1)), draw_step, description="decoding step", default=len(out))


def post_norm_sentence(post: dict, pre: dict, recorded_pre: list) -> str:
    """Exercise 6's verdict, one sentence: Post-Norm against Pre-Norm on the longest sentences, one seed each, set
    against the spread of the recorded Pre-Norm seeds at the same budget (recorded_pre)."""
    from ..tasks import LENGTH_BUCKETS

    longest = LENGTH_BUCKETS[-1]
    a, b, span = post[longest][0], pre[longest][0], _span(recorded_pre)
    said = f"On the longest sentences Post-Norm got {a:.1%} and Pre-Norm {b:.1%}, one seed each"
    if abs(a - b) <= max(recorded_pre) - min(recorded_pre):
        return (f"{said}: a gap smaller than the spread of the recorded Pre-Norm seeds alone ({span}), so it says "
                "nothing about which norm is better here")
    return (f"{said}: Post-Norm is {'behind' if a < b else 'ahead'} by more than the spread of the recorded Pre-Norm "
            f"seeds ({span}), a sign worth checking with more seeds")
