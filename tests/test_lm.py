"""Unit tests for book.ngram, book.train, book.plots and book.widgets."""
import math
from collections import Counter

import pytest
import torch
from hypothesis import given, settings, strategies as st

from book import ngram, plots, widgets
from book.chapters import ch01
from book.train import (History, evaluate_lm, leaderboard_row, lm_loss, nats_to_bits, train_lm, warmup_cosine,
                        LEADERBOARD_MIME)
from book.chapters.ch01 import check_bits_per_char
from nbtools import frame_parts


# ---- ngram -------------------------------------------------------------------
def test_bigram_counts_match_a_loop():
    ids = torch.tensor([0, 1, 2, 1, 2, 0, 0])
    counts = ngram.bigram_counts(ids, 3)
    expected = torch.zeros(3, 3, dtype=torch.long)
    for a, b in zip(ids[:-1].tolist(), ids[1:].tolist()):
        expected[a, b] += 1
    assert torch.equal(counts, expected)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        ngram.bigram_counts(torch.tensor([1]), 3)
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        ngram.bigram_counts(torch.tensor([1, 5]), 3)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=2, max_size=40), st.floats(0.01, 3))
def test_bigram_rows_are_distributions(ids, smoothing):
    lp = ngram.bigram_log_probs(ngram.bigram_counts(torch.tensor(ids), 5), smoothing)
    torch.testing.assert_close(lp.exp().sum(1), torch.ones(5))


def test_bigram_log_probs_rejects_negative_smoothing():
    with pytest.raises(ValueError, match=">= 0"):
        ngram.bigram_log_probs(torch.ones(2, 2), -1)


def test_neural_bigram_starts_uniform_and_nll_bits():
    m = ch01.BigramLM(4)
    logits = m(torch.tensor([[0, 1, 2]]))
    assert logits.shape == (1, 3, 4)
    uniform = torch.full((4, 4), math.log(1 / 4))
    assert ngram.nll_bits(uniform, torch.tensor([0, 1, 2, 3])) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="vocab_size must be a positive int, got 0"):
        ch01.BigramLM(0)


def test_sample_bigram_follows_a_deterministic_table():
    lp = torch.log(torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]) + 1e-12)
    assert ngram.sample_bigram(lp, 0, 5, torch.Generator().manual_seed(0)) == [1, 2, 0, 1, 2]
    with pytest.raises(ValueError, match=">= 0"):
        ngram.sample_bigram(lp, 0, -1)


def test_ngram_counts_stats_and_bits():
    grams, contexts = ngram.ngram_counts("abab", 2)
    assert grams == Counter({("a", "b"): 2, ("b", "a"): 1}) and contexts == Counter({("a",): 2, ("b",): 1})
    s = ch01.ngram_stats("abab", "abc", 2)
    assert s["contexts"] == 2 and s["table_entries"] == 2 and s["full_table"] == 4
    assert s["unseen_rate"] == pytest.approx(0.0)
    assert ch01.ngram_stats("abab", "cc", 2)["unseen_rate"] == 1.0
    # with huge k everything is uniform: log2(V) bits
    assert ngram.ngram_bits("abab", "abba", 2, 4, k=1e9) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="n must be a positive int, got 0"):
        ngram.ngram_counts("ab", 0)
    with pytest.raises(ValueError, match="n must be a positive int, got 0"):
        ch01.ngram_stats("ab", "ab", 0)
    with pytest.raises(ValueError, match="k must be a number > 0"):
        ngram.ngram_log_prob(grams, contexts, ("a",), "b", 2, k=0)


def test_exercise_checks_accept_reference_and_reject_wrong(capsys):
    assert ch01.check_ngram_log_prob(ngram.ngram_log_prob)
    wrong = lambda c, cc, ctx, tok, V, k: math.log((c.get(tuple(ctx) + (tok,), 0) + k) / (cc.get(tuple(ctx), 0) + k))
    with pytest.raises(AssertionError, match="Hint"):
        ch01.check_ngram_log_prob(wrong)
    assert check_bits_per_char(lambda p: (-torch.log2(p)).mean())
    with pytest.raises(AssertionError, match="log2"):
        check_bits_per_char(lambda p: (-torch.log(p)).mean())
    with pytest.raises(AssertionError):
        check_bits_per_char(lambda p: (-torch.log2(p)).sum())
    assert "Correct" in capsys.readouterr().out


