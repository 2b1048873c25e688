"""The live GPT in a kernel: type, see the next character's distribution, write, look at attention. Chapter 7.

The website runs chapter 7's exported model in the browser (`_ext/live_gpt.js`); in Colab and JupyterLab
`live_gpt(model, tokenizer)` shows the same controls on the kernel's live model, with ipywidgets 7 or 8 (plain
Textarea, sliders, dropdowns, a button, an HTML and an Image widget: nothing that needs version 8's Stack).
It samples as the page does and as `book.generate.generate` does: temperature, then top-k; temperature 0 is
greedy. Built on `book.widgets` (its bars) and `book.plots` (the heatmap); like the sliders there it shows
a short, stable text form. Its labels and messages speak the reader's language (book.language: Chinese with
BOOK_LANG=zh, the words of _ext/live_gpt.js's ZH table); the heatmap itself, like every figure, stays English.
"""
from __future__ import annotations

import html
import ipywidgets as widgets
import torch

from .checks import positive_int
from .generate import context_len_of, generate, next_token_probs
from .language import _
from .plots import display_width, new_figure, to_png
from .widgets import bars_html, frame_html

__all__ = ["live_gpt", "LiveGPT"]


def _shown(c: str) -> str:
    return {" ": "␣", "\n": "↵"}.get(c, c)


