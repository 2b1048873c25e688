"""tools/render.py: glued values written into the prose, MyST fences made plain, solutions hidden (no kernel)."""
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from nbtools import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import render  # noqa: E402  (the module tools/execute.py imports)
import execute  # noqa: E402

PREFIX = "application/papermill.record/"


def glue_output(name, text, prefix=PREFIX, **extra):
    data = {prefix + "text/plain": text, **{prefix + k: v for k, v in extra.items()}}
    return new_output("display_data", data=data, metadata={"scrapbook": {"name": name, "mime_prefix": prefix},
                                                           "book_tolerance": {}})


def notebook(*markdown, values=None):
    """A notebook: one code cell gluing `values` ({name: text/plain}), then the markdown cells."""
    values = {"bpc": "'2.574'", "n": "65", "ratio": "0.123456"} if values is None else values
    code = new_code_cell("glue(...)", outputs=[glue_output(k, v) for k, v in values.items()], execution_count=1)
    return new_notebook(cells=[code] + [new_markdown_cell(m) for m in markdown])


VALUES = render.glue_values(notebook())


@pytest.mark.parametrize("role, shown", [
    ("{glue:text}`bpc`", "2.574"),            # a glued string: myst-nb strips the repr's quotes
    ("{glue:text}`n`", "65"),
    ("{glue:text}`ratio:.2f`", "0.12"),       # a format spec
    ("{glue:text}`n:,d`", "65"),
    ("{glue}`bpc`", "'2.574'"),               # {glue} pastes the text/plain repr as it is
    ("{glue:}`n`", "65"),
    ("{glue:any}`n`", "65"),
])
def test_roles_show_what_the_website_shows(role, shown):
    assert render.render_glue(f"a {role} b", VALUES) == f"a {shown} b"


def test_values_are_read_as_myst_nb_reads_them():
    nb = notebook(values={"x": "'1'"})
    nb.cells.append(new_code_cell("", outputs=[glue_output("x", "'2'"), glue_output("md", "'m'", prefix="",
                                                                                 **{"text/markdown": "**m**"})]))
    values = render.glue_values(nb)
    assert values["x"] == {"text/plain": "'2'"}, "a name glued twice keeps its last value"
    assert render.render_glue("{glue:md}`md` {glue:text}`x`", values) == "**m** 2"


def test_markup_in_a_value_stays_plain_text():
    values = render.glue_values(notebook(values={"v": "'a*b | c_d $5'"}))
    assert render.render_glue("{glue:text}`v`", values) == r"a\*b \| c\_d \$5"


@pytest.mark.parametrize("text, why", [
    ("{glue:text}`missing`", "no code cell glues 'missing'"),
    ("{glue:text}`other.ipynb::bpc`", "another notebook"),
    ("{glue:figure}`bpc`", "unknown glue role"),
])
def test_roles_that_cannot_be_rendered_are_refused(text, why):
    with pytest.raises(render.RenderError, match=why):
        render.render_glue(text, VALUES)


def test_rich_values_are_not_pasted_as_plain_text():
    nb = notebook(values={})
    nb.cells[0].outputs = [glue_output("h", "'x'", **{"text/html": "<b>x</b>"})]
    with pytest.raises(render.RenderError, match="plain-text"):
        render.render_glue("{glue}`h`", render.glue_values(nb))
    with pytest.raises(render.RenderError, match="no text/markdown"):
        render.render_glue("{glue:md}`bpc`", VALUES)


DROPDOWN = "Question?\n:::{dropdown} Solution\nThe answer, with $x^2$.\n\n- a list\n:::\nNext question."
DETAILS = ("Question?\n\n<details><summary>Solution</summary>\n\nThe answer, with $x^2$.\n\n- a list\n\n</details>"
           "\n\nNext question.")


def test_dropdown_becomes_details_with_blank_lines_around_the_markdown():
    assert render.convert_fences(DROPDOWN) == DETAILS
    assert render.convert_fences(DETAILS) == DETAILS


def test_fences_nest_take_options_and_become_blockquotes():
    text = "::::{dropdown} Hint\n:open:\n:::{note}\nLook *here*.\n\nTwice.\n:::\n::::"
    assert render.convert_fences(text) == ("<details open><summary>Hint</summary>\n\n"
                                           "> **Note**\n>\n> Look *here*.\n>\n> Twice.\n\n</details>")
    assert render.convert_fences(":::{admonition} Why?\nBecause.\n:::") == "> **Why?**\n>\n> Because."


@pytest.mark.parametrize("text, why", [(":::{dropdown} S\nnever closed", "never closed"),
                                       (":::{figure} a.png\n:::", "no plain-markdown form")])
def test_bad_fences_are_refused(text, why):
    with pytest.raises(render.RenderError, match=why):
        render.convert_fences(text)


