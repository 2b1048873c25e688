"""One architecture, three ways to pre-train it, and what each result can do. Chapter 9.

The three families of the book, trained on the same windows of characters with their own objective
(book.objectives):
  "bert"  an encoder (book.bert.BERT) with masked language modelling: the loss at the 15 % chosen positions;
  "gpt"   a decoder (book.gpt.GPT) with causal language modelling: the loss at every position;
  "t5"    an encoder-decoder (book.transformer.Transformer): the encoder reads the window with each dropped span
          replaced by a sentinel, the decoder writes the spans.
Then: fill a one-character blank (fill_blank), score a continuation (continuation_bits), write text (write),
(chapter 9's fine-tuning on instructions and its probes are in book.chapters.ch09).
StreamTranslator puts a GPT on Chapter 8's toy translation, source and target in one stream.
Shape legend (batch first): B batch, T window length (context_len), P prompt length, V vocab (PretrainVocab.size).
"""
from __future__ import annotations

import math
from typing import Callable, List, Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from .data import get_batch
from .decoding import decode_loop
from .generate import context_len_of, sample_next
from .objectives import IGNORE, PretrainVocab, mask_tokens, span_corrupt
from .checks import optional_positive_int, positive_int, tensor_dims, token_ids
from .optim import build_optimizer
from .train import History, fit
from .utils import step_budget

__all__ = ["FAMILIES", "family_configs", "build", "pretrain", "quote_windows", "fill_blank",
           "continuation_bits", "write", "answer",
           "StreamTranslator", "passage_bits"]

FAMILIES = ("bert", "gpt", "t5")


def family_configs(vocab_size: int, context_len: int = 64, width: int = 96, n_heads: int = 4, n_layers: int = 2):
    """Chapter 9's three models, within 5 % of each other in parameters -> {"BERT", "GPT", "T5": config}.

    BERT and GPT: n_layers layers of `width`; T5: n_layers encoder plus n_layers decoder layers of width * 2 / 3
    (a decoder layer also holds cross-attention), embeddings shared and tied. All three rotate q and k (RoPE);
    T5's cross-attention has no positions.
    """
    from .bert import EncoderConfig
    from .gpt import GPTConfig
    from .transformer import TransformerConfig

    return {"BERT": EncoderConfig(vocab_size, context_len, d_model=width, n_heads=n_heads, n_layers=n_layers,
                                  positions="rope"),
            "GPT": GPTConfig(vocab_size, context_len, d_model=width, n_heads=n_heads, n_layers=n_layers,
                             positions="rope"),
            "T5": TransformerConfig(vocab_size, vocab_size, context_len, d_model=width * 2 // 3, n_heads=n_heads,
                                    n_layers=n_layers, norm="pre", share_embeddings=True, tie_output=True,
                                    pad_id=None, positions="rope")}


def build(name: str, config):
    """The model of family_configs' `name` ("BERT", "GPT" or "T5") from its config."""
    from .bert import BERT
    from .gpt import GPT
    from .transformer import Transformer

    builders = {"BERT": BERT, "GPT": GPT, "T5": Transformer}
    if name not in builders:
        raise ValueError(f"name must be one of {tuple(builders)}, got {name!r}")
    return builders[name](config)


def _check_family(family: str) -> None:
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")


def _lm_ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=IGNORE)


