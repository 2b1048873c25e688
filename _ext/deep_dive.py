"""Sphinx extension of the course website: a chapter's optional deep dives, folded.

A section whose title starts "Deep dive (optional)" (a markdown heading in the notebook, which Colab and JupyterLab
show as it is) keeps its title on the page; everything under it — prose, code, outputs, subsections — goes into a
native <details> element, closed, whose summary says how to open it. Native, so it needs no script, a keyboard and a
screen reader can open it, and the browser's find-in-page opens it on a match (Chromium). tools/learner_path.py
counts the main path without these sections. The Chinese edition's deep dives start "深入阅读（可选）" (tools/i18n.py
translates the prefix so) and fold the same way, with a Chinese summary.
"""
from __future__ import annotations

from docutils import nodes

DEEP_DIVE = "Deep dive (optional)"
SUMMARY = "Show the deep dive (optional: the next chapters do not need it)"
PREFIXES = {DEEP_DIVE: SUMMARY, "深入阅读（可选）": "展开深入阅读（可选：后面的章节不需要它）"}


def fold_deep_dives(app, doctree) -> None:
    """doctree-read: wrap each deep-dive section's body in <details class="deep-dive">."""
    for section in list(doctree.findall(nodes.section)):
        title = section.next_node(nodes.title)
        if title is None or title.parent is not section:
            continue
        summary = next((s for p, s in PREFIXES.items() if title.astext().startswith(p)), None)
        if summary is None:
            continue
        start = section.index(title) + 1
        section.insert(start, nodes.raw("", f'<details class="deep-dive"><summary>{summary}</summary>\n',
                                        format="html"))
        section.append(nodes.raw("", "</details>\n", format="html"))
        section["classes"].append("deep-dive-section")


def setup(app):
    app.connect("doctree-read", fold_deep_dives)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