def test_notebook_keeps_its_template_and_renders_idempotently():
    template = "BPC {glue:text}`bpc`.\n:::{dropdown} Solution\n{glue:text}`n` letters.\n:::"
    nb = notebook(template, "Plain text, nothing to render.")
    render.render_notebook(nb)
    cell, plain = nb.cells[1], nb.cells[2]
    assert cell.source == "BPC 2.574.\n\n<details><summary>Solution</summary>\n\n65 letters.\n\n</details>"
    assert cell.metadata["book"]["template"] == render.convert_fences(template)
    assert "book" not in plain.metadata, "a cell with nothing to render carries no template"
    once = nbformat.writes(nb)
    render.render_notebook(nb)
    assert nbformat.writes(nb) == once


def test_the_template_is_the_source_of_truth():
    nb = notebook("BPC {glue:text}`bpc`.")
    render.render_notebook(nb)
    before = render.glue_values(nb)
    nb.cells[0].outputs = [glue_output("bpc", "'2.401'")]   # a new run glued a new value
    with pytest.raises(render.RenderError, match="edited by hand"):
        render.render_notebook(nb)   # the text is not what the stored values render to ...
    render.render_notebook(nb, rendered_with=before)   # ... but what the values before the run rendered to
    assert nb.cells[1].source == "BPC 2.401." and "{glue" in nb.cells[1].metadata["book"]["template"]


def test_a_hand_edited_rendered_cell_is_refused_and_kept():
    nb = notebook("BPC {glue:text}`bpc`.")
    render.render_notebook(nb)
    nb.cells[1].source = "BPC 2.574, edited."
    assert render.stale_cells(nb) and "cell 1" in render.stale_cells(nb)[0]
    with pytest.raises(render.RenderError, match="edited by hand"):
        render.render_notebook(nb)
    assert nb.cells[1].source == "BPC 2.574, edited."


def test_myst_written_into_a_rendered_cell_is_its_new_template():
    nb = notebook("BPC {glue:text}`bpc`.")
    render.render_notebook(nb)
    nb.cells[1].source = "Now {glue:text}`n` letters."
    render.render_notebook(nb)
    assert nb.cells[1].source == "Now 65 letters."
    assert nb.cells[1].metadata["book"]["template"] == "Now {glue:text}`n` letters."


def test_templates_can_be_restored_for_editing():
    nb = notebook("BPC {glue:text}`bpc`.")
    render.render_notebook(nb)
    render.restore_templates(nb)
    assert nb.cells[1].source == "BPC {glue:text}`bpc`." and "book" not in nb.cells[1].metadata


@pytest.mark.parametrize("source, tags, hidden_tags, jupyter", [
    ("# Solution\nx = 1", ["hide-input"], ["hide-cell"], {"source_hidden": True, "outputs_hidden": True}),
    ("# Solution (b)\nx", ["hide-input", "hide-cell"], ["hide-cell"], {"source_hidden": True, "outputs_hidden": True}),
    ("# Solution\nx", ["hide-cell", "nbval-ignore-output"], ["hide-cell", "nbval-ignore-output"],
     {"source_hidden": True, "outputs_hidden": True}),
    ("print(table)", ["hide-input"], ["hide-input"], {"source_hidden": True}),   # not a solution: output shown
    ("x = 1", [], [], None),
])
def test_solution_cells_are_hidden_whole_on_the_site_and_in_jupyterlab(source, tags, hidden_tags, jupyter):
    cell = new_code_cell(source, metadata={"tags": list(tags)} if tags else {})
    render.hide_solution(cell)
    assert cell.metadata.get("tags", []) == hidden_tags
    assert cell.metadata.get("jupyter") == jupyter
    if source.startswith("# Solution"):   # Colab: a form cell, code collapsed; rendering twice changes nothing
        first = source.splitlines()[0][2:]
        assert cell.source.splitlines()[0] == f'#@title {first} {{ display-mode: "form" }}'
        assert cell.source.splitlines()[1:] == source.splitlines()[1:] and render.is_solution(cell.source)
        again = cell.source
        render.hide_solution(cell)
        assert cell.source == again


def test_render_only_cli_rewrites_without_a_kernel(tmp_path, capsys):
    path = tmp_path / "ch.ipynb"
    nb = notebook("BPC {glue:text}`bpc`.")
    nb.cells[0].source = "raise SystemExit('must not run')"
    nbformat.write(nb, path)
    assert execute.main(["--render-only", str(path)]) == 0
    assert nbformat.read(path, as_version=4).cells[1].source == "BPC 2.574."
    once = path.read_bytes()
    assert execute.main(["--render-only", str(path)]) == 0 and path.read_bytes() == once
    assert "unchanged" in capsys.readouterr().out
    assert execute.main(["--templates", str(path)]) == 0
    assert nbformat.read(path, as_version=4).cells[1].source == "BPC {glue:text}`bpc`."


def test_render_only_cli_reports_what_it_cannot_render(tmp_path, capsys):
    path = tmp_path / "ch.ipynb"
    nbformat.write(notebook("{glue:text}`nowhere`"), path)
    before = path.read_bytes()
    assert execute.main(["--render-only", str(path)]) == 1
    assert "nowhere" in capsys.readouterr().err and path.read_bytes() == before
