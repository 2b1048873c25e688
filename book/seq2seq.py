"""RNN encoder-decoders, with and without attention. Chapters 2 (fixed summary) and 3 (Bahdanau).

Shape legend (batch first): B batch, S source length, T target length, E d_emb,
Denc encoder state size (2 * d_enc: forward and backward GRU), Ddec decoder state size, A d_att, V vocab.
The two decoders differ in one line: the context c_t is the fixed summary (Cho et al. 2014, Sutskever
et al. 2014) or an attention-weighted mix of all encoder states (Bahdanau, Cho & Bengio 2014).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import positive_int, positive_number, token_ids
from .decoding import decode_loop
from .optim import build_optimizer, fit
from .tasks import BOS, EOS, PAD, ToyTranslation

__all__ = ["AdditiveAttention", "MultiplicativeAttention", "Encoder", "Decoder", "Seq2Seq",
           "Seq2SeqConfig", "build_seq2seq", "train_seq2seq"]


class AdditiveAttention(nn.Module):
    """Bahdanau's additive attention: e_i = v_a^T tanh(W_a s + U_a h_i), weights = softmax(e). Chapter 3.

    W_a: (A, Ddec) maps the decoder state (the query), U_a: (A, Denc) maps each encoder state (the keys),
    v_a: (A,) turns the mixed A-vector into one score. Ddec and Denc may differ: both land in size A.
    """

    def __init__(self, d_dec: int, d_enc: int, d_att: int):
        super().__init__()
        if min(d_dec, d_enc, d_att) < 1:
            raise ValueError(f"sizes must be positive, got d_dec={d_dec}, d_enc={d_enc}, d_att={d_att}")
        self.W_a = nn.Linear(d_dec, d_att, bias=False)
        self.U_a = nn.Linear(d_enc, d_att, bias=False)
        self.v_a = nn.Parameter(torch.randn(d_att) / d_att**0.5)

    def d_dec_enc(self) -> Tuple[int, int]:
        """(Ddec, Denc): the sizes of the query and of each key this attention takes."""
        return self.W_a.in_features, self.U_a.in_features

    def project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """U_a h_i for every source position, once per sentence: (B, S, Denc) -> (B, S, A)."""
        return self.U_a(keys)

    def scores(self, query: torch.Tensor, projected_keys: torch.Tensor) -> torch.Tensor:
        """Alignment scores e: query (B, Ddec), projected keys (B, S, A) -> (B, S)."""
        return torch.tanh(self.W_a(query).unsqueeze(1) + projected_keys) @ self.v_a

    def forward(self, query: torch.Tensor, keys: torch.Tensor, keep_mask: Optional[torch.Tensor] = None,
                projected_keys: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """query (B, Ddec), keys = values (B, S, Denc), keep_mask (B, S) True at real tokens (may attend)
        -> context (B, Denc), weights (B, S)."""
        return _attend(self, query, keys, keep_mask, projected_keys)


class MultiplicativeAttention(nn.Module):
    """Luong's "general" score e_i = s^T W h_i (a dot product after one map, as sizes differ). Chapter 3."""

    def __init__(self, d_dec: int, d_enc: int):
        super().__init__()
        if min(d_dec, d_enc) < 1:
            raise ValueError(f"sizes must be positive, got d_dec={d_dec}, d_enc={d_enc}")
        self.W = nn.Linear(d_enc, d_dec, bias=False)

    def d_dec_enc(self) -> Tuple[int, int]:
        """(Ddec, Denc): the sizes of the query and of each key this attention takes."""
        return self.W.out_features, self.W.in_features

    def project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """W h_i for every source position: (B, S, Denc) -> (B, S, Ddec)."""
        return self.W(keys)

    def scores(self, query: torch.Tensor, projected_keys: torch.Tensor) -> torch.Tensor:
        """query (B, Ddec), projected keys (B, S, Ddec) -> scores (B, S)."""
        return (projected_keys @ query.unsqueeze(-1)).squeeze(-1)

    def forward(self, query, keys, keep_mask=None, projected_keys=None):
        """Same contract as AdditiveAttention.forward."""
        return _attend(self, query, keys, keep_mask, projected_keys)


