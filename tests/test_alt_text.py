"""Alt text from the data (issue 35 item 4): every figure the book draws describes what it shows and its key values
(book.plots.alt_text), a notebook's PNG output carries it as output metadata, the site writes it into <img alt>
(_ext/figure_alt.py), and every slider frame carries the alt of the figure drawn for its value (book.widgets).

test_every_committed_figure_and_slider_frame_has_alt_text checks the committed chapters: it passes once they are
executed with this code."""
import base64
import importlib.util
import json

import numpy as np
import pytest
from docutils import nodes
from docutils.utils import new_document
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser

from book import plots, widgets
from book.diagrams import Diagram
from book.plots import alt_text
from nbtools import ROOT, chapter_paths, frame_parts, notebook_images


def _ext(name: str):
    spec = importlib.util.spec_from_file_location(f"_ext_{name}", ROOT / "_ext" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- the helpers describe what they draw ---------------------------------------------------------------------
def test_heatmap_names_each_rows_largest_entry_and_follows_the_data():
    w = np.array([[1.0, 0.0, 0.0], [0.2, 0.8, 0.0], [0.1, 0.71, 0.19]])
    tokens = ["the", "cat", "sat"]
    alt = alt_text(plots.heatmap(w, tokens, tokens, title="attention of 'the cat sat'", xlabel="key", ylabel="query"))
    assert alt.startswith("attention of 'the cat sat': heatmap of 3 rows (query) by 3 columns (key)")
    assert "values from 0 to 1" in alt
    assert "row 'sat' puts 0.71 on 'cat'" in alt and "row 'cat' puts 0.8 on 'cat'" in alt
    w[2] = [0.05, 0.15, 0.8]                      # other data, other words
    alt = alt_text(plots.heatmap(w, tokens, tokens))
    assert "row 'sat' puts 0.8 on 'sat'" in alt and "0.71" not in alt


def test_a_big_heatmap_names_its_strongest_cells_and_labels_read_as_on_the_axes():
    w = np.zeros((12, 12))
    w[3, 7], w[9, 1] = 0.9, 0.6
    labels = [" "] + list("abcdefghij") + ["\n"]
    alt = alt_text(plots.heatmap(w, labels, labels))
    assert "strongest cells: row 'c' column 'g' 0.9, row 'i' column 'a' 0.6" in alt
    alt = alt_text(plots.heatmap(np.eye(2), [" ", "\n"], ["x", "y"]))
    assert "row 'x' puts 1 on '␣'" in alt and "row 'y' puts 1 on '\\n'" in alt


def test_a_similarity_matrix_names_its_strongest_pairs_off_the_diagonal():
    c = np.array([[1.0, 0.8, -0.2], [0.8, 1.0, 0.1], [-0.2, 0.1, 1.0]])
    alt = alt_text(plots.heatmap(c, list("abc"), list("abc")))
    assert "every row has the largest value 1 on its own column (the diagonal)" in alt
    assert "strongest pairs off the diagonal: 'a' and 'b' 0.8, 'c' and 'b' 0.1, 'a' and 'c' -0.2" in alt
    assert alt_text(plots.heatmap(np.eye(3), list("abc"), list("abc"))).endswith("every other entry is 0")


def test_a_title_set_after_drawing_is_in_the_alt_text():
    fig = plots.heatmap(np.eye(2), ["a", "b"], ["a", "b"])
    fig.axes[0].set_title("set later")
    assert alt_text(fig).startswith("set later: heatmap")


def test_line_plot_gives_each_series_start_end_and_extremes():
    alt = alt_text(plots.line_plot([2, 4, 8, 16], {"RNN": [0.9, 0.4, 0.5, 0.3], "LSTM": [1.0, 1.0, 0.95, 0.9]},
                                   "distance k", "accuracy", title="Recall", logx=True))
    assert alt.startswith("Recall: line plot of accuracy against distance k; x from 2 to 16 (log scale)")
    assert "'RNN' goes from 0.9 at x=2 to 0.3 at x=16" in alt
    assert "'LSTM' goes from 1 at x=2 to 0.9 at x=16" in alt
    alt = alt_text(plots.line_plot([1, 2, 3], {"loss": [3.0, 1.25, 2.0]}, "step", "bits"))
    assert "'loss' goes from 3 at x=1 to 2 at x=3 (lowest 1.25 at x=2)" in alt


def test_unlabelled_seed_lines_are_named_after_the_labelled_line_drawn_alike():
    """Two groups in one colour, told apart by line style: each seed is named after its own group, never the other
    (chapter 2's recall plot); a line that shares only the colour is not called one of that label's lines."""
    fig, ax = plots.new_figure()
    for style, name in ((":", "LSTM, k uniform"), ("-", "LSTM, curriculum")):
        for seed in range(3):
            ax.plot([1, 2], [0.5 + 0.1 * seed, 0.9], style, color="tab:blue", label=name if seed == 0 else None)
    ax.plot([1.5], [0.2], "o", color="tab:blue")         # markers only: a seed's dot, named after the label
    ax.plot([1, 2], [0.3, 0.3], "-.", color="tab:blue")   # a line that shares only the colour
    text = alt_text(fig)
    assert "'LSTM, curriculum #2'" in text and "'LSTM, k uniform #2'" in text
    assert "LSTM, k uniform #3" not in text and "LSTM, curriculum #3" not in text
    assert "a line coloured like" in text and "'LSTM, curriculum, seeds #1'" in text


def test_an_explicit_alt_replaces_the_description_and_a_bad_one_is_refused():
    fig = plots.heatmap(np.eye(2), alt="two tokens, each attending to itself")
    assert alt_text(fig) == "two tokens, each attending to itself"
    fig = plots.line_plot([1, 2], {"a": [1, 2]}, "x", "y", alt="a rising line")
    assert alt_text(fig) == "a rising line"
    fig, ax = plots.new_figure(alt="made by hand")
    ax.plot([1, 2], [3, 4])
    assert alt_text(fig) == "made by hand"
    for bad in ("", "  ", 3):
        with pytest.raises(ValueError, match=r"alt must be a non-empty str describing the figure, got"):
            plots.new_figure(alt=bad)
    with pytest.raises(TypeError, match="alt_text needs a matplotlib Figure, got str"):
        alt_text("fig")


# ---- anything drawn on an axes is described from its artists -------------------------------------------------
def test_raw_matplotlib_lines_bars_points_and_reference_lines_are_described():
    fig, (a, b) = plots.new_figure(ncols=2)
    a.plot([0, 10, 20], [4.0, 2.5, 3.0], label="validation")
    a.axhline(2.2)
    a.set(xlabel="step", ylabel="bits/char", title="loss")
    b.bar(range(3), [5, 2, 7], tick_label=["add-k", "KN", "GPT"])
    b.scatter([1, 2], [3, 4])
    fig.suptitle("two panels")
    alt = alt_text(fig)
    assert alt.startswith("two panels. panel 1 of 2, loss: chart of bits/char against step")
    assert "'validation' goes from 4 at x=0 to 3 at x=20 (lowest 2.5 at x=10)" in alt
    assert "reference line at y=2.2" in alt
    assert "panel 2 of 2" in alt and "bars: add-k 5, KN 2, GPT 7" in alt
    assert "2 points with x from 1 to 2 and y from 3 to 4" in alt


def test_vertical_reference_lines_twin_axes_and_arrows_are_described():
    fig, ax = plots.new_figure()
    ax.plot([1, 2, 3], [0.2, 0.9, 0.5], label="accuracy")
    ax.axvline(15.5, label="longest training input")
    right = ax.twinx()
    right.plot([1, 2, 3], [1.0, -1.0, 0.0], label="Delta")
    alt = alt_text(fig)
    assert "panel" not in alt and "'longest training input' reference line at x=15.5" in alt
    assert "second axis: " in alt and "'Delta' goes from 1 at x=1 to 0 at x=3 (lowest -1 at x=2)" in alt
    fig, ax = plots.new_figure()
    ax.annotate("", (0.5, 0.8), (0, 0), arrowprops=dict(arrowstyle="->"))
    ax.set_title("pair 0")
    assert alt_text(fig) == "pair 0; 1 arrow: from (0, 0) to (0.5, 0.8)"


def test_unlabelled_lines_take_the_legend_label_of_their_colour():
    fig, ax = plots.new_figure()
    for seed in range(2):
        ax.plot([1, 2], [0.5 + seed, 0.25], color="tab:red")
    ax.plot([], [], color="tab:red", label="RNN")           # one legend entry for the seeds' lines
    ax.plot([1, 2], [1, 2], color="tab:blue")
    alt = alt_text(fig)
    assert "'RNN #1' goes from 0.5 at x=1 to 0.25 at x=2; 'RNN #2' goes from 1.5 at x=1 to 0.25 at x=2" in alt
    assert "'line 3' goes from 1 at x=1 to 2 at x=2" in alt


def test_a_dot_plot_gives_each_named_rows_values():
    fig, axes = plots.new_figure(ncols=2, sharey=True)
    names = ["baseline", "+ RoPE"]
    for ax in axes:
        for y, _ in enumerate(names):
            ax.scatter([100 + 10 * y, 120 + 10 * y], [y, y])
            ax.plot([110 + 10 * y] * 2, [y - 0.3, y + 0.3], color="k")    # the mean's tick: not a dot
        ax.axvline(300)
    axes[0].set_yticks(range(2), names)
    axes[0].set_xlabel("steps")
    alt = alt_text(fig)
    assert alt.startswith("panel 1 of 2, dot plot of steps for 2 rows; + RoPE: 110, 130; baseline: 100, 120; "
                          "reference line at x=300")
    fig, ax = plots.new_figure()
    ax.plot([1, 2, 3], [10, 20, 15])
    ax.set_yticks([10, 20], ["ten", "twenty"])   # named ticks on a numeric axis: still a line
    assert "goes from 10 at x=1 to 15 at x=3 (highest 20 at x=2)" in alt_text(fig)


def test_an_image_is_described_like_a_heatmap_and_a_colorbar_is_not_a_panel():
    fig, ax = plots.new_figure()
    im = ax.imshow(np.array([[0.1, 0.9], [0.7, 0.3]]))
    ax.set_yticks([0, 1], ["p", "q"])
    fig.colorbar(im, ax=ax)
    alt = alt_text(fig)
    assert "panel" not in alt and "row 'p' puts 0.9 on '1', row 'q' puts 0.7 on '0'" in alt


def test_mathtext_reads_as_words_and_long_text_is_cut():
    fig, ax = plots.new_figure()
    ax.plot([0, 1], [0, 1])
    ax.set_title(r"$\alpha_t$ over $\overrightarrow{h}_1$ and \n")
    assert alt_text(fig).startswith("α_t over h→_1 and \\n:")
    fig, ax = plots.new_figure()
    ax.set_title("x" * 3000)
    ax.plot([0, 1], [0, 1])
    alt = alt_text(fig)
    assert len(alt) == plots.ALT_MAX_CHARS and alt.endswith("…")


# ---- diagrams --------------------------------------------------------------------------------------------------
def test_a_diagram_names_its_title_boxes_frames_and_labels():
    d = Diagram(6, 3, title="one residual block")
    d.box(1, 1.5, "LayerNorm", role="norm")
    d.box(3, 1.5, r"attention $\times 4$", role="attn")
    d.group(0.2, 0.5, 4, 2.5, "x N layers")
    d.arrow((1.6, 1.5), (2.3, 1.5), text="x")
    d.circle(5, 1.5)
    assert alt_text(d.figure) == ("Diagram: one residual block; boxes: LayerNorm, attention × 4; frames: x N layers; "
                                  "labels: x, +")
    assert alt_text(Diagram(2, 2, alt="an empty canvas").figure) == "an empty canvas"
    with pytest.raises(ValueError, match="alt must be a non-empty str describing the diagram, got ''"):
        alt_text(Diagram(2, 2, alt="").figure)


def test_every_chapter_diagram_names_its_boxes():
    from book.chapters import ch02, ch03
    for fig in (ch02.draw_rnn_encoder_decoder(), ch03.draw_bahdanau_attention()):
        alt = alt_text(fig)
        assert alt.startswith("Diagram: ") and "boxes: red, " in alt and "$" not in alt, alt


# ---- notebooks, slider frames and the site ---------------------------------------------------------------------
def test_a_shown_figure_carries_its_alt_text_in_the_output_metadata():
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    try:
        assert plots._show_figures_inline()
        fig = plots.line_plot([1, 2], {"a": [1.5, 2.5]}, "x", "y")
        data, meta = shell.display_formatter.format(fig)
        assert data["image/png"][:4] == b"\x89PNG"
        assert meta["image/png"] == {"width": plots.display_width(fig), "alt": alt_text(fig)}
        assert "'a' goes from 1.5 at x=1 to 2.5 at x=2" in meta["image/png"]["alt"]
    finally:
        InteractiveShell.clear_instance()


def _draw(v):
    fig, ax = plots.new_figure(figsize=(1, 1))
    ax.plot([0, 1], [0, v], label="slope")
    ax.set_title(f"slope {v}")
    return fig


def test_slider_frames_are_images_with_the_alt_of_their_figure():
    box = widgets.slider([1, 2, 3], _draw, description="slope", default=2)
    frames = [frame_parts(f.value) for f in box.children[1].children]
    assert [alt for _, _, alt in frames] == [alt_text(_draw(v)) for v in (1, 2, 3)]
    assert [alt.split(":")[0] for _, _, alt in frames] == ["slope 1", "slope 2", "slope 3"]
    assert all(png[:4] == b"\x89PNG" for png, _, _ in frames)
    html = widgets.frame_html(b"\x89PNG", 100, 'a "quoted" <b> & more')
    assert frame_parts(html) == (b"\x89PNG", 100, 'a "quoted" <b> & more')
    with pytest.raises(ValueError, match="a slider frame needs alt text describing it, got ''"):
        widgets.frame_html(b"\x89PNG", 100, "")


def _png_output(png: bytes, alt=None) -> dict:
    meta = {"image/png": {"width": 100, **({"alt": alt} if alt else {})}}
    return {"output_type": "display_data", "data": {"image/png": base64.b64encode(png).decode() + "\n"},
            "metadata": meta}


def test_the_site_extension_writes_each_outputs_alt_into_its_image():
    ext = _ext("figure_alt")
    nb = {"cells": [{"cell_type": "code", "outputs": [_png_output(b"one", "the first figure"), _png_output(b"two")]}]}
    alts = ext.output_alts(nb)
    import hashlib
    one, two = (hashlib.sha256(b).hexdigest() for b in (b"one", b"two"))
    assert alts == {one: "the first figure"}
    doc = new_document("nb", get_default_settings(Parser))
    doc += [nodes.image(uri=f"_build/jupyter_execute/{one}.png"), nodes.image(uri=f"{two}.png")]
    assert ext.apply_alts(doc, alts) == 1
    images = list(doc.findall(nodes.image))
    assert images[0]["alt"] == "the first figure" and "alt" not in images[1]


def test_the_site_loads_the_extension():
    import yaml
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf8"))
    assert config["sphinx"]["local_extensions"].get("figure_alt") == "_ext"


PATHS = chapter_paths()


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_every_committed_figure_and_slider_frame_has_alt_text(path):
    """Every inline figure (its output's alt metadata) and every slider frame (its <img alt>) of a committed chapter
    says what it shows: not missing, not a file path. Passes once the chapter is executed with book.plots' alt."""
    images = notebook_images(json.loads(path.read_text(encoding="utf8")))
    assert images, f"{path.stem}: no figures found"
    missing = [where for where, _, _, alt in images if not (alt and alt.strip())]
    assert not missing, f"{path.stem}: {len(missing)} of {len(images)} figures/frames without alt text: {missing[:8]}"
    paths = [where for where, _, _, alt in images if alt.strip().endswith((".png", ".jpg", ".svg"))]
    assert not paths, f"{path.stem}: alt text that is a file path: {paths}"
    numbers = [where for where, _, _, alt in images if not any(ch.isdigit() for ch in alt)
               and not alt.startswith("Diagram")]
    assert not numbers, f"{path.stem}: figures whose alt names no value: {numbers}"


def test_slider_frames_are_palette_pngs_a_third_the_size():
    """Frames are stored with 256 colours: the same picture to the eye, about a third of the bytes."""
    import io

    import torch
    from PIL import Image

    from book import plots
    fig = plots.heatmap(torch.rand(12, 12, generator=torch.Generator().manual_seed(0)), title="weights")
    full, small = plots.to_png(fig), plots.to_png(fig, palette=True)
    assert Image.open(io.BytesIO(small)).mode == "P" and Image.open(io.BytesIO(full)).size == \
        Image.open(io.BytesIO(small)).size
    assert len(small) < 0.7 * len(full)