def _objective(model, family: str, windows: torch.Tensor, vocab: PretrainVocab,
               generator: Optional[torch.Generator] = None, loss_fraction: float = 1.0):
    """objective_loss with the count as a tensor (or an int for t5): no host read, for the training loop."""
    _check_family(family)
    if not 0 < loss_fraction <= 1:
        raise ValueError(f"loss_fraction must lie in (0, 1], got {loss_fraction}")
    if loss_fraction < 1 and family != "gpt":
        raise ValueError("loss_fraction is for the gpt family: bert and t5 choose their positions themselves")
    x = windows[:, :-1]
    if family == "gpt":
        y = windows[:, 1:].clone()
        if loss_fraction < 1:
            drop = torch.rand(y.shape, generator=generator, device=y.device) >= loss_fraction
            y[drop] = IGNORE
        return _lm_ce(model(x), y), (y != IGNORE).sum()          # a tensor: pretrain reads it once, at the end
    if family == "bert":
        batch = mask_tokens(x, vocab, generator=generator)
        return _lm_ce(model(batch.inputs), batch.labels), (batch.labels != IGNORE).sum()
    batch = span_corrupt(x, vocab, generator=generator)
    return _lm_ce(model(batch.enc_in, batch.dec_in), batch.dec_out), batch.dec_out.numel()


def pretrain(model, family: str, train_data: torch.Tensor, vocab: PretrainVocab, *, steps: int,
             batch_size: int = 32, context_len: int = 64, lr: float = 8e-3, warmup: int = 30, grad_clip: float = 1.0,
             loss_fraction: float = 1.0, generator: Optional[torch.Generator] = None, device=None,
             eval_fn: Optional[Callable] = None, eval_every: int = 0, progress: bool = True,
             windows_fn: Optional[Callable] = None, stop_after: Optional[int] = None) -> History:
    """Pre-train `model` with its family's objective on random windows of `train_data`; return its History.

    Chapter 7's course recipe: AdamW, linear warmup then cosine decay to lr / 10, gradients clipped. Every family
    reads the same context_len characters a step. History.val holds (step, eval_fn(model)) every eval_every
    steps and at the end (untimed); History.train_seconds counts the steps only. History.supervised (added here)
    is the number of positions that carried a loss, summed over training. stop_after=n runs only the first n steps
    of the `steps`-step schedule: the same learning rates as a full run's first n steps, at n / steps of the cost.
    """
    _check_family(family)
    optional_positive_int(stop_after=stop_after)
    steps = step_budget(steps)
    generator = generator if generator is not None else torch.Generator().manual_seed(0)
    hist = History()
    hist.supervised = 0

    def windows():
        if windows_fn is not None:
            return windows_fn(generator).to(device)
        x, y = get_batch(train_data, batch_size, context_len, generator)
        return torch.cat([x, y[:, -1:]], dim=1).to(device)                  # (B, T + 1)

    def loss_fn(m, w):
        loss, n = _objective(m, family, w, vocab, generator, loss_fraction)
        hist.supervised += n          # a tensor sum: no host read per step
        return loss

    fit(model, windows, loss_fn=loss_fn, optimizer=build_optimizer(model, "adamw", lr=lr), steps=steps,
        schedule="warmup_cosine", warmup=warmup, grad_clip=grad_clip, eval_fn=eval_fn, eval_every=eval_every or None,
        stop=stop_after, history=hist, progress=progress, desc=f"pre-training {family}")
    hist.supervised = int(hist.supervised)
    model.eval()
    return hist


def quote_windows(data: torch.Tensor, batch_size: int, context_len: int, generator: torch.Generator,
                  min_len: int = 6, max_len: int = 20) -> torch.Tensor:
    """Windows (B, T + 1) of `data` in which one passage of min_len..max_len tokens, taken from elsewhere in
    `data`, appears twice at random places (the second after the first): text that quotes itself. Chapter 9."""
    n = context_len + 1
    if not 1 <= min_len <= max_len or 2 * max_len + 2 > n:
        raise ValueError(f"need 1 <= min_len <= max_len and two passages plus a gap in {n} tokens, "
                         f"got {min_len}..{max_len}")
    x, y = get_batch(data, batch_size, context_len, generator)
    w = torch.cat([x, y[:, -1:]], dim=1)
    rand = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=generator))
    for row in w:
        p = rand(min_len, max_len)
        first = rand(0, n - 2 * p - 2)
        second, src = rand(first + p + 2, n - p), rand(0, len(data) - p)
        row[first:first + p] = row[second:second + p] = data[src:src + p]
    return w