def _attend(attn, query, keys, keep_mask, projected_keys):
    """Shared tail of both attentions: mask, softmax over S, weighted sum of the encoder states."""
    if query.dim() != 2 or keys.dim() != 3 or query.shape[0] != keys.shape[0]:
        raise ValueError(f"expected query (B, Ddec) and keys (B, S, Denc), got {tuple(query.shape)} "
                         f"and {tuple(keys.shape)}")
    d_dec, d_enc = attn.d_dec_enc()
    if query.shape[1] != d_dec or keys.shape[2] != d_enc:
        raise ValueError(f"this attention takes query (B, Ddec={d_dec}) and keys (B, S, Denc={d_enc}), got "
                         f"{tuple(query.shape)} and {tuple(keys.shape)}")
    direct = projected_keys is None      # a direct call; Seq2Seq passes the keys, its encoder checked the mask
    if projected_keys is None:
        projected_keys = attn.project_keys(keys)
    e = attn.scores(query, projected_keys)                       # (B, S)
    if keep_mask is not None:
        if not isinstance(keep_mask, torch.Tensor) or keep_mask.dtype != torch.bool:
            got = keep_mask.dtype if isinstance(keep_mask, torch.Tensor) else type(keep_mask).__name__
            raise TypeError(f"keep_mask must be a bool tensor (B, S), True = may attend (e.g. src != PAD), got {got}")
        if keep_mask.shape != e.shape:
            raise ValueError(f"keep_mask should have shape {tuple(e.shape)}, got {tuple(keep_mask.shape)}")
        if direct and not bool(keep_mask.any(-1).all()):
            raise ValueError("keep_mask blocks every key of some row, whose weights would be NaN: True = may "
                             "attend (a real token), False = padding; every row needs at least one True")
        e = e.masked_fill(~keep_mask, float("-inf"))              # blocked keys get weight exp(-inf) = 0
    weights = torch.softmax(e, dim=-1)
    context = (weights.unsqueeze(1) @ keys).squeeze(1)           # (B, 1, S) @ (B, S, Denc) -> (B, Denc)
    return context, weights


class Encoder(nn.Module):
    """Bidirectional GRU encoder: src ids (B, S) -> states H (B, S, 2*d_enc), summary (B, 2*d_enc).

    The summary joins the forward state after the last real token and the backward state after the first
    one; padding is skipped with packing, so the backward GRU starts at each sentence's true end.
    """

    def __init__(self, vocab_size: int, d_emb: int, d_enc: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_emb, padding_idx=PAD)
        self.rnn = nn.GRU(d_emb, d_enc, batch_first=True, bidirectional=True)

    def forward(self, src: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        lengths = (src != PAD).sum(1).cpu()                       # packing needs them on the host anyway
        if (lengths == 0).any():
            raise ValueError("every source sentence needs at least one non-PAD token")
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(src), lengths, batch_first=True,
                                                   enforce_sorted=False)
        out, h_n = self.rnn(packed)                               # h_n: (2, B, d_enc)
        H, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        return H, torch.cat([h_n[0], h_n[1]], dim=-1)


