"""Recurrent networks: a vanilla RNN cell from scratch, a character-level RNN/LSTM/GRU language model,
and the measurements of Chapter 2 (recall at distance k, gradient norm by distance).

Shape legend (batch first): B batch, T time, D input size, H hidden size (d_hidden), E d_emb, V vocab.
One step of the vanilla RNN (Elman 1990): h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh).
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import non_negative_int, positive_int, probability, token_ids
from .optim import build_optimizer, fit
from .tasks import recall_batch, recall_many_batch

__all__ = ["RNNCell", "RNN", "CharRNN", "train_recall", "recall_accuracy", "curriculum_max_distance",
           "train_recall_many", "recall_many_accuracy", "input_gradients", "gradient_by_distance"]

_CELLS = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}


class RNNCell(nn.Module):
    """One vanilla RNN step, parameters named and initialised like nn.RNN's. Chapter 2.

    forward(x (B, D), h (B, H)) -> h' (B, H)
    """

    def __init__(self, d_in: int, d_hidden: int):
        super().__init__()
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (d_in, d_hidden)):
            raise ValueError(f"d_in and d_hidden must be positive ints, got {d_in!r}, {d_hidden!r}")
        bound = 1 / math.sqrt(d_hidden)
        self.weight_ih = nn.Parameter(torch.empty(d_hidden, d_in).uniform_(-bound, bound))
        self.weight_hh = nn.Parameter(torch.empty(d_hidden, d_hidden).uniform_(-bound, bound))
        self.bias_ih = nn.Parameter(torch.empty(d_hidden).uniform_(-bound, bound))
        self.bias_hh = nn.Parameter(torch.empty(d_hidden).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh)


class RNN(nn.Module):
    """The time loop around RNNCell: x (B, T, D), h0 (B, H) or None -> outputs (B, T, H), h_T (B, H).

    Equals nn.RNN(D, H, batch_first=True) after `load_from(torch_rnn)`. Chapter 2.
    """

    def __init__(self, d_in: int, d_hidden: int):
        super().__init__()
        self.cell = RNNCell(d_in, d_hidden)
        self.d_hidden = d_hidden

    def forward(self, x: torch.Tensor, h0: Optional[torch.Tensor] = None):
        if x.dim() != 3 or x.shape[-1] != self.cell.weight_ih.shape[1]:
            raise ValueError(f"x should have shape (B, T, {self.cell.weight_ih.shape[1]}), got {tuple(x.shape)}")
        if not x.dtype.is_floating_point:
            raise TypeError(f"x must be a floating-point tensor (embedded inputs), got {x.dtype}; token ids go "
                            "through an nn.Embedding first")
        if h0 is not None and (not isinstance(h0, torch.Tensor) or tuple(h0.shape) != (x.shape[0], self.d_hidden)):
            got = tuple(h0.shape) if isinstance(h0, torch.Tensor) else type(h0).__name__
            raise ValueError(f"h0 should have shape (B, H) = ({x.shape[0]}, {self.d_hidden}), got {got}")
        h = x.new_zeros(x.shape[0], self.d_hidden) if h0 is None else h0
        outputs = []
        for t in range(x.shape[1]):               # the step t must wait for step t-1
            h = self.cell(x[:, t], h)
            outputs.append(h)
        return torch.stack(outputs, 1), h

    @torch.no_grad()
    def load_from(self, torch_rnn: nn.RNN) -> "RNN":
        """Copy the weights of a one-layer, unidirectional, tanh nn.RNN into this module."""
        if torch_rnn.num_layers != 1 or torch_rnn.bidirectional or torch_rnn.nonlinearity != "tanh":
            raise ValueError("load_from expects a one-layer, unidirectional nn.RNN with tanh")
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(self.cell, name).copy_(getattr(torch_rnn, name + "_l0"))
        return self


class CharRNN(nn.Module):
    """Character language model: embedding -> RNN/LSTM/GRU -> linear head. Chapter 2.

    forward(x (B, T) ids) -> logits (B, T, V), and context_len = None (it reads inputs of any length): the
    interface of every LM in the book, so book.train.train_lm, evaluate_lm and book.generate.generate work
    unchanged (generate without a KV cache). Also the recall-task model (last position).
    """

    context_len = None   # no longest input: the recurrence reads any length

    def __init__(self, vocab_size: int, d_emb: int = 32, d_hidden: int = 128, cell: str = "lstm",
                 n_layers: int = 1):
        super().__init__()
        if cell not in _CELLS:
            raise ValueError(f"cell must be one of {sorted(_CELLS)}, got {cell!r}")
        sizes = (vocab_size, d_emb, d_hidden, n_layers)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in sizes):
            raise ValueError(f"vocab_size, d_emb, d_hidden and n_layers must be positive ints, got {sizes}")
        self.kind = cell
        self.embed = nn.Embedding(vocab_size, d_emb)
        self.rnn = _CELLS[cell](d_emb, d_hidden, num_layers=n_layers, batch_first=True)
        self.head = nn.Linear(d_hidden, vocab_size)

    def from_embeddings(self, e: torch.Tensor) -> torch.Tensor:
        """Embedded inputs (B, T, E) -> logits (B, T, V); lets us take gradients w.r.t. the inputs."""
        out, _ = self.rnn(e)
        return self.head(out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        token_ids(x, self.embed.num_embeddings, "x")
        if x.dim() != 2 or x.shape[1] < 1:
            raise ValueError(f"x should have shape (B, T) with T >= 1, got {tuple(x.shape)}")
        return self.from_embeddings(self.embed(x))


def curriculum_max_distance(step: int, steps: int, seq_len: int, ramp: float = 0.5) -> int:
    """The longest recall distance asked at `step` of a short-k curriculum: it grows linearly from 2 at step 0 to
    seq_len - 1 at ramp * steps, and stays there. Chapter 2."""
    non_negative_int(step=step)
    positive_int(steps=steps, seq_len=seq_len)
    probability(ramp=ramp)
    if seq_len < 3:
        raise ValueError(f"a curriculum needs seq_len >= 3, got {seq_len}")
    frac = 1.0 if ramp == 0 else min(1.0, step / (ramp * steps))
    return round(2 + frac * (seq_len - 3))


def train_recall(model: nn.Module, *, steps: int, seq_len: int, n_values: int = 8, batch_size: int = 64,
                 lr: float = 3e-3, schedule="constant", curriculum: bool = False,
                 generator: Optional[torch.Generator] = None, progress: bool = True) -> List[float]:
    """Train a model on recall at random distances 1..seq_len-1 (loss on the last step only), with
    book.optim.fit: Adam at a constant rate (chapter 2's tuned setting; `schedule`: any of fit's),
    gradients clipped to 1. `model` maps ids (B, T) to logits (B, T, V): a CharRNN, or any such model (chapter 4
    trains its attention layer the same way). curriculum=True: short distances first, the longest distance asked
    growing as `curriculum_max_distance` says (from 2 to seq_len - 1 over the first half of the steps). Returns
    the loss per step (nats). Chapter 2.
    """
    positive_int(steps=steps)
    device = next(model.parameters()).device
    step = [0]

    def batch():
        longest = curriculum_max_distance(step[0], steps, seq_len) if curriculum else None
        step[0] += 1
        x, y, _ = recall_batch(batch_size, seq_len, n_values, generator=generator, max_distance=longest)
        return x.to(device), y.to(device)

    name = getattr(model, "kind", type(model).__name__)
    hist = fit(model, batch, loss_fn=lambda m, b: F.cross_entropy(m(b[0])[:, -1], b[1]),
               optimizer=build_optimizer(model, "adam", lr=lr), steps=steps,
               schedule=schedule, grad_clip=1.0, progress=progress, desc=f"recall {name}")
    model.eval()
    return hist.train_loss


def train_recall_many(model: CharRNN, *, steps: int, n_digits: int, delay: int, n_values: int = 8,
                      batch_size: int = 64, lr: float = 3e-3, generator: Optional[torch.Generator] = None,
                      progress: bool = True) -> List[float]:
    """Train a CharRNN (vocab_size n_values + 2) to recall n_digits values at once after `delay` filler steps
    (book.tasks.recall_many_batch; the loss on the last n_digits positions), as train_recall trains: Adam at a
    constant lr, gradients clipped to 1. Returns the loss per step (nats per value). Chapter 2.
    """
    positive_int(steps=steps, n_digits=n_digits)
    device = next(model.parameters()).device

    def batch():
        x, y = recall_many_batch(batch_size, n_digits, delay, n_values, generator=generator)
        return x.to(device), y.to(device)

    def loss_fn(m, b):
        return F.cross_entropy(m(b[0])[:, -n_digits:].flatten(0, 1), b[1].flatten())

    hist = fit(model, batch, loss_fn=loss_fn, optimizer=build_optimizer(model, "adam", lr=lr), steps=steps,
               schedule="constant", grad_clip=1.0, progress=progress, desc=f"recall {n_digits} {model.kind}")
    model.eval()
    return hist.train_loss


@torch.no_grad()
def recall_many_accuracy(model: CharRNN, n_digits: int, delay: int, n_values: int = 8, n: int = 512,
                         generator: Optional[torch.Generator] = None) -> List[float]:
    """Accuracy at each of the n_digits queries (the i-th value asked for), on n fresh sequences. Chapter 2."""
    positive_int(n=n)
    device = next(model.parameters()).device
    x, y = recall_many_batch(n, n_digits, delay, n_values, generator=generator)
    pred = model(x.to(device))[:, -n_digits:].argmax(-1).cpu()
    return (pred == y).float().mean(0).tolist()


@torch.no_grad()
def recall_accuracy(model: nn.Module, seq_len: int, distances: Sequence[int], n_values: int = 8,
                    n: int = 512, generator: Optional[torch.Generator] = None) -> Dict[int, float]:
    """{k: accuracy} of recalling the value k steps back, on n fresh sequences per k. Chapter 2."""
    device = next(model.parameters()).device
    out = {}
    for k in distances:
        x, y, _ = recall_batch(n, seq_len, n_values, distance=k, generator=generator)
        out[k] = (model(x.to(device))[:, -1].argmax(-1).cpu() == y).float().mean().item()
    return out


def input_gradients(model: CharRNN, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Norm of d(last step's logit for answer y)/d(input embedding) at every position. Chapter 2.

    x (B, T) ids, y (B,) answers -> (B, T): how much each input can still move the final output.
    """
    device = next(model.parameters()).device
    e = model.embed(x.to(device)).detach().requires_grad_(True)              # (B, T, E)
    logit = model.from_embeddings(e)[:, -1].gather(1, y.to(device)[:, None]).sum()
    (grad,) = torch.autograd.grad(logit, e)
    return grad.norm(dim=-1).cpu()


def gradient_by_distance(model: CharRNN, seq_len: int, distances: Sequence[int], n_values: int = 8,
                         n: int = 256, generator: Optional[torch.Generator] = None) -> Dict[int, float]:
    """{k: mean input-gradient norm at the value to recall, k steps back} on recall sequences. Chapter 2."""
    out = {}
    for k in distances:
        x, y, _ = recall_batch(n, seq_len, n_values, distance=k, generator=generator)
        out[k] = input_gradients(model, x, y)[:, seq_len - k].mean().item()
    return out