def _blank_inputs(family: str, windows: torch.Tensor, pos: int, vocab: PretrainVocab):
    B, T = windows.shape
    if not 0 < pos < T - 1:
        raise ValueError(f"the blank must have context on both sides: pos in [1, {T - 2}], got {pos}")
    if family == "bert":
        x = windows.clone()
        x[:, pos] = vocab.mask
        return (x,)
    sentinel = torch.full((B, 1), vocab.sentinel(0), dtype=torch.long, device=windows.device)
    enc = torch.cat([windows[:, :pos], sentinel, windows[:, pos + 1:]], dim=1)   # one sentinel where the blank is
    dec = torch.cat([torch.full_like(sentinel, vocab.bos), sentinel], dim=1)    # [BOS] <X0>: the span comes next
    return enc, dec


@torch.no_grad()
def fill_blank(model, family: str, windows: torch.Tensor, pos: int, vocab: PretrainVocab,
               candidates: int = 16) -> torch.Tensor:
    """Guess the character at `pos` of each window (B, T) from both sides -> ids (B,). Chapter 9.

    bert reads [MASK] there; t5 reads a sentinel there and writes the span after it; gpt has no way to read
    the right side, so it scores its `candidates` likeliest characters (from the left side) by the likelihood
    of the whole window with each filled in, and picks the best: candidates=1 is its left-only guess.
    """
    _check_family(family)
    n = vocab.n_chars
    if family == "bert":
        return model(*_blank_inputs(family, windows, pos, vocab))[:, pos, :n].argmax(-1)
    if family == "t5":
        return model(*_blank_inputs(family, windows, pos, vocab))[:, 1, :n].argmax(-1)
    B, T = windows.shape
    if not 0 < pos < T - 1 or not 1 <= candidates <= n:
        raise ValueError(f"need pos in [1, {T - 2}] and candidates in [1, {n}], got {pos} and {candidates}")
    top = model(windows[:, :pos])[:, -1, :n].topk(candidates, dim=-1).indices        # (B, k) from the left side
    filled = windows.repeat_interleave(candidates, dim=0)                            # (B * k, T)
    filled[:, pos] = top.reshape(-1)
    logp = model(filled[:, :-1]).log_softmax(-1)                                     # (B * k, T - 1, V)
    score = logp.gather(-1, filled[:, 1:, None])[:, pos - 1:, 0].sum(-1)             # from the blank on
    return top.gather(1, score.view(B, candidates).argmax(-1, keepdim=True))[:, 0]


@torch.no_grad()
def continuation_bits(model, family: str, windows: torch.Tensor, n_prompt: int, vocab: PretrainVocab) -> float:
    """Bits per character of windows[:, n_prompt:] given windows[:, :n_prompt] (B, T), left to right.

    gpt: its own next-character probabilities; t5: the encoder reads the prompt and one sentinel, the decoder
    writes the continuation as that sentinel's span. bert has no left-to-right distribution: ValueError.
    """
    _check_family(family)
    if family == "bert":
        raise ValueError("an encoder trained with masked LM gives no left-to-right probabilities: bits/char of a "
                         "continuation are defined for the gpt and t5 families only")
    B, T = windows.shape
    if not 0 < n_prompt < T:
        raise ValueError(f"n_prompt must lie in [1, {T - 1}], got {n_prompt}")
    target = windows[:, n_prompt:]
    if family == "gpt":
        logits = model(windows[:, :-1])[:, n_prompt - 1:]
    else:
        sentinel = torch.full((B, 1), vocab.sentinel(0), dtype=torch.long, device=windows.device)
        dec = torch.cat([torch.full_like(sentinel, vocab.bos), sentinel, target[:, :-1]], dim=1)
        logits = model(torch.cat([windows[:, :n_prompt], sentinel], dim=1), dec)[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1)).item() / math.log(2)


def _sample_chars(logits: torch.Tensor, n_chars: int, temperature: float, generator) -> torch.Tensor:
    return sample_next(logits[:, :n_chars], temperature, generator=generator)   # characters only, never specials