class Decoder(nn.Module):
    """GRU decoder. Without attention, every step sees the same summary c; with it, c_t is recomputed
    from the previous state s_{t-1} and all encoder states H. Chapter 2 (attention=None), Chapter 3."""

    def __init__(self, vocab_size: int, d_emb: int, d_enc_out: int, d_dec: int,
                 attention: Optional[nn.Module] = None):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_emb, padding_idx=PAD)
        self.init_proj = nn.Linear(d_enc_out, d_dec)              # summary -> s_0
        self.cell = nn.GRUCell(d_emb + d_enc_out, d_dec)
        self.out_proj = nn.Linear(d_dec + d_enc_out, vocab_size)
        self.attention = attention

    def start(self, H: torch.Tensor, summary: torch.Tensor) -> torch.Tensor:
        """Initial decoder state s_0 = tanh(W summary): (B, Denc) -> (B, Ddec)."""
        return torch.tanh(self.init_proj(summary))

    def step(self, y_prev, s, H, summary, keep_mask, projected_keys=None):
        """One step: previous token (B,), state (B, Ddec)
        -> logits (B, V), new state, weights (B, S) or None."""
        if self.attention is None:
            c, w = summary, None                                  # the fixed-size bottleneck
        else:
            c, w = self.attention(s, H, keep_mask, projected_keys)
        s = self.cell(torch.cat([self.embed(y_prev), c], -1), s)
        return self.out_proj(torch.cat([s, c], -1)), s, w


class Seq2Seq(nn.Module):
    """Encoder + decoder. forward(src (B, S), tgt_in (B, T)) -> logits (B, T, V) with teacher forcing;
    greedy(src, max_len) -> ids (B, T'), weights (B, T', S) or None. Chapters 2, 3."""

    def __init__(self, encoder: Encoder, decoder: Decoder):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def _prepare(self, src):
        H, summary = self.encoder(src)
        att = self.decoder.attention
        keys = att.project_keys(H) if att is not None else None
        return H, summary, src != PAD, keys

    def _check(self, src: torch.Tensor, tgt_in: Optional[torch.Tensor] = None) -> None:
        token_ids(src, self.encoder.embed.num_embeddings, "src")
        if src.dim() != 2 or src.shape[1] < 1:
            raise ValueError(f"src should have shape (B, S) with S >= 1, got {tuple(src.shape)}")
        if tgt_in is not None:
            token_ids(tgt_in, self.decoder.embed.num_embeddings, "tgt_in")
            if tgt_in.dim() != 2 or tgt_in.shape[0] != src.shape[0]:
                raise ValueError(f"tgt_in should have shape (B, T) with src's B = {src.shape[0]}, "
                                 f"got {tuple(tgt_in.shape)}")

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        self._check(src, tgt_in)
        H, summary, keep_mask, keys = self._prepare(src)
        s = self.decoder.start(H, summary)
        logits = []
        for t in range(tgt_in.shape[1]):                          # sequential: s_t needs s_{t-1}
            out, s, _ = self.decoder.step(tgt_in[:, t], s, H, summary, keep_mask, keys)
            logits.append(out)
        return torch.stack(logits, 1)

    @torch.no_grad()
    def greedy(self, src: torch.Tensor, max_len: int):
        """Decode from BOS, feeding back the argmax, until every row has produced EOS or max_len."""
        positive_int(max_len=max_len)
        self._check(src)
        H, summary, keep_mask, keys = self._prepare(src)
        s = self.decoder.start(H, summary)
        weights = []

        def step(y):            # y (B, 1): the newest token; the decoder's state s holds the rest -> (B, V)
            nonlocal s
            out, s, w = self.decoder.step(y[:, -1], s, H, summary, keep_mask, keys)
            weights.append(w)
            return out

        bos_column = torch.full((src.shape[0], 1), BOS, dtype=torch.long, device=src.device)
        ids = decode_loop(step, bos_column, max_len, lambda logits: logits.argmax(-1), incremental=True, eos=EOS,
                          pad=PAD, name="max_len")
        att = None if weights[0] is None else torch.stack(weights, 1)
        return ids[:, 1:].contiguous(), att


@dataclass
class Seq2SeqConfig:
    """Sizes of an RNN encoder-decoder. attention: "none" (Chapter 2), "additive" or "multiplicative"."""
    src_vocab_size: int
    tgt_vocab_size: int
    d_emb: int = 32
    d_enc: int = 64          # per direction; encoder states have 2 * d_enc
    d_dec: int = 96          # deliberately not 2 * d_enc: attention does not need equal sizes
    d_att: int = 64
    attention: str = "additive"


