"""What explains a run that fails: cheap probes of a book.gpt.GPT in training, for the chapter 10 ladder.

    probe = Probe(model, idx)          # idx: a fixed (B, T) batch of token ids
    stats = probe(model)               # {"attn_logit_max": [...per layer], "ffn_act_rms": [...], "ffn_act_max": [...],
                                       #  "update_rel": ||W - W_prev|| / ||W_prev|| over the hidden matrices}

A Probe is an eval_fn for book.optim.fit (fit calls eval_fn(model) every eval_every steps and keeps whatever it
returns in History.val), so a run logs these beside its loss without a second training loop; RecipeRun-based
races call it after each chunk. The quantities:
- attn_logit_max: per layer, the largest pre-softmax attention logit q.k / sqrt(d_head) over the causal pairs
  of the batch, with the layer's QK-norm and RoPE applied as in book.attention.Attention (the logits that blow up
  without QK-norm);
- ffn_act_rms / ffn_act_max: per layer, the root mean square and the largest magnitude of the FFN's hidden
  activation (the input of ffn.down: the gated product for SwiGLU);
- update_rel: the relative size of the change of the 2-D hidden matrices since the previous call (the update
  size that Muon and AdamW set so differently).
"""
from __future__ import annotations

import math

import torch

__all__ = ["Probe"]


def _hidden(model):
    return {n: p for n, p in model.named_parameters()
            if p.dim() == 2 and "emb" not in n and "lm_head" not in n}


class Probe:
    def __init__(self, model, idx: torch.Tensor):
        if not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.dtype.is_floating_point:
            raise ValueError(f"idx must be a (B, T) tensor of token ids, got {getattr(idx, 'shape', idx)!r}")
        self.idx = idx
        self.prev = {n: p.detach().clone() for n, p in _hidden(model).items()}

    @torch.no_grad()
    def __call__(self, model) -> dict:
        inputs, hooks = {}, []
        for i, block in enumerate(model.blocks):
            hooks.append(block.attn.register_forward_pre_hook(
                lambda m, args, kw=None, i=i: inputs.__setitem__(("attn", i), args[0])))
            hooks.append(block.ffn.down.register_forward_pre_hook(
                lambda m, args, i=i: inputs.__setitem__(("ffn", i), args[0])))
        was_training = model.training
        model.eval()
        try:
            model(self.idx)
        finally:
            for h in hooks:
                h.remove()
            model.train(was_training)
        stats = {"attn_logit_max": [], "ffn_act_rms": [], "ffn_act_max": []}
        for i, block in enumerate(model.blocks):
            a, x = block.attn, inputs[("attn", i)]
            B, T, _ = x.shape
            q = a.q_proj(x).view(B, T, a.n_heads, a.d_head).transpose(1, 2)
            k = a.k_proj(x).view(B, T, a.n_kv_heads, a.d_head).transpose(1, 2)
            if a.q_norm is not None:
                q, k = a.q_norm(q), a.k_norm(k)
            if a.rotary is not None:
                q, k = a.rotary(q, 0), a.rotary(k, 0)
            k = k.repeat_interleave(a.n_heads // a.n_kv_heads, dim=1)
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(a.d_head)                 # (B, H, T, T)
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            stats["attn_logit_max"].append(scores.masked_fill(~causal, -math.inf).max().item())
            h = inputs[("ffn", i)]
            stats["ffn_act_rms"].append(h.pow(2).mean().sqrt().item())
            stats["ffn_act_max"].append(h.abs().max().item())
        now = {n: p.detach().clone() for n, p in _hidden(model).items()}
        diff = sum((now[n] - self.prev[n]).pow(2).sum() for n in now)
        base = sum(self.prev[n].pow(2).sum() for n in now)
        stats["update_rel"] = math.sqrt(diff / base) if base > 0 else 0.0
        self.prev = now
        return stats
