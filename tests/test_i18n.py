"""The Chinese edition's catalog (tools/i18n.py, i18n/zh/*.po): blocks are split as markdown is, a translation keeps
its English's markup, the generator fills every block from the catalog and refuses a missing or fuzzy one, and every
committed entry passes the markup check."""
import re
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
    with pytest.raises(i18n.MissingTranslation, match=r"p \[c2\]: 'One\.' is absent"):
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
    assert len(glossary) >= 50 and all(len(g) in (2, 3) and g[0] and g[1] for g in glossary)
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


# ---- the generated Chinese edition, held to the English one ---------------------------------------------------------

CJK = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]")
PROSE = lambda m: m.id and not (m.context or "").startswith(("quiz", "widget", "glue:", "site:", "toc:", "zh:"))  # noqa


def catalogs():
    return {p.stem: i18n.read_catalog(i18n.po_path(p)) for p in i18n.pages()}


def test_every_entry_of_every_catalog_is_translated_and_none_is_fuzzy():
    bad = {page: (s["fuzzy"], s["untranslated"]) for page, cat in catalogs().items()
           for s in [i18n.status(cat)] if s["fuzzy"] or s["untranslated"]}
    assert not bad, f"(fuzzy, untranslated) entries per page: {bad} (python tools/i18n.py status)"


