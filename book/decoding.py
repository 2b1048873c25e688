"""The one decoding loop: every generator and greedy decoder of the book extends its ids with `decode_loop`.

Shape legend (batch first): B batch, T time, V vocab.

A step reads ids and gives the logits of the next token, a chooser turns them into the next token (greedy: the
argmax; sampling: book.generate.sample_next), and the loop appends it, until max_new tokens are written or every
row has written EOS. Its callers: book.generate.generate (a GPT with or without a KV cache, a CharRNN) and
greedy_translate (the encoder-decoder Transformer), book.seq2seq.Seq2Seq.greedy (the RNN encoder-decoder),
book.pretrain.StreamTranslator.greedy, write (the GPT, BERT and T5 families) and answer, and through generate the
live widget (book.live). The loop knows no model: it sits below the models, so that they may use it too.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.nn as nn

from .checks import non_negative_int, optional_positive_int

__all__ = ["decode_loop", "MAX_NEW"]

# the most tokens one call writes: a request beyond it is a mistake (a forgotten stop, 10**7 for 10**3), not a hang
MAX_NEW = 100_000


@torch.no_grad()
def decode_loop(step: Callable[[torch.Tensor], torch.Tensor], ids: torch.Tensor, max_new: int,
                choose: Callable[[torch.Tensor], torch.Tensor], *, context_len: Optional[int] = None,
                slide: bool = True, incremental: bool = False, eos: Optional[int] = None, pad: int = 0,
                stop_before: Optional[Callable[[torch.Tensor, torch.Tensor], bool]] = None,
                stop_after: Optional[Callable[[torch.Tensor], bool]] = None, model: Optional[nn.Module] = None,
                name: str = "max_new") -> torch.Tensor:
    """Extend ids (B, T) by up to max_new tokens -> (B, T + n), n <= max_new. Each step:

    1. the model's input: the new ids since the last step if `incremental` (the first step reads them all: a KV
       cache or a recurrent state holds the rest), else all ids, or only the latest `context_len` of them
       (None: all);
    2. logits = step(input) (B, V), the next token's scores, or whatever `choose` reads;
    3. stop_before(logits, ids) -> True ends the loop before choosing (and drawing);
    4. choose(logits) -> the next token (B,), or several (B, k) (T5's span); the loop ends once max_new tokens
       are written, and a last step that writes more is cut to max_new;
    5. with `eos`: a row that has written eos gets `pad` from then on, and the loop ends when every row has;
       stop_after(tokens (B, k)) -> True ends it after the step.

    `slide`: past context_len the model reads a window that slides (a GPT without a cache, a CharRNN's None).
    slide=False (a KV cache, an encoder-decoder's decoder: absolute positions cannot slide) or `incremental`:
    a step that would read more than context_len positions raises ValueError naming `name`, the caller's
    argument for max_new; so does a max_new above MAX_NEW. `model`: put in eval mode for the loop and returned to
    its mode afterwards.
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
        raise ValueError(f"ids should be a (B, T) tensor, got {getattr(ids, 'shape', type(ids).__name__)}")
    non_negative_int(**{name: max_new})
    if max_new > MAX_NEW:
        raise ValueError(f"{name}={max_new:,} is more than one call writes (at most {MAX_NEW:,} tokens, which already "
                         f"takes minutes on a CPU): ask for fewer, or call again from where it stopped")
    optional_positive_int(context_len=context_len)
    goal = ids.shape[1] + max_new
    done = None if eos is None else torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
    was_training = model.training if model is not None else None
    if model is not None:
        model.eval()
    try:
        seen = 0
        while ids.shape[1] < goal:
            if context_len is not None and (incremental or not slide) and ids.shape[1] > context_len:
                raise ValueError(f"{name}={max_new} runs past the model's context_len={context_len}: step "
                                 f"{ids.shape[1] - goal + max_new + 1} would read {ids.shape[1]} positions; give "
                                 f"{name} <= {context_len - goal + max_new + 1}")
            if incremental:
                x, seen = ids[:, seen:], ids.shape[1]
            else:
                x = ids if context_len is None or not slide else ids[:, -context_len:]
            logits = step(x)
            if stop_before is not None and stop_before(logits, ids):
                break
            nxt = choose(logits)
            if nxt.dim() == 1:
                nxt = nxt[:, None]                                       # (B, 1)
            if nxt.dim() != 2 or nxt.shape[0] != ids.shape[0] or nxt.shape[1] < 1:
                raise ValueError(f"choose must give the next token(s), (B,) or (B, k >= 1) with B={ids.shape[0]}, "
                                 f"got {tuple(nxt.shape)}")
            if done is not None:
                nxt = nxt.masked_fill(done[:, None], pad)
            ids = torch.cat([ids, nxt], dim=1)
            if done is not None:
                done |= (nxt == eos).any(1)
                if done.all():
                    break
            if stop_after is not None and stop_after(nxt):
                break
    finally:
        if model is not None:
            model.train(was_training)
    return ids[:, :goal] if ids.shape[1] > goal else ids