class LiveGPT(widgets.VBox):
    """The live section's widgets; `refresh()` reruns the model on the text, `write()` appends sampled text."""

    def __init__(self, model, tokenizer, prompt: str, n_chars: int, seed: int):
        self.model, self.tok, self.n_chars, self.seed = model, tokenizer, n_chars, seed
        self.ctx = context_len_of(model)
        cfg = model.config
        self.text = widgets.Textarea(value=prompt, rows=4, description=_("text"),
                                     layout=widgets.Layout(width="95%"))
        self.temperature = widgets.FloatSlider(value=0.8, min=0.0, max=2.0, step=0.05, description=_("temperature"))
        self.top_k = widgets.IntSlider(value=tokenizer.vocab_size, min=1, max=tokenizer.vocab_size,
                                       description=_("top-k"))
        self.button = widgets.Button(description=_("write {n} characters").format(n=n_chars))
        self.layer = widgets.Dropdown(options=[(_("layer {n}").format(n=i + 1), i) for i in range(cfg.n_layers)],
                                      value=0, description=_("layer"))
        self.head = widgets.Dropdown(options=[(_("head {n}").format(n=i + 1), i) for i in range(cfg.n_heads)],
                                     value=0, description=_("head"))
        self.bars = widgets.HTML()
        self.note = widgets.HTML()
        self.heatmap = widgets.HTML()      # the map as <img alt=...> (book.widgets.frame_html): screen readers too
        self.writes = 0
        self._maps, self._chars = None, []
        super().__init__([self.text, widgets.HBox([widgets.VBox([self.temperature, self.top_k, self.button,
                                                                 self.note]), self.bars]),
                          widgets.HBox([self.layer, self.head]), self.heatmap])
        self.text.observe(lambda _: self.refresh(), names="value")
        for w in (self.temperature, self.top_k):
            w.observe(lambda _: self._draw_bars(), names="value")
        for w in (self.layer, self.head):
            w.observe(lambda _: self._draw_heatmap(), names="value")
        self.button.on_click(lambda _: self.write())
        self.refresh()

    def __repr__(self) -> str:
        return "<live GPT: text box, bars, write button, attention heatmap>"   # the same at every scale (nbval)

    def ids(self) -> list:
        """The text's token ids (its last context_len known characters); unknown characters are skipped."""
        known = [c for c in self.text.value if c in self.tok.stoi]
        unknown = sorted(set(self.text.value) - self.tok.stoi.keys())
        self.note.value = (_("Not in the vocabulary, skipped: {list}").format(list=html.escape(" ".join(unknown)))
                           if unknown else "")
        return self.tok.encode("".join(known))[-self.ctx:]

    @torch.no_grad()
    def refresh(self) -> None:
        ids = self.ids()
        if not ids:
            self._last, self._maps = None, None
            self.bars.value = _("Type something.")
            self._draw_heatmap()
            return
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        try:
            logits, maps = self.model(torch.tensor([ids], device=device), need_weights=True)
        finally:
            self.model.train(was_training)
        self._last = logits[0, -1].float().cpu()
        self._maps = torch.stack(maps)[:, 0].float().cpu()   # (L, H, T, T)
        self._chars = [self.tok.itos[i] for i in ids]
        self._draw_bars()
        self._draw_heatmap()

    def probs(self) -> torch.Tensor:
        """What writing draws the next character from, under the sliders' setting: (V,)."""
        top_k = self.top_k.value if self.top_k.value < self.tok.vocab_size else None
        return next_token_probs(self._last, temperature=self.temperature.value, top_k=top_k)

    def _draw_bars(self) -> None:
        if getattr(self, "_last", None) is None:
            return
        base, probs = self._last.softmax(-1), self.probs()
        order = base.argsort(descending=True)[:12].tolist()
        self.bars.value = bars_html([_shown(self.tok.itos[i]) for i in order], probs[order].tolist(),
                                     outline=base[order].tolist())

    def _draw_heatmap(self) -> None:
        if self._maps is None:
            self.heatmap.value = ""
            return
        weights = self._maps[self.layer.value, self.head.value]
        T = weights.shape[0]
        fig, ax = new_figure(figsize=(min(6.0, 1.5 + 0.09 * T), min(6.0, 1.5 + 0.09 * T)))
        ax.imshow(weights.sqrt(), cmap="Blues", vmin=0, vmax=1)
        labels = [_shown(c) for c in self._chars]
        ax.set_xticks(range(T), labels, fontsize=6, family="monospace")
        ax.set_yticks(range(T), labels, fontsize=6, family="monospace")
        ax.set(xlabel="character read", ylabel="character reading",
               title=f"layer {self.layer.value + 1}, head {self.head.value + 1} (colour: sqrt of the weight)")
        best = weights.max(dim=-1)
        rows = [_("{row!r} puts {weight:.2f} on {col!r}").format(row=labels[i], weight=best.values[i].item(),
                                                                 col=labels[best.indices[i].item()])
                for i in range(max(0, T - 8), T)]                      # the weights, not the colours' square roots
        alt = _("attention of layer {layer}, head {head} over {T} characters, the heaviest weight of each of the "
                "last {rows} rows: {heaviest}").format(layer=self.layer.value + 1, head=self.head.value + 1, T=T,
                                                       rows=len(rows), heaviest=_("; ").join(rows))
        self.heatmap.value = frame_html(to_png(fig, dpi=100), display_width(fig), alt)

    def write(self) -> str:
        """Append n_chars sampled characters (book.generate.generate, seeded) to the text; return them."""
        ids = self.ids()
        if not ids:
            self.note.value = _("type at least one known character first")
            return ""
        self.writes += 1
        device = next(self.model.parameters()).device
        gen = torch.Generator(device=device).manual_seed(self.seed + self.writes)
        top_k = self.top_k.value if self.top_k.value < self.tok.vocab_size else None
        out = generate(self.model, torch.tensor([ids], device=device), self.n_chars,
                       temperature=self.temperature.value, top_k=top_k, generator=gen)
        added = self.tok.decode(out[0, len(ids):].tolist())
        self.text.value = self.text.value + added      # observe() reruns the model on the new text
        return added


def live_gpt(model, tokenizer, prompt: str = "ROMEO:\nBut soft, what light ", *, n_chars: int = 80,
             seed: int = 0) -> LiveGPT:
    """The live section for a kernel: a text box, the next character's distribution as bars, a "write" button
    with temperature and top-k sliders (temperature 0 = greedy), and the attention heatmap of the text with
    layer and head selectors. `model`: a book.gpt.GPT (anything taking need_weights=True); `tokenizer`: its
    book.tokenizers.CharTokenizer."""
    if not callable(model) or not hasattr(model, "config"):
        raise TypeError(f"model must be a book.gpt.GPT, got {type(model).__name__}")
    if getattr(tokenizer, "vocab_size", None) != model.config.vocab_size or not hasattr(tokenizer, "stoi"):
        raise ValueError(f"tokenizer must be the model's CharTokenizer with vocab_size={model.config.vocab_size}")
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    positive_int(n_chars=n_chars)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {seed!r}")
    return LiveGPT(model, tokenizer, prompt, n_chars, seed)
