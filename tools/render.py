"""Render a chapter's MyST-only markdown into text that every reader's tool shows the same way.

The website (myst-nb) pastes glued values into the prose with {glue:text}`name` roles and folds solutions
into :::{dropdown} fences; JupyterLab, Colab and GitHub show both as raw markup. `render_notebook` writes
each glued value, read from the notebook's stored outputs, into the markdown cells and keeps the original
text, roles included, as the cell's template in `cell.metadata["book"]["template"]`: the template is the
source of truth, the cell text is rendered from it, so rendering twice gives the same notebook. Colon
fences become plain HTML and markdown (<details> for dropdowns, blockquotes for admonitions) in the
template itself, since that form renders everywhere, the website included. Solution code cells are
hidden whole, on the website (tag hide-cell) and in JupyterLab (metadata.jupyter).

Used by tools/execute.py after every run, and by `tools/execute.py --render-only` without one.
"""
from __future__ import annotations

import re

from myst_nb.core.variables import format_plain_text   # the website's own {glue:text} formatting

ROLE = re.compile(r"\{glue(?::(?P<kind>[a-z]*))?\}`(?P<body>[^`]+)`")
FENCE = re.compile(r"^(?P<colons>:{3,})\{(?P<name>[a-z][\w-]*)\}[ \t]*(?P<arg>.*?)[ \t]*$")
CLOSE = re.compile(r"^(?P<colons>:{3,})[ \t]*$")
OPTION = re.compile(r"^:(?P<key>[\w-]+):[ \t]*(?P<value>.*)$")
MYST = re.compile(r"\{glue(?::[a-z]*)?\}`|^:{3,}\{", re.M)
ESCAPE = re.compile(r"([\\`*_\[\]<>$|~])")   # characters inline markdown would read as markup
ADMONITIONS = {"note", "tip", "hint", "important", "warning", "caution", "attention", "danger", "error", "seealso"}
HIDDEN = {"hide-input": {"source_hidden": True}, "hide-output": {"outputs_hidden": True},
          "hide-cell": {"source_hidden": True, "outputs_hidden": True}}


class RenderError(ValueError):
    """A markdown cell that cannot be rendered: an unknown glue name or role, an unclosed or unknown fence,
    or rendered text edited by hand (the edit would be lost)."""


# ---- glued values -------------------------------------------------------------------------------
def glue_values(nb) -> dict:
    """{name: mime bundle} of every glued value in the stored outputs, as myst-nb reads them (prefix
    stripped; a name glued twice keeps its last value)."""
    values = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            scrap = (out.get("metadata") or {}).get("scrapbook")
            if scrap:
                cut = len(scrap.get("mime_prefix", ""))
                values[scrap["name"]] = {mime[cut:]: value for mime, value in out.get("data", {}).items()}
    return values


def escape_markdown(text: str) -> str:
    """Backslash-escape what inline markdown would read as markup, so the value shows as plain text."""
    return ESCAPE.sub(r"\\\1", text)


def paste(kind: str, body: str, values: dict) -> str:
    """The text myst-nb shows for one role: {glue:text}`name[:format]`, {glue}`name` or {glue:md}`name`."""
    if kind not in ("", "any", "text", "md"):
        raise RenderError(f"{{glue:{kind}}}`{body}`: unknown glue role")
    if "::" in body:
        raise RenderError(f"{{glue}}`{body}`: values glued in another notebook cannot be rendered here")
    key, _, spec = body.rpartition(":") if kind == "text" and ":" in body else (body, "", "s")
    if key not in values:
        raise RenderError(f"{{glue:{kind}}}`{body}`: no code cell glues {key!r} (re-execute the notebook?)")
    data = values[key]
    if kind == "md":
        if "text/markdown" not in data:
            raise RenderError(f"{{glue:md}}`{body}`: the value has no text/markdown")
        return data["text/markdown"]
    if "text/plain" not in data or kind != "text" and set(data) != {"text/plain"}:
        raise RenderError(f"{{glue:{kind}}}`{body}`: only plain-text values can be written into markdown")
    plain = data["text/plain"]
    return escape_markdown(format_plain_text(plain, spec) if kind == "text" else plain)


def render_glue(template: str, values: dict) -> str:
    """`template` with every glue role replaced by the value it shows on the website."""
    return ROLE.sub(lambda m: paste(m["kind"] or "", m["body"], values), template)


# ---- colon fences -------------------------------------------------------------------------------
def directive_markdown(name: str, arg: str, body: str) -> str:
    """Plain markdown/HTML for one directive: <details> for a dropdown, a blockquote for an admonition."""
    lines = body.strip("\n").split("\n")
    options = {}
    while lines and OPTION.match(lines[0]):
        m = OPTION.match(lines.pop(0))
        options[m["key"]] = m["value"]
    body = "\n".join(lines).strip("\n")
    if name == "dropdown":
        summary = arg or "Details"
        opened = " open" if "open" in options else ""
        return f"<details{opened}><summary>{summary}</summary>\n\n{body}\n\n</details>"
    if name in ADMONITIONS or name == "admonition" and arg:
        title = arg if name == "admonition" else (arg or name.capitalize())
        quoted = [f"> {line}" if line else ">" for line in body.split("\n")]
        return "\n".join([f"> **{title}**", ">"] + quoted)
    raise RenderError(f":::{{{name}}} has no plain-markdown form: write it without a directive")


