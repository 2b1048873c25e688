"""The learner's path (tools/learner_path.py; issues 36 and 40): a chapter's main path is at most 3,000 words, its
visible code cells at most 20 lines, and no printed line wider than 100 characters. COVERED lists the chapters
brought onto the path so far; the others are measured and reported, and join COVERED as they are reworked.
Optional deep dives fold on the website (_ext/deep_dive.py), checked here on a small document.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT, load_tool
from nbtools import chapter_paths

lp = load_tool("learner_path")
COVERED = ["01_next_token", "02_rnn_limits", "03_bahdanau_attention", "04_self_attention", "05_positional_encoding",
           "06_multihead_block", "07_training_gpt", "08_encoder_decoder", "09_bert_gpt_t5", "10_modern_gpt"]


@pytest.mark.parametrize("name", COVERED)
def test_a_covered_chapter_reads_in_one_sitting(name):
    m = lp.measure(ROOT / "chapters" / f"{name}.ipynb")
    assert m["main_words"] <= lp.MAX_MAIN_WORDS, f"{name}: main path of {m['main_words']} words"
    assert not m["long_cells"], f"{name}: visible code cells over {lp.MAX_CELL_LINES} lines: {m['long_cells']}"
    assert not m["wide_lines"], f"{name}: printed lines over {lp.MAX_OUTPUT_CHARS} characters: {m['wide_lines']}"


def test_every_chapter_is_measured():
    names = [p.stem for p in chapter_paths()]
    assert set(COVERED) <= set(names)
    for p in chapter_paths():
        m = lp.measure(p)
        assert m["main_words"] > 300 and m["visible_code_lines"] > 50, m   # a chapter, not an empty file


def test_deep_dives_and_exercises_are_off_the_main_path(tmp_path):
    md = nbformat.v4.new_markdown_cell
    nb = nbformat.v4.new_notebook(cells=[
        md("# 9. A chapter\n\none two three"),
        md("## The idea\n\nfour five"),
        nbformat.v4.new_code_cell("\n".join(f"x{i} = {i}" for i in range(21))),
        md("## Deep dive (optional): more\n\nsix seven eight\n\n### Inside it\n\nnine"),
        nbformat.v4.new_code_cell("print('y' * 101)", outputs=[nbformat.v4.new_output("stream", text="y" * 101)]),
        md("## The gap\n\nten"),
        md("## Exercises\n\neleven twelve"),
    ])
    path = tmp_path / "99_chapter.ipynb"
    nbformat.write(nb, path)
    m = lp.measure(path)
    assert (m["main_words"], m["deep_words"], m["exercise_words"]) == (13, 10, 3)   # headings count too
    assert m["long_cells"] == [(2, 21)] and m["wide_lines"] == [(4, 101)]


def test_a_deep_dive_section_folds_on_the_site():
    from docutils import nodes
    spec = importlib.util.spec_from_file_location("deep_dive", Path(ROOT) / "_ext" / "deep_dive.py")
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    doc = nodes.document(None, None)
    for title in ("The idea", "Deep dive (optional): the cost"):
        sec = nodes.section()
        sec += nodes.title(text=title)
        sec += nodes.paragraph(text="body")
        doc += sec
    ext.fold_deep_dives(None, doc)
    plain, deep = doc.children
    assert not [n for n in plain.findall(nodes.raw)]
    raws = [n.astext() for n in deep.findall(nodes.raw)]
    assert raws[0].startswith('<details class="deep-dive"><summary>') and raws[-1].strip() == "</details>"
    assert deep.index(deep.children[1]) == 1 and isinstance(deep.children[1], nodes.raw)   # after the title


def test_the_site_folds_chapter_1s_deep_dive(site_html):
    page = (site_html / "chapters" / "01_next_token.html").read_text(encoding="utf8")
    start = page.index('<details class="deep-dive">')
    assert "Deep dive (optional): what the trained rows learned" in page[start - 3000:start]
    end = page.index("</details>", start)
    assert start < page.index("mean cosine", start) < end          # the section's code and output are folded too
    assert "Sampling: letting the model write" in page[end:]        # and the next section is not
