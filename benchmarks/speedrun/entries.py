"""The course speedrun's entries, in the order they were submitted.

Each entry is one recipe (book.train.GPTRecipe) and one line saying what it changes against the record it
challenged. The first entry is record 0 by definition; every later one becomes a record only if the acceptance
rule (rules.accept) says it beats the record standing when it was submitted, and otherwise stays in the
negative-results log with its numbers. Entries are only ever appended: an entry's recipe may not change once its
result is recorded (book/results/speedrun_<slug>.json keeps the recipe it ran; a test compares them).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from book.train import COURSE_CPU, GPTRecipe, NANOGPT_CPU

__all__ = ["Entry", "ENTRIES", "entry", "result_name"]


@dataclass(frozen=True)
class Entry:
    slug: str          # the command line's name for it, and its results' file name (speedrun_<slug with _>)
    change: str        # what it changes against the record it challenges, in one line
    recipe: GPTRecipe


# Chapter 10's modern recipe as it was when the speedrun began (book.train.MODERN_CPU at commit 2f4a539): spelled
# out here, so that a later change of MODERN_CPU cannot rewrite the history of record 2.
MODERN_CH10 = dataclasses.replace(
    COURSE_CPU, name="modern recipe", steps=400, warmup=10, weight_decay=0.0, positions="rope", norm="rms",
    activation="swiglu", qk_norm=True, tie_weights=False, zero_init=True, logit_softcap=15.0, optimizer="muon",
    muon_lr=0.05, schedule="wsd")


def _modern(name: str, **change) -> GPTRecipe:
    return dataclasses.replace(MODERN_CH10, name=name, **change)


ENTRIES = [
    Entry("nanogpt", "nanoGPT's CPU recipe: 4 layers x 128, batch 12, AdamW 1e-3, 2,000-step cosine (the baseline)",
          NANOGPT_CPU),
    Entry("course", "chapter 7's course recipe: 2 layers, batch 32, peak rate 8e-3 after 30 warmup steps, "
                    "a 600-step cosine", COURSE_CPU),
    Entry("modern", "chapter 10's modern recipe: RMSNorm, SwiGLU, RoPE, QK-norm, untied head, zero-init "
                    "projections, soft-cap 15, Muon 0.05 on hidden matrices, WSD over 400 steps", MODERN_CH10),
    # candidates against the modern recipe (submitted together; judged in this order)
    Entry("modern-wsd250", "the modern recipe with a 250-step schedule (same peak; the decay runs from step 175)",
          _modern("modern, 250-step WSD", steps=250)),
    Entry("modern-relu2", "the modern recipe with ReLU^2 (4C wide, no gate) instead of SwiGLU",
          _modern("modern, ReLU^2", activation="relu2")),
    Entry("modern-cosine300", "the modern recipe with a 300-step cosine instead of WSD (same peak and warmup)",
          _modern("modern, 300-step cosine", steps=300, schedule="cosine")),
    # candidates against the record of the first batch (the 250-step WSD), submitted together after it
    Entry("wsd250-muon0.08", "the 250-step WSD recipe with Muon's rate 0.08 instead of 0.05",
          _modern("modern, 250-step WSD, Muon 0.08", steps=250, muon_lr=0.08)),
    Entry("wsd250-learned-pos", "the 250-step WSD recipe with learned positions instead of RoPE (fewer small "
                                "operations per step)",
          _modern("modern, 250-step WSD, learned positions", steps=250, positions="learned")),
    Entry("wsd200-decay50", "a 200-step WSD that decays over its second half (from step 100), same peak",
          _modern("modern, 200-step WSD, decay over half", steps=200, decay_frac=0.5)),
    Entry("wsd250-batch24", "the 250-step WSD recipe with batches of 24 windows instead of 32 (cheaper steps)",
          _modern("modern, 250-step WSD, batch 24", steps=250, batch_size=24)),
    # candidates built on the batch-24 entry (judged against the record standing after the batch above)
    Entry("b24-no-qknorm", "the batch-24 recipe without QK-norm (two norms fewer per layer and step)",
          _modern("modern, 250-step WSD, batch 24, no QK-norm", steps=250, batch_size=24, qk_norm=False)),
    Entry("b24-batch16-wsd300", "the batch-24 recipe with batches of 16 and a 300-step WSD (same peak)",
          _modern("modern, 300-step WSD, batch 16", steps=300, batch_size=16)),
    # against record 4 (the 200-step WSD decaying over half): its schedule shape with batches of 24, 230 steps
    Entry("d50-batch24-wsd230", "wsd200-decay50's schedule shape (decay over the second half) with batches of 24 and "
                                "230 steps", _modern("modern, 230-step WSD decaying over half, batch 24", steps=230,
                                                     batch_size=24, decay_frac=0.5)),
    Entry("d50-batch16-wsd360", "wsd200-decay50's schedule shape with batches of 16 and 360 steps (batch 16 over 300 "
                                "steps, `b24-batch16-wsd300`, came close)",
          _modern("modern, 360-step WSD decaying over half, batch 16", steps=360, batch_size=16, decay_frac=0.5)),
    # throughput: the same maths through torch.compile (compiled and warmed up before the clock starts, as
    # modded-nanoGPT does; book.train.RecipeRun keeps those wall seconds in compile_s). Submitted together.
    Entry("modern-compiled", "the modern recipe (`modern`) trained through torch.compile: fused elementwise "
                             "operations, the same steps", _modern("modern, compiled", compile=True)),
    Entry("cosine300-compiled", "the 300-step cosine (`modern-cosine300`) trained through torch.compile",
          _modern("modern, 300-step cosine, compiled", steps=300, schedule="cosine", compile=True)),
    # closing the loop: the standing record without the changes that did not pay on chapter 10's ladder
    # (book/results/modern_ladder.csv: RMSNorm, SwiGLU, zero-init projections and the soft-cap saved no steps)
    Entry("cosine300-compiled-lean", "the standing record (`cosine300-compiled`) without what did not pay on the "
                                     "ladder: LayerNorm for RMSNorm, GELU for SwiGLU, no zero-init, no soft-cap",
          _modern("modern, 300-step cosine, compiled, lean", steps=300, schedule="cosine", compile=True,
                  norm="layer", activation="gelu", zero_init=False, logit_softcap=None)),
]


def entry(slug: str) -> Entry:
    """The entry named `slug`."""
    for e in ENTRIES:
        if e.slug == slug:
            return e
    raise ValueError(f"no speedrun entry {slug!r}; the entries are {[e.slug for e in ENTRIES]}")


def result_name(slug: str) -> str:
    """The recorded result's stem in book/results (book.results.read_rows(result_name(slug)))."""
    return "speedrun_" + slug.replace("-", "_").replace(".", "_")