def convert_fences(text: str) -> str:
    """`text` with every :::{directive} … ::: block replaced by its plain form (nested fences too)."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if (c := CLOSE.match(lines[j]))
                    and len(c["colons"]) >= len(m["colons"])), None)
        if end is None:
            raise RenderError(f"{lines[i]!r} is never closed")
        if out and out[-1].strip():
            out.append("")   # an HTML block must start on its own
        out.append(directive_markdown(m["name"], m["arg"], convert_fences("\n".join(lines[i + 1:end]))))
        if end + 1 < len(lines) and lines[end + 1].strip():
            out.append("")   # ... and end before the next paragraph, or that paragraph stays raw HTML
        i = end + 1
    return "\n".join(out)


# ---- cells and notebooks ------------------------------------------------------------------------
def template(cell) -> str:
    """The markdown the author wrote: the stored template, or the cell's text when it has none, or when
    MyST was written into the cell again (it is then the new template)."""
    stored = cell.metadata.get("book", {}).get("template")
    return cell.source if stored is None or MYST.search(cell.source) else stored


def stale_cells(nb, values: dict | None = None) -> list:
    """One line per markdown cell whose text is not its template rendered with `values` (default: the
    stored glue values): edited by hand after rendering, so a new render would lose the edit."""
    values = glue_values(nb) if values is None else values
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and template(cell) != cell.source:
            if render_glue(convert_fences(template(cell)), values) != cell.source:
                problems.append(f"cell {i} ({cell.source[:40]!r}...) differs from its rendered template")
    return problems


def render_cell(cell, values: dict) -> None:
    """Render one markdown cell in place from its template; keep the template only where it differs."""
    source = convert_fences(template(cell))
    cell.source = render_glue(source, values)
    book = cell.metadata.pop("book", {})
    book.pop("template", None)
    if source != cell.source:
        book["template"] = source
    if book:
        cell.metadata["book"] = book


COLAB_FORM = '{ display-mode: "form" }'


def is_solution(source: str) -> bool:
    """A solution code cell starts `# Solution` (as written) or `#@title Solution` (as rendered)."""
    return source.startswith(("# Solution", "#@title Solution"))


def hide_solution(cell) -> None:
    """A code cell starting `# Solution` is hidden whole on the website (hide-cell, not just its input),
    in Colab (its first line becomes `#@title Solution … { display-mode: "form" }`, a collapsed form cell),
    and every hide-* tag collapses the same parts in JupyterLab (metadata.jupyter)."""
    tags = cell.metadata.get("tags", [])
    if cell.cell_type == "code" and cell.source.startswith("# Solution"):
        first, _, rest = cell.source.partition("\n")
        cell.source = f"#@title {first[2:].strip()} {COLAB_FORM}" + ("\n" + rest if rest else "")
    if is_solution(cell.source) and "hide-input" in tags:
        tags = cell.metadata["tags"] = list(dict.fromkeys("hide-cell" if t == "hide-input" else t for t in tags))
    for tag in tags:
        if tag in HIDDEN:
            cell.metadata.setdefault("jupyter", {}).update(HIDDEN[tag])


def check_rendered(nb, rendered_with: dict | None = None) -> None:
    """Raise RenderError if a rendered cell was edited by hand: if its text is not its template rendered
    with `rendered_with`, the glue values it was rendered with (default: the stored ones)."""
    problems = stale_cells(nb, rendered_with)
    if problems:
        raise RenderError("rendered text edited by hand, or the notebook run by another tool than "
                          "tools/execute.py; put the edit into the MyST template (tools/execute.py --templates "
                          "writes the templates back into the cells) and render again:\n  "
                          + "\n  ".join(problems))


def render_notebook(nb, rendered_with: dict | None = None) -> None:
    """Render every markdown cell from its template with the notebook's stored glue values, and hide
    solution code cells. `rendered_with`: the glue values before a new run (default: the stored ones);
    raises RenderError, changing nothing, if a cell's text is not what they rendered (check_rendered)."""
    check_rendered(nb, rendered_with)
    values = glue_values(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            render_cell(cell, values)
        elif cell.cell_type == "code":
            hide_solution(cell)


def restore_templates(nb) -> None:
    """Put each markdown cell's template back as its text (MyST with glue roles), for editing."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and "template" in cell.metadata.get("book", {}):
            cell.source = cell.metadata["book"].pop("template")
            if not cell.metadata["book"]:
                del cell.metadata["book"]