def build_seq2seq(cfg: Seq2SeqConfig) -> Seq2Seq:
    """A Seq2Seq model from a config. Chapters 2, 3."""
    positive_int(src_vocab_size=cfg.src_vocab_size, tgt_vocab_size=cfg.tgt_vocab_size, d_emb=cfg.d_emb,
                 d_enc=cfg.d_enc, d_dec=cfg.d_dec, d_att=cfg.d_att)
    d_out = 2 * cfg.d_enc
    attention = {"none": lambda: None,
                 "additive": lambda: AdditiveAttention(cfg.d_dec, d_out, cfg.d_att),
                 "multiplicative": lambda: MultiplicativeAttention(cfg.d_dec, d_out)}.get(cfg.attention)
    if attention is None:
        raise ValueError(f"attention must be 'none', 'additive' or 'multiplicative', got {cfg.attention!r}")
    return Seq2Seq(Encoder(cfg.src_vocab_size, cfg.d_emb, cfg.d_enc),
                   Decoder(cfg.tgt_vocab_size, cfg.d_emb, d_out, cfg.d_dec, attention()))


def _length_sorted_batches(task: ToyTranslation, n_batches: int, batch_size: int, min_len: int,
                           max_len: int, generator) -> List:
    """Draw n_batches * batch_size sentences at once and cut them, sorted by length, into batches:
    sentences of similar length share a batch, so less time is spent on padding."""
    pool = task.train_batch(n_batches * batch_size, min_len, max_len, generator)
    sents = [task.decode(row, "src") for row in pool.src]
    sents.sort(key=len)
    order = torch.randperm(n_batches, generator=generator).tolist()
    return [task.make_batch(sents[i * batch_size:(i + 1) * batch_size]) for i in order]


def train_seq2seq(model: nn.Module, task: ToyTranslation, *, steps: int, batch_size: int = 64,
                  lr: float = 3e-3, optimizer: str = "adamw", schedule="warmup_cosine", warmup: int = 30,
                  min_len: int = 3, max_len: int = 32, generator: Optional[torch.Generator] = None, device=None,
                  grad_clip: float = 1.0, bucket: int = 4, progress: bool = True) -> List[float]:
    """Train with teacher forcing on fresh random batches, with book.optim.fit; returns the loss per step
    (nats/token).

    By default as every Transformer of the book trains (Chapter 7): AdamW that decays the matrices only, `warmup`
    steps of linear warmup, then a cosine decay to lr/10 (fit's "warmup_cosine"). Chapters 2 and 3 train their
    RNNs with their tuned setting, optimizer="adam", warmup=0: Adam with the cosine decay alone.
    Every `bucket` steps, bucket * batch_size new sentences are drawn and grouped by length.
    Works for any model with forward(src, tgt_in) -> logits (B, T, V), e.g. the Transformer of Chapter 8.
    """
    positive_int(steps=steps, bucket=bucket)
    positive_number(lr=lr)
    device = device or next(model.parameters()).device
    batches: List = []

    def batch():
        if not batches:
            batches.extend(_length_sorted_batches(task, bucket, batch_size, min_len, max_len, generator))
        return batches.pop()

    def loss_fn(m, b):
        logits = m(b.src.to(device), b.tgt_in.to(device))
        return F.cross_entropy(logits.flatten(0, 1), b.tgt_out.to(device).flatten(), ignore_index=PAD)

    hist = fit(model, batch, loss_fn=loss_fn, optimizer=build_optimizer(model, optimizer, lr=lr), steps=steps,
               schedule=schedule, warmup=warmup, grad_clip=grad_clip, progress=progress, desc="train")
    model.eval()
    return hist.train_loss