def test_no_line_break_inside_a_chinese_sentence():
    """A line break inside a paragraph renders as a space; after a Chinese character or full-width punctuation, and
    before another, that is a visible gap ("。 但"); a break before a list item, table row, heading or math is kept."""
    joined = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]\n(?!\s*([-*|>#]|\d+\.|\$\$|```|<))\s*"
                        r"([\u3400-\u9fff\u3000-\u303f\uff00-\uffef]|(?<=[\u3000-\u303f\uff00-\uffef]\n)\S)")
    bad = [f"{page} [{m.context}]: {m.string[:60]!r}" for page, cat in catalogs().items() for m in cat
           if m.id and m.string and joined.search(m.string)]
    assert not bad, "\n".join(bad[:10])


def glossary() -> list:
    """(English, Chinese, flags) of i18n/glossary.tsv; flag "plain": an everyday word, no English at first use."""
    rows = [line.split("\t") for line in (ROOT / "i18n" / "glossary.tsv").read_text().splitlines()
            if line and not line.startswith("#")]
    return [(r[0], r[1], set(r[2].split(",")) if len(r) > 2 else set()) for r in rows]


def english_term(term: str):
    """The term in English prose: any spelling (-ise/-ize), plural (-s, -es, -ies), line break between its words."""
    t = re.escape(term).replace("isation", "i[sz]ation").replace("iser", "i[sz]er").replace(r"\ ", r"\s+")
    t = t[:-1] + "(y|ies)" if re.search("[^aeiou]y$", term) else t + "(e?s)?"
    return re.compile(r"(?<![\w-])" + t + r"(?![\w-])", re.I)


def given_in_parentheses(zh: str, en: str, text: str) -> bool:
    """The Chinese term followed by its English in parentheses: 注意力（attention）, **注意力**（attention） or a
    compound 编码器–解码器（encoder–decoder）."""
    return re.search(re.escape(zh) + r"[^（(，。；：、\s]{0,12}?\**\s*[（(][^）)]*" + re.escape(en[:4]), text,
                     re.I) is not None


def words(text: str) -> str:
    """An English block without its code, math, link targets and glue roles: the words a reader reads."""
    return re.sub(r"<!--.*?-->|\{glue(:[a-z]*)?\}`[^`]*`|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|\]\([^)]*\)", "", text,
                  flags=re.S)


def excused(m, term: str) -> bool:
    """A translator's comment `glossary-ok: <term> (why)` on an entry excuses it from that term's rule."""
    return any(c.strip().startswith(f"glossary-ok: {term}") for c in m.user_comments)


def test_each_glossary_term_is_translated_the_same_way_everywhere():
    bad = []
    for page, cat in catalogs().items():
        for m in filter(PROSE, cat):
            for en, zh, _flags in glossary():
                if english_term(en).search(words(m.id)) and zh not in m.string and not excused(m, en):
                    bad.append(f"{page} [{m.context}]: '{en}' is not '{zh}': {m.string[:50]!r}")
    assert not bad, f"{len(bad)} entries:\n" + "\n".join(bad[:15])


def test_given_in_parentheses_and_english_term_match_the_books_forms():
    assert given_in_parentheses("注意力", "attention", "**注意力**（attention）")
    assert given_in_parentheses("编码器", "encoder", "编码器–解码器（encoder–decoder）")
    assert not given_in_parentheses("注意力", "attention", "注意力。")
    assert english_term("query").search("two queries") and english_term("key").search("the keys")
    assert english_term("bits per character").search("bits per\ncharacter")
    assert not english_term("head").search("ahead") and not english_term("key").search("key-value")


def test_each_chapter_gives_a_terms_english_in_parentheses_at_its_first_use():
    bad = []
    for page, cat in catalogs().items():
        if not page[:2].isdigit():
            continue
        in_page_order = [m for ctx, text in i18n.units(i18n.CHAPTERS / f"{page}.ipynb")
                         for m in [cat.get(text, context=ctx)] if m is not None and PROSE(m)]
        for en, zh, flags in glossary():
            if zh == en or "plain" in flags:
                continue
            first = next((m for m in in_page_order if english_term(en).search(words(m.id))), None)
            if first is not None and not excused(first, en) and not given_in_parentheses(zh, en, first.string):
                bad.append(f"{page} [{first.context}]: first use of '{en}' without '{zh}（{en}）'")
    assert not bad, f"{len(bad)} first uses:\n" + "\n".join(bad[:15])


def test_the_committed_chinese_pages_are_what_the_generator_makes():
    differ = i18n.build(check_only=True)
    assert not differ, f"stale Chinese pages {differ}: python tools/i18n.py build"


@pytest.mark.parametrize("page", [p for p in i18n.pages() if p.suffix == ".ipynb"], ids=lambda p: p.stem)
def test_a_chinese_page_has_its_english_pages_code_outputs_glue_and_widgets(page):
    import nbformat
    en = nbformat.read(page, as_version=4)
    zh = nbformat.read(i18n.ZH / page.name, as_version=4)
    assert i18n.parity(en, zh) == []
    assert zh.metadata["book"]["language"] == "zh"
    quizzes = [o for c in zh.cells if c.cell_type == "code" for o in c.get("outputs", []) if "book_quiz" in o.get(
        "metadata", {})]
    assert quizzes and all(CJK.search(o["data"]["text/html"]) for o in quizzes)
    labels = [w["state"].get("description") for w in i18n.widget_state(zh).values()]
    assert all(CJK.search(label) for label in labels if label and i18n.WORDS.search(label) and label != "top-k"
               and label not in ("d_k", "top-p")), labels
    prose = [c.source for c in zh.cells if c.cell_type == "markdown"]
    assert all(CJK.search(s) for s in prose if i18n.WORDS.search(s) and len(s) > 40)


def test_parity_catches_a_changed_code_cell_output_or_widget():
    import copy

    import nbformat
    page = i18n.pages()[0]
    en = nbformat.read(page, as_version=4)
    zh = nbformat.read(i18n.ZH / page.name, as_version=4)
    for change in ("source", "output", "widget"):
        z = copy.deepcopy(zh)
        code = next(c for c in z.cells if c.cell_type == "code" and c.get("outputs") and not c.source.startswith(
            "# Colab"))
        if change == "source":
            code.source += "\n# drift"
        elif change == "output":
            code.outputs.append(nbformat.v4.new_output("stream", text="drift\n"))
        else:
            next(iter(i18n.widget_state(z).values()))["state"]["_drift"] = 1
        assert i18n.parity(en, z), change


def test_the_chinese_book_says_that_figures_and_printed_outputs_stay_english():
    intro = (i18n.ZH / "intro.md").read_text()
    note = i18n.finished(i18n.read_catalog(i18n.po_path(i18n.SITE)), i18n.INTRO_NOTE, "zh:intro-note", "_site")
    assert f"*{note}*" in intro and "英文" in note
    cfg = (i18n.ZH_ROOT / "_config.yml").read_text()
    assert "language: zh_CN" in cfg and "path_to_book: zh" in cfg and "book_language: zh" in cfg