@torch.no_grad()
def write(model, family: str, prompt: torch.Tensor, n_new: int, vocab: PretrainVocab, *,
          temperature: float = 0.8, generator: Optional[torch.Generator] = None, max_span: int = 8) -> torch.Tensor:
    """Extend prompt (1, P) by n_new characters, left to right -> (1, P + n_new). Chapter 9.

    gpt samples the next character; bert appends [MASK] and samples what it guesses there ("repeated
    unmasking"); t5 appends a sentinel and samples that span, up to max_span characters or its next sentinel.
    Each step reads the latest context_len characters (context_len_of; None: all of them).
    """
    _check_family(family)
    if prompt.dim() != 2 or prompt.shape[0] != 1:
        raise ValueError(f"prompt should have shape (1, P), got {tuple(prompt.shape)}")
    positive_int(max_span=max_span)
    ctx = context_len_of(model)                      # None (e.g. a CharRNN): every step reads the whole text
    one = lambda i: torch.full((1, 1), i, dtype=torch.long, device=prompt.device)
    chars = lambda logits: _sample_chars(logits, vocab.n_chars, temperature, generator)
    if family == "gpt":
        return decode_loop(lambda ids: model(ids)[:, -1], prompt, step_budget(n_new), chars, context_len=ctx,
                           name="n_new")
    if family == "bert":
        return decode_loop(lambda ids: model(torch.cat([ids, one(vocab.mask)], dim=1))[:, -1], prompt,
                           step_budget(n_new), chars, context_len=None if ctx is None else ctx - 1, name="n_new")

    def span(ids):                                   # t5: one sentinel's span, up to max_span characters (1, k)
        memory = model.encode(torch.cat([ids, one(vocab.sentinel(0))], dim=1))
        ends = lambda logits, dec: dec.shape[1] > 2 and int(logits.argmax(-1)) >= vocab.n_chars   # a special
        dec = decode_loop(lambda dec: model.decode(dec, memory)[:, -1], torch.cat([one(vocab.bos),
                          one(vocab.sentinel(0))], dim=1), max_span, chars, stop_before=ends, name="max_span")
        return dec[:, 2:]

    return decode_loop(span, prompt, step_budget(n_new), lambda span_ids: span_ids,
                       context_len=None if ctx is None else ctx - 1, name="n_new")


def passage_bits(model, rows: torch.Tensor, length: int, logits: Optional[torch.Tensor] = None) -> float:
    """Bits/char a GPT pays on the last passage of each row (B, T), after its first character: the mean -log2 p
    of the last length - 1 tokens. `logits` (B, T, V): a forward pass over `rows` already made. Chapter 9."""
    tensor_dims(rows, 2, "rows (B, T)")
    positive_int(length=length)
    if not 2 <= length <= rows.shape[1]:
        raise ValueError(f"need 2 <= length <= T={rows.shape[1]}, got {length}")
    if logits is None:
        with torch.no_grad():
            logits = model(rows)
    logp = logits[:, :-1].log_softmax(-1).gather(-1, rows[:, 1:, None])[:, -(length - 1):, 0]
    return (-logp / math.log(2)).mean().item()


@torch.no_grad()
def answer(model, prompts: Sequence[str], encode: Callable, decode: Callable, n_chars: int,
           max_new: int = 8, stop: str = "\n") -> List[str]:
    """Greedy answers of a GPT to each prompt, up to `stop` or max_new characters (the stop not included).
    Each step reads the latest context_len tokens (context_len_of; None: all of them)."""
    out = []
    device = next(model.parameters()).device
    for prompt in prompts:
        ids = decode_loop(lambda x: model(x)[:, -1, :n_chars], torch.tensor([encode(prompt)], device=device),
                          max_new, lambda logits: logits.argmax(-1), context_len=context_len_of(model),
                          stop_after=lambda nxt: decode([int(nxt)]) == stop, name="max_new")
        out.append(decode(ids[0, len(encode(prompt)):].tolist()).split(stop)[0])
    return out


