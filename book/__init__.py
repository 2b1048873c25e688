"""`book`: the helper package of the course "Transformers, Gap by Gap".

Organised by concept: utils, data, tokenizers, ngram, train, plots, widgets, and later
attention, positional, timing, layers, models, generate, rnn, seq2seq, tasks, transformer, objectives, bert, pretrain,
pretrained.
"""
from .utils import (check_shape, claim, count_params, get_device, glue, gpu_scale, seed_everything, set_threads,
                    smoke_run, step_budget, timed)

__version__ = "0.1.0"
__all__ = ["check_shape", "claim", "count_params", "get_device", "glue", "gpu_scale", "seed_everything",
           "set_threads", "smoke_run", "step_budget", "timed"]
