"""The Chinese edition's catalog (tools/i18n.py, i18n/zh/*.po): blocks are split as markdown is, a translation keeps
its English's markup, the generator fills every block from the catalog and refuses a missing or fuzzy one, and every
committed entry passes the markup check."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import i18n  # noqa: E402


def test_blocks_split_at_blank_lines_outside_fences_and_display_math():
    text = "A para\nline two\n\n$$\nx\n\ny\n$$\n\n```\ncode\n\nmore\n```\n\n- item\n- item"
    assert i18n.blocks(text) == ["A para\nline two", "$$\nx\n\ny\n$$", "```\ncode\n\nmore\n```", "- item\n- item"]


def test_check_entry_finds_what_a_translation_lost():
    en = "## Deep dive (optional): x\n\nsee {glue:text}`a`, `f(x)`, $x^2$, [ch. 4](04_self_attention.ipynb)"
    zh = "## 深入阅读（可选）：x\n\n见 {glue:text}`a`、`f(x)`、$x^2$、[第 4 章](04_self_attention.ipynb)"
    assert i18n.check_entry(en, zh) == []
    bad = i18n.check_entry(en, "# 深入阅读：x\n\n见 {glue:text}`b`、f(x)、$x^3$、[第 4 章](05.ipynb)")
    assert len(bad) == 5 and any("glue roles" in b for b in bad) and any("heading level" in b for b in bad)
    assert i18n.check_entry("$a +\nb$ and $c$", "$a +\nb$ 和 $c$") == []          # inline math across a line break
    assert i18n.check_entry("| a |\n|---|\n| b |", "| 甲 |\n|---|") == ["table rows 3 became 2"]
    assert i18n.check_entry("<details><summary>Answer</summary>", "<details><summary>答案</summary>") == []


def test_translate_fills_every_block_and_refuses_a_missing_or_fuzzy_one():
    from babel.messages.catalog import Catalog
    cat = Catalog(locale=i18n.LOCALE)
    cat.add("One.", string="一。", context="c1")
    cat.add("Two {glue:text}`n`.", string="二 {glue:text}`n`。", context="c1")
    text = "One.\n\n<!-- typed: 7 (a note) -->\n\nTwo {glue:text}`n`.\n"
    assert i18n.translate(text, "c1", cat, "p") == "一。\n\n<!-- typed: 7 (a note) -->\n\n二 {glue:text}`n`。\n"
    with pytest.raises(i18n.MissingTranslation, match=r"p \[c2\]: absent"):
        i18n.translate(text, "c2", cat, "p")
    cat.get("One.", context="c1").flags.add("fuzzy")
    with pytest.raises(i18n.MissingTranslation, match="fuzzy"):
        i18n.translate(text, "c1", cat, "p")


def test_every_translated_entry_of_the_catalog_keeps_its_markup_and_uses_the_glossary_form():
    pages = i18n.pages()
    assert all(i18n.po_path(p).exists() for p in pages), "python tools/i18n.py extract"
    problems = [f"{p.stem}: {ctx}: {msg}" for p in pages for ctx, msg in i18n.check(i18n.read_catalog(i18n.po_path(p)))]
    assert not problems, "\n".join(problems[:10])
    glossary = [line.split("\t") for line in (ROOT / "i18n" / "glossary.tsv").read_text().splitlines()
                if line and not line.startswith("#")]
    assert len(glossary) >= 50 and all(len(g) == 2 and g[0] and g[1] for g in glossary)
    deep = [m.string for p in pages for m in i18n.read_catalog(i18n.po_path(p))
            if m.id.lstrip("#").lstrip().startswith("Deep dive (optional)") and m.string]
    assert deep and all(s.lstrip("#").lstrip().startswith("深入阅读（可选）：") for s in deep)


def test_the_site_folds_a_chinese_deep_dive_as_it_folds_an_english_one():
    from docutils import nodes
    sys.path.insert(0, str(ROOT / "_ext"))
    import deep_dive

    doc = nodes.document(None, None)
    for title in ("深入阅读（可选）：为什么要堆叠", "Deep dive (optional): why stack", "练习"):
        sec = nodes.section()
        sec += nodes.title(text=title)
        sec += nodes.paragraph(text="body")
        doc += sec
    deep_dive.fold_deep_dives(None, doc)
    raws = [n.astext() for n in doc.findall(nodes.raw)]
    assert sum("<details" in r for r in raws) == 2 and any("展开深入阅读" in r for r in raws)
    assert [("deep-dive-section" in s["classes"]) for s in doc.findall(nodes.section)] == [True, True, False]
