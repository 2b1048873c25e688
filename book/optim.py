"""The Muon optimizer, written out: momentum, then orthogonalise each matrix's update. Chapter 10.

Muon (Jordan et al. 2024; used by modded-nanoGPT, Kimi K2) treats a weight matrix as a matrix: it takes
the momentum of the gradient and replaces it by the nearest semi-orthogonal matrix (all singular values
pushed towards 1), computed by a few Newton-Schulz iterations instead of an SVD. Every direction of
the update then moves by about the same amount, however lopsided the gradient's spectrum is.
It is only for 2-D hidden matrices; embeddings, the output head and the norms' gains keep AdamW.

`newton_schulz` and `Muon` follow torch.optim.Muon (PyTorch >= 2.9) step for step, so tests can check them
against it; ours runs the iteration in float32 (PyTorch's in bfloat16, which is slow on many CPUs) and works
with any torch the book supports. `Optimizers` steps several optimizers as one (Muon + AdamW).
"""
from __future__ import annotations

import math
from typing import List, Sequence

import torch

__all__ = ["NS_COEFFICIENTS", "newton_schulz", "Muon", "Optimizers", "muon_adamw"]

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)   # the quintic's a, b, c (Jordan et al.): steep slope at 0


def newton_schulz(g: torch.Tensor, steps: int = 5, coefficients: Sequence[float] = NS_COEFFICIENTS,
                  eps: float = 1e-7, dtype=torch.float32) -> torch.Tensor:
    """Approximately orthogonalise a matrix: U S V^T -> U S' V^T with every S'_ii near 1 (about 0.7-1.2).

    X = G / ||G||_F (so every singular value is at most 1), then `steps` times X <- aX + b(XX^T)X + c(XX^T)^2 X:
    a polynomial in X that maps each singular value s to a s + b s^3 + c s^5, pushing it towards 1.
    Works on the wide orientation (rows <= cols) so X X^T is the small Gram matrix.
    """
    if not isinstance(g, torch.Tensor) or g.dim() != 2:
        raise ValueError(f"newton_schulz needs a 2-D matrix, got {getattr(g, 'shape', type(g).__name__)}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    a, b, c = coefficients
    x = g.to(dtype)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T                               # (rows, rows)
        x = a * x + (b * gram + c * gram @ gram) @ x
    return (x.T if tall else x).to(g.dtype)


class Muon(torch.optim.Optimizer):
    """Momentum + Newton-Schulz orthogonalisation for 2-D parameters (torch.optim.Muon's update).

    For each matrix W (rows A, cols B) with gradient G:
        buf <- momentum * buf + (1 - momentum) * G
        u   <- (1 - momentum) * G + momentum * buf   (Nesterov; buf itself without)
        W   <- W * (1 - lr * weight_decay) - lr * sqrt(max(1, A / B)) * newton_schulz(u)
    """

    def __init__(self, params, lr: float = 0.02, weight_decay: float = 0.0, momentum: float = 0.95,
                 nesterov: bool = True, ns_steps: int = 5):
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum must lie in [0, 1), got {momentum}")
        if not weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                                      ns_steps=ns_steps))
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() != 2:
                    raise ValueError(f"Muon is for 2-D matrices; give this {p.dim()}-D parameter of shape "
                                     f"{tuple(p.shape)} to AdamW (see book.optim.muon_adamw)")

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            lr, mom = group["lr"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - mom)
                u = p.grad.lerp(buf, mom) if group["nesterov"] else buf
                update = newton_schulz(u, group["ns_steps"])
                p.mul_(1 - lr * group["weight_decay"])
                p.add_(update, alpha=-lr * math.sqrt(max(1.0, p.shape[0] / p.shape[1])))
        return loss


class Optimizers:
    """Several optimizers stepped as one (e.g. Muon for matrices, AdamW for the rest).

    param_groups lists every group of every optimizer, so a schedule that sets group["lr"] reaches all;
    each group remembers its starting rate as group["peak_lr"] for schedules that scale it.
    """

    def __init__(self, optimizers: Sequence[torch.optim.Optimizer]):
        if not optimizers:
            raise ValueError("Optimizers needs at least one optimizer")
        self.optimizers: List[torch.optim.Optimizer] = list(optimizers)
        for group in self.param_groups:
            group.setdefault("peak_lr", group["lr"])

    @property
    def param_groups(self) -> list:
        return [g for opt in self.optimizers for g in opt.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        for opt in self.optimizers:
            opt.step()

    def state_dict(self) -> list:
        return [opt.state_dict() for opt in self.optimizers]


def muon_adamw(model: torch.nn.Module, lr: float, muon_lr: float, weight_decay: float = 0.0,
               betas=(0.9, 0.99), momentum: float = 0.95) -> Optimizers:
    """Muon for the hidden 2-D matrices, AdamW (lr) for embeddings, the output head and 1-D gains/biases.

    "Hidden" = every 2-D parameter except those whose name contains "emb" or "lm_head" (token in, token out)."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    seen, hidden, other = set(), [], []
    for name, p in named:
        if id(p) in seen:
            continue   # tied weights appear once
        seen.add(id(p))
        (hidden if p.dim() == 2 and "emb" not in name and "lm_head" not in name else other).append(p)
    opts = [Muon(hidden, lr=muon_lr, weight_decay=weight_decay, momentum=momentum)] if hidden else []
    opts.append(torch.optim.AdamW([{"params": [p for p in other if p.dim() >= 2], "weight_decay": weight_decay},
                                   {"params": [p for p in other if p.dim() < 2], "weight_decay": 0.0}],
                                  lr=lr, betas=betas))
    return Optimizers(opts)

