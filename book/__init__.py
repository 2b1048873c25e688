"""`book`: the helper package of the course "Transformers, Gap by Gap".

Organised by concept, in layers that import only downwards (tests/test_layering.py, tools/draw_package.py):
- the reader's language: language (the messages `book` shows, in English or Chinese: book.language._);
- argument checks, safe writes: checks (the one validation idiom), files (atomic writes of committed files);
- foundations: utils, data, results (recorded benchmark tables and their provenance), tokenizers, tasks, objectives,
  plots;
- maths and counts: optim (the one training loop, fit, and the optimizer builder), timing, positional, kv_cache,
  decoding (the one decoding loop, decode_loop), ngram, widgets, diagrams;
- attention and modules: attention (the functions and the one Attention module), layers (FFN, norms), rnn;
- blocks: blocks;
- models: gpt, bert, seq2seq, transformer;
- generation and training: generate, train, distributed;
- pre-training: pretrain;
- the trained model live: export, live;
- each chapter's own code, above all of the core: chapters.ch01 ... chapters.ch10 (the core never imports them).
"""
from .checks import check_shape
from .utils import (claim, count_params, get_device, glue, gpu_scale, seed_everything, set_threads,
                    smoke_run, step_budget, timed)

__version__ = "0.1.0"
__all__ = ["check_shape", "claim", "count_params", "get_device", "glue", "gpu_scale", "seed_everything",
           "set_threads", "smoke_run", "step_budget", "timed"]
