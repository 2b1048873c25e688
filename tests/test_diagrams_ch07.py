"""Chapter 7's diagram: the GPT stack with the KV cache draws, with its labels."""
from book import plots
from book.chapters.ch07 import draw_gpt_stack


def test_gpt_stack_diagram_has_its_parts():
    fig = draw_gpt_stack()
    labels = " | ".join(t.get_text() for t in fig.axes[0].texts)
    for part in ("tokens", "token embedding", "position", "× N layers", "LayerNorm", "causal self-attention",
                 "feed-forward", "final LayerNorm", "lm_head", "next-token logits", "KV cache", "append",
                 "read all K, V", "query"):
        assert part in labels, part
    assert plots.to_png(fig)[:4] == b"\x89PNG"