# ---- train ---------------------------------------------------------------------
class TinyLM(torch.nn.Module):
    def __init__(self, V=5):
        super().__init__()
        self.emb = torch.nn.Embedding(V, V)

    def forward(self, x):
        return self.emb(x)


def test_lm_loss_shapes():
    with pytest.raises(ValueError, match=r"\(B, T, V\)"):
        lm_loss(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long))
    assert lm_loss(torch.zeros(2, 3, 4), torch.zeros(2, 3, dtype=torch.long)).item() == pytest.approx(math.log(4))


def test_train_lm_learns_a_cycle_and_reports_history():
    stream = torch.arange(5).repeat(200)                 # 0 1 2 3 4 0 1 ... : next token is determined
    torch.manual_seed(0)
    model = TinyLM()
    hist = train_lm(model, stream, stream, steps=60, batch_size=8, context_len=6, eval_every=20, lr=0.3,
                    eval_batches=2, progress=False, schedule="warmup_cosine", warmup=5, grad_clip=1.0)
    assert isinstance(hist, History) and len(hist.train_loss) == hist.steps == 60
    assert [s for s, _ in hist.val] == [20, 40, 60]
    assert hist.final_val < 0.2 < hist.train_loss[0] and hist.train_seconds > 0
    assert evaluate_lm(model, stream, 4, 6, 2) == pytest.approx(hist.final_val, abs=0.05)
    with pytest.raises(ValueError, match="steps"):
        train_lm(model, stream, stream, steps=0, batch_size=1, context_len=2)
    with pytest.raises(ValueError, match="n_batches"):
        evaluate_lm(model, stream, 4, 6, 0)
    assert math.isnan(History().final_val)


def test_warmup_cosine_shape():
    lrs = [warmup_cosine(s, 100, 10, 1.0, 0.1) for s in range(120)]
    assert lrs[0] == pytest.approx(1 / 11) and lrs[9] == pytest.approx(10 / 11)   # nanoGPT: (step + 1) / (warmup + 1)
    assert lrs[10] == pytest.approx(1.0) and lrs[100] == pytest.approx(0.1) and lrs[119] == 0.1
    assert all(a >= b - 1e-12 for a, b in zip(lrs[10:], lrs[11:]))       # decays monotonically
    assert nats_to_bits(math.log(2)) == pytest.approx(1.0)


def test_leaderboard_row_bundle_and_errors():
    bundle = leaderboard_row("bigram", 1, 3.58123, 4225, 0.04)._repr_mimebundle_()
    assert bundle[LEADERBOARD_MIME] == {"name": "bigram", "chapter": 1, "val_bpc": 3.5812, "params": 4225,
                                        "train_s": 0.0}
    assert "3.581" in bundle["text/plain"] and "| 1 | bigram |" in bundle["text/markdown"]
    for bad in (float("nan"), -1.0, "3"):
        with pytest.raises(ValueError, match="positive finite"):
            leaderboard_row("x", 1, bad, 1, 1)


# ---- plots & widgets -------------------------------------------------------------
def test_heatmap_and_line_plot():
    fig = plots.heatmap(torch.rand(3, 4), list("abcd"), ["x", " ", "z"], annotate=True, title="t")
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["x", "␣", "z"]
    assert fig.axes[0].get_title() == "t" and len(fig.axes) == 2           # heatmap + colorbar
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == list("abcd")
    with pytest.raises(ValueError, match="2-D"):
        plots.heatmap(torch.rand(3))
    with pytest.raises(ValueError, match="x_labels has 2 entries"):
        plots.heatmap(torch.rand(3, 4), ["a", "b"])
    fig = plots.line_plot([1, 2, 3], {"a": [1, 2, 3], "b": [3, 2, 1]}, "x", "y", logx=True, logy=True)
    assert fig.axes[0].get_xscale() == "log" and fig.axes[0].get_legend() is not None
    with pytest.raises(ValueError, match="series 'a' has 2 values"):
        plots.line_plot([1, 2, 3], {"a": [1, 2]}, "x", "y")
    png = plots.to_png(fig)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and b"Software" not in png