class StreamTranslator(nn.Module):
    """A decoder-only GPT on Chapter 8's toy translation: source, separator and target in one stream. Chapter 9.

    forward(src (B, S), tgt_in (B, T)) -> logits (B, T, n_tgt) has the interface of book.transformer.Transformer,
    so book.seq2seq.train_seq2seq trains it on the same batches, with the loss on the target only, and
    book.tasks.evaluate_translation scores its `greedy`. One vocabulary of n_src + n_tgt ids: a source id as it is,
    target id t as n_src + t, so the target's own BOS is the separator. Row b's stream is its real source tokens
    (src is right-padded with pad_id), then its tgt_in: "big cat sees dog <BOS> CAT BIG DOG SEES". Every target
    token reads the source through the GPT's causal self-attention; there is no cross-attention.
    """

    def __init__(self, gpt: nn.Module, n_src: int, n_tgt: int, pad_id: int = 0):
        super().__init__()
        positive_int(n_src=n_src, n_tgt=n_tgt)
        vocab = gpt.config.vocab_size
        if vocab < n_src + n_tgt:
            raise ValueError(f"the GPT's vocab_size={vocab} must hold both vocabularies: n_src + n_tgt = "
                             f"{n_src + n_tgt}")
        if not 0 <= pad_id < n_src:
            raise ValueError(f"pad_id must be a source id in [0, {n_src}), got {pad_id}")
        self.gpt, self.n_src, self.n_tgt, self.pad_id = gpt, n_src, n_tgt, pad_id

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        tensor_dims(src, 2, "src")
        tensor_dims(tgt_in, 2, "tgt_in")
        token_ids(src, self.n_src, "src")
        token_ids(tgt_in, self.n_tgt, "tgt_in")
        if src.shape[0] != tgt_in.shape[0]:
            raise ValueError(f"src and tgt_in need the same batch size, got {src.shape[0]} and {tgt_in.shape[0]}")
        keep = src != self.pad_id
        if not torch.equal(keep.long().cummin(1).values.bool(), keep) or not keep[:, 0].all():
            raise ValueError("src must be right-padded: every row's real tokens first, then pad_id only")
        B, T = src.shape[0], tgt_in.shape[1]
        where = keep.sum(1, keepdim=True) + torch.arange(T, device=src.device)     # (B, T): the target's places
        stream = torch.cat([src, src.new_full((B, T), self.pad_id)], dim=1)
        stream.scatter_(1, where, tgt_in + self.n_src)                              # source, then target
        logits = self.gpt(stream[:, :int(where.max()) + 1])                         # (B, <= S + T, V)
        logits = logits.gather(1, where[..., None].expand(-1, -1, logits.shape[-1]))
        return logits[..., self.n_src:self.n_src + self.n_tgt]                      # (B, T, n_tgt)

    @torch.no_grad()
    def greedy(self, src: torch.Tensor, max_len: int, bos: int = 1, eos: int = 2) -> torch.Tensor:
        """Greedy decoding, as book.generate.greedy_translate: src (B, S) -> target ids (B, T') without BOS,
        pad_id after a row's EOS. Each step re-reads the whole stream (no cache: the streams are short)."""
        positive_int(max_len=max_len)
        tensor_dims(src, 2, "src")
        room = self.gpt.config.context_len - int((src != self.pad_id).sum(1).max())   # the target's positions
        if room < 1:
            raise ValueError(f"src's longest row fills the GPT's context_len={self.gpt.config.context_len}: no "
                             "room is left for the target")
        bos_column = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
        tgt = decode_loop(lambda tgt: self(src, tgt)[:, -1], bos_column, max_len, lambda logits: logits.argmax(-1),
                          context_len=room, slide=False, eos=eos, pad=self.pad_id, model=self, name="max_len")
        return tgt[:, 1:]