def _draw(v, w=None):
    fig, ax = plots.new_figure(figsize=(1, 1))
    ax.plot([0, 1], [0, v if w is None else v * w])
    return fig


def test_slider_structure_and_link():
    import ipywidgets as ipw
    box = widgets.slider([1, 2, 3], _draw, description="n", default=2)
    row, stack = box.children
    control, readout = row.children
    assert isinstance(stack, ipw.Stack) and len(stack.children) == 3
    # the value is shown in full beside the slider (its own readout cut long values off), jslinked like the frames
    assert not control.readout and [h.value for h in readout.children] == ["<b>1</b>", "<b>2</b>", "<b>3</b>"]
    assert readout.selected_index == 1
    assert control.index == 1 and stack.selected_index == 1
    assert len({img.value for img in stack.children}) == 3          # three different frames
    assert repr(box) == "<slider n: 3 frames>"
    # each frame is an <img> with the alt text of the figure drawn for its value, shown at the figure's width
    parts = [frame_parts(f.value) for f in stack.children]
    assert [p[1] for p in parts] == [plots.display_width(_draw(v)) for v in (1, 2, 3)]
    assert [p[0] for p in parts] == [plots.to_png(_draw(v), palette=True) for v in (1, 2, 3)]
    assert [p[2].split("; ")[-1] for p in parts] == [f"'line' goes from 0 at x=0 to {v} at x=1" for v in (1, 2, 3)]


def test_slider_errors():
    with pytest.raises(ValueError, match="zero frames"):
        widgets.slider([], _draw)
    with pytest.raises(ValueError, match="not one of"):
        widgets.slider([1, 2], _draw, default=5)
    with pytest.raises(ValueError, match="at most"):
        widgets.slider(list(range(30)), _draw)
    with pytest.raises(ValueError, match="too many"):
        widgets.slider2(list(range(20)), list(range(20)), _draw)


def test_slider2_is_a_stack_of_stacks():
    import ipywidgets as ipw
    box = widgets.slider2([1, 2], [1, 2, 3], _draw, descriptions=("a", "b"), defaults=(2, 1))
    a, b, outer = box.children
    assert isinstance(outer, ipw.Stack) and outer.selected_index == 1
    assert all(isinstance(s, ipw.Stack) and len(s.children) == 3 for s in outer.children)
    alts = [[frame_parts(f.value)[2] for f in s.children] for s in outer.children]
    assert alts[1][2].endswith("'line' goes from 0 at x=0 to 6 at x=1"), alts   # draw(2, 3): the line to 2 x 3


def test_fallback_without_stack(monkeypatch):
    """ipywidgets 7 has no Stack: a live kernel swaps the image bytes instead."""
    import ipywidgets as ipw
    monkeypatch.delattr(ipw, "Stack")
    assert not widgets.has_stack()
    box = widgets.slider([1, 2, 3], _draw, default=1)
    row, image = box.children
    control, label = row.children
    assert isinstance(image, ipw.HTML) and frame_parts(image.value) is not None
    first = image.value
    control.index = 2
    assert image.value != first and label.value == "<b>3</b>"
    assert "goes from 0 at x=0 to 3 at x=1" in frame_parts(image.value)[2]      # the alt follows the frame
    box2 = widgets.slider2([1, 2], [1, 3], _draw)
    (ca, _), (cb, _) = (r.children for r in box2.children[:2])
    image2 = box2.children[2]
    before = image2.value
    cb.index = 1
    assert image2.value != before


def test_figures_display_as_png_in_ipython():
    from IPython.core.interactiveshell import InteractiveShell
    from book.plots import _show_figures_inline

    shell = InteractiveShell.instance()
    assert _show_figures_inline()
    fig, ax = plots.new_figure()
    data, _ = shell.display_formatter.format(fig)
    assert data["image/png"][:4] == b"\x89PNG"
    InteractiveShell.clear_instance()
