#!/usr/bin/env python3
"""The Chinese edition's translation catalog: one gettext .po file per page, in i18n/zh/.

    python tools/i18n.py extract          # i18n/zh/<page>.po from the English templates
    python tools/i18n.py status           # per page: entries, translated, fuzzy, untranslated, characters
    python tools/i18n.py check [pages]    # every translated entry keeps its English's markup (check_entry)
    python tools/i18n.py build            # zh/chapters/: the Chinese pages, generated (nothing is executed)
    python tools/i18n.py build --check    # fail if a committed Chinese page differs from what build makes

`build` makes each Chinese notebook from the executed English one: every code cell, output, widget state and glued
value is the English notebook's, byte for byte; each markdown cell's template is translated block by block from the
catalog (a missing or fuzzy entry is an error naming it) and then rendered with the English notebook's glue values
(tools/render.py), as tools/execute.py renders the English. The intro and recap are translated the same way, and the
tables they include (chapters/_generated/*.md) are copied beside them.

Each entry is one block of a markdown cell's *template* (the prose before glued values are filled in, see
tools/render.py): a paragraph, a heading, a list, a table, a display-math block or an HTML line, split at blank lines
that lie outside code fences and $$ math. msgctxt is the cell's id (the page's name for .md pages), msgid the English
block, msgstr its Chinese. `extract` merges the English into the existing catalog the gettext way (Babel's
Catalog.update): a new block is added untranslated, a removed one becomes obsolete, and a changed one keeps its old
translation marked fuzzy with the previous English beside it, so a translator sees what changed. HTML comments
(the typed-number notes) are not translated. Glued values the prose shows that hold words (a verdict, a range
"a to b", a head's name) are entries too, msgctxt "glue:<name>", msgid the value as the English page shows it:
a re-executed notebook whose value changes turns its entry fuzzy. So are the words a page shows outside its prose:
each predict-then-measure question's text, choices, "why" line, worded measurement and unit (msgctxt "quiz", "quiz
choice", "quiz why", "quiz measured", "quiz unit"), rendered into the Chinese page by book.quiz itself in Chinese
(the question's spec in the output's metadata stays the English one), and each widget's label (msgctxt "widget").
The site's own words (its title, the table of contents' captions, and the Chinese intro's one line saying that
figures' labels and printed outputs stay English) are in i18n/zh/_site.po.

The Chinese book is the folder zh/: its pages in zh/chapters/, its _config.yml and _toc.yml made from the English
ones (the language, the title, the captions, the path of the Colab launch button), built beside the English site
into _build/html/zh/ (tools/build_book.py). Every code cell is the English one, except the hidden Colab setup cell,
which gets one more line setting BOOK_LANG=zh (book.language: the exercise checkers' hints in Chinese); `parity`
says what differs between an English page and its Chinese one, and the tests hold it to exactly that. Files are
written atomically.
"""
from __future__ import annotations

import argparse
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
from book.files import atomic_write  # noqa: E402

CHAPTERS = ROOT / "chapters"
I18N = ROOT / "i18n" / "zh"
LOCALE = "zh_Hans_CN"
COMMENT = re.compile(r"^\s*<!--.*-->\s*$", re.S)


SITE = ROOT / "_toc.yml"          # stands for the site's own words (catalog i18n/zh/_site.po)
INTRO_NOTE = ("(The Chinese edition only.) The figures' own labels and the printed outputs come from the same "
              "execution as the English edition's, so they stay in English.")
SETUP_LINE = 'import os; os.environ["BOOK_LANG"] = "zh"   # 中文版：book 的提示用中文 (book.language)'


def pages() -> list:
    """Every page of the English edition that has prose: the chapters, the intro and the recap; then the site."""
    return sorted(CHAPTERS.glob("[0-9][0-9]_*.ipynb")) + [CHAPTERS / "intro.md", CHAPTERS / "recap.md", SITE]


def site_units() -> list:
    """(context, English) of the site's own words: its title, the captions of the table of contents, the note."""
    import yaml

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf8"))
    toc = yaml.safe_load(SITE.read_text(encoding="utf8"))
    return ([("site:title", cfg["title"])] + [("toc:caption", part["caption"]) for part in toc["parts"]]
            + [("zh:intro-note", INTRO_NOTE)])


def widget_state(nb) -> dict:
    """{model id: {model_name, state, ...}} of the widgets saved with a notebook ({} if none)."""
    return nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})


def quiz_specs(nb) -> list:
    """The spec (book.quiz) of every predict-then-measure question a notebook shows, in page order."""
    return [o["metadata"]["book_quiz"] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if "book_quiz" in o.get("metadata", {})]


def quiz_units(spec: dict) -> list:
    """(context, English) of a question's words: its text, choices, why and (when it holds words) measurement."""
    out = [("quiz", spec["question"])] + [("quiz choice", c) for c in spec.get("choices", [])]
    if WORDS.search(spec.get("unit", "")):
        out.append(("quiz unit", spec["unit"]))
    if spec.get("answered"):
        out.append(("quiz why", spec["why"]))
        if WORDS.search(spec["measured"]):
            out.append(("quiz measured", spec["measured"]))
    return out


def template(cell) -> str:
    """A markdown cell's template: the MyST source tools/render.py keeps, or the cell's text when it has none."""
    return cell.get("metadata", {}).get("book", {}).get("template", cell["source"])


def blocks(text: str) -> list:
    """`text` split at blank lines outside ``` fences and $$ math blocks -> its non-empty blocks, stripped of
    trailing whitespace."""
    out, cur, fence, math = [], [], False, False
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("```"):
            fence = not fence
        elif not fence and s.count("$$") % 2 == 1:
            math = not math
        if not s and not fence and not math:
            if cur:
                out.append("\n".join(cur).rstrip())
            cur = []
        else:
            cur.append(line)
    if cur:
        out.append("\n".join(cur).rstrip())
    return [b for b in out if b.strip()]


def units(path: Path) -> list:
    """(context, English block) of every translatable block of a page, in page order."""
    if path == SITE:
        return site_units()
    if path.suffix == ".md":
        return [(path.stem, b) for b in blocks(path.read_text()) if not COMMENT.match(b)]
    import nbformat

    nb = nbformat.read(path, as_version=4)
    out = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        if not cell.get("id"):
            raise ValueError(f"{path.name}: a markdown cell has no id (nbformat 4.5 gives every cell one)")
        out += [(cell["id"], b) for b in blocks(template(cell)) if not COMMENT.match(b)]
    out += [(f"glue:{name}", text) for name, text in worded_glue(nb).items()]
    out += [u for spec in quiz_specs(nb) for u in quiz_units(spec)]
    labels = [w["state"].get("description") for w in widget_state(nb).values()]
    return out + [("widget", label) for label in dict.fromkeys(labels) if label and WORDS.search(label)]


WORDS = re.compile(r"[A-Za-z]{2,}")


def _plain(bundle: dict):
    """A glued value's text as the page shows it (a str's quotes stripped), or None if it is not plain text."""
    import ast

    plain = bundle.get("text/plain")
    if plain is None:
        return None
    if len(plain) >= 2 and plain[0] == plain[-1] and plain[0] in "'\"":
        try:
            return ast.literal_eval(plain)
        except (ValueError, SyntaxError):
            return plain
    return plain


def worded_glue(nb) -> dict:
    """{name: text} of the glued values the page's prose shows that hold words (two letters or more in a row): a
    verdict, a range "a to b", a name. Numbers alone need no translation. In page order of first use."""
    import render

    values, out = render.glue_values(nb), {}
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for m in render.ROLE.finditer(template(cell)):
            body = m["body"]
            name = body.rpartition(":")[0] if m["kind"] == "text" and ":" in body else body
            text = _plain(values.get(name, {}))
            if text is not None and WORDS.search(text) and name not in out:
                out[name] = text
    return out


def po_path(page: Path) -> Path:
    return I18N / ("_site.po" if page == SITE else f"{page.stem}.po")


def read_catalog(path: Path):
    """A catalog as Babel reads it, with one repair: Babel reads the previous English of a fuzzy entry (the "#|"
    lines write_po writes) as translator comments, which would be written back as "# |" comments and pile up; they
    are turned back into the entry's previous_id (fuzzy entries) or dropped (finished ones)."""
    from babel.messages.pofile import read_po, unescape

    with path.open("rb") as f:
        cat = read_po(f, locale=LOCALE)
    for m in cat:
        prev = [c[1:].strip() for c in m.user_comments if c.startswith("|")]
        m.user_comments = [c for c in m.user_comments if not c.startswith("|")]
        text = " ".join(prev)
        if m.fuzzy and text.startswith("msgid") and not m.previous_id:
            m.previous_id = ["".join(unescape(f'"{q}"') for q in re.findall(r'"((?:[^"\\]|\\.)*)"', text))]
    return cat


def write_catalog(path: Path, catalog) -> None:
    from babel.messages.pofile import write_po

    buf = io.BytesIO()
    write_po(buf, catalog, width=0, include_previous=True, sort_output=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, buf.getvalue().decode("utf-8"))


def extract(page: Path):
    """Merge the page's English blocks into its catalog (created if absent) -> the catalog, written."""
    from babel.messages.catalog import Catalog

    tmpl = Catalog(locale=LOCALE, project="Transformers, Gap by Gap", fuzzy=False)
    where = page.name if page == SITE else f"chapters/{page.name}"
    for n, (ctx, text) in enumerate(units(page)):
        if tmpl.get(text, context=ctx) is None:
            tmpl.add(text, context=ctx, locations=[(where, n + 1)])
    path = po_path(page)
    cat = read_catalog(path) if path.exists() else Catalog(locale=LOCALE, project="Transformers, Gap by Gap",
                                                              fuzzy=False)
    cat.update(tmpl, update_creation_date=False)
    cat.fuzzy = False
    write_catalog(path, cat)
    return cat


def status(cat) -> dict:
    """Counts of a catalog's live entries (the header and obsolete ones left out) and its English characters."""
    live = [m for m in cat if m.id]
    return dict(entries=len(live), translated=sum(bool(m.string) and not m.fuzzy for m in live),
                fuzzy=sum(m.fuzzy for m in live), untranslated=sum(not m.string for m in live),
                english_chars=sum(len(m.id) for m in live), chinese_chars=sum(len(m.string or "") for m in live))


ROLE = re.compile(r"\{glue(?::[a-z]*)?\}`[^`]+`")
CODE = re.compile(r"(?<!`)`[^`\n]+`(?!`)")
MATH = re.compile(r"\$\$.+?\$\$|\$[^$]+\$", re.S)   # inline math may break across lines
LINK = re.compile(r"\]\(([^)\s]+)\)")


def check_entry(en: str, zh: str) -> list:
    """What a translation `zh` of the English block `en` lost or changed of its markup -> a list of problems (empty:
    fine). Kept exactly: glue roles, inline code, math, link targets, HTML tags, the heading level, the number of
    table rows and of list items."""
    problems = []
    for what, pat in (("glue roles", ROLE), ("inline code", CODE), ("math", MATH), ("link targets", LINK)):
        a, b = sorted(pat.findall(en)), sorted(pat.findall(zh))
        if a != b:
            problems.append(f"{what} differ: {sorted(set(a) - set(b))} missing, {sorted(set(b) - set(a))} added")
    tags = lambda t: sorted(re.findall(r"</?[a-z]+[^>]*>", t))
    if tags(en) != tags(zh):
        problems.append(f"HTML tags differ: {tags(en)} vs {tags(zh)}")
    level = lambda t: len(t) - len(t.lstrip("#")) if t.startswith("#") else 0
    if level(en) != level(zh):
        problems.append(f"heading level {level(en)} became {level(zh)}")
    rows = lambda t: sum(line.lstrip().startswith("|") for line in t.splitlines())
    items = lambda t: sum(bool(re.match(r"\s*([-*]|\d+\.) ", line)) for line in t.splitlines())
    if rows(en) != rows(zh):
        problems.append(f"table rows {rows(en)} became {rows(zh)}")
    if items(en) != items(zh):
        problems.append(f"list items {items(en)} became {items(zh)}")
    return problems


def check(cat) -> list:
    """(msgctxt, problem) for every translated entry of a catalog whose markup differs from its English."""
    return [(m.context, f"{p}\n    in: {m.id[:80]!r}") for m in cat if m.id and m.string
            for p in check_entry(m.id, m.string)]


ZH_ROOT = ROOT / "zh"
ZH = ZH_ROOT / "chapters"


class MissingTranslation(ValueError):
    """A block of an English page with no finished translation in its catalog (absent, empty or fuzzy)."""


def translate(text: str, context: str, cat, page: str) -> str:
    """`text` (a template) with every block replaced by its catalog translation; HTML comments kept as they are."""
    out = [b if COMMENT.match(b) else finished(cat, b, context, page) for b in blocks(text)]
    return "\n\n".join(out) + ("\n" if text.endswith("\n") else "")


def finished(cat, text: str, context: str, page: str) -> str:
    """The finished translation of one entry; MissingTranslation if it is absent, empty or fuzzy."""
    m = cat.get(text, context=context)
    if m is None or not m.string or m.fuzzy:
        state = "absent" if m is None else "fuzzy" if m.fuzzy else "untranslated"
        raise MissingTranslation(f"{page} [{context}]: {text[:70]!r} is {state} in i18n/zh/{page}.po "
                                 "(python tools/i18n.py extract, then translate it)")
    return m.string


def quiz_output(spec: dict, cat, page: str) -> dict:
    """The Chinese output bundle (data) of a question whose English spec is `spec`: its words from the catalog, the
    rest (the fixed words, the feedback) from book.quiz itself in Chinese."""
    from book import quiz as bq
    from book.language import set_language

    tr = lambda ctx, text: finished(cat, text, ctx, page)   # noqa: E731
    choices = [tr("quiz choice", c) for c in spec.get("choices", [])]
    numeric = spec["kind"] == "numeric"
    unit = spec.get("unit", "")
    unit = tr("quiz unit", unit) if WORDS.search(unit) else unit
    set_language("zh")
    try:
        q = bq.Question(tr("quiz", spec["question"]), choices if not numeric else None, numeric, unit,
                        spec.get("within", 0.1), spec["surprise"])
        if not spec.get("answered"):
            return q.output[0]
        zh = dict(spec, question=q.question, why=tr("quiz why", spec["why"]),
                  measured=(tr("quiz measured", spec["measured"]) if WORDS.search(spec["measured"])
                            else spec["measured"]))
        if numeric:
            quiz = q._numeric_quiz(zh)
        else:
            zh.update(choices=choices, answer=choices[spec["correct"]])
            quiz = q._choice_quiz(zh)
        return q._bundle(q.html(quiz, zh))[0]
    finally:
        set_language(None)


def build_page(page: Path) -> dict:
    """The Chinese edition of one page -> {path under zh/: text}."""
    if page == SITE:
        return site_files()
    cat = read_catalog(po_path(page))
    if page.suffix == ".md":
        text = translate(page.read_text(), page.stem, cat, page.stem)
        if page.stem == "intro":                 # the one line only the Chinese edition has: after the first paragraph
            note = finished(read_catalog(po_path(SITE)), INTRO_NOTE, "zh:intro-note", "_site")
            parts = text.split("\n\n")
            text = "\n\n".join(parts[:2] + [f"*{note}*"] + parts[2:])
        return {f"chapters/{page.name}": text}
    import nbformat
    import render

    nb = nbformat.read(page, as_version=4)
    values = render.glue_values(nb)
    for name, text in worded_glue(nb).items():          # glued words, translated like the prose around them
        values[name] = {**values[name], "text/plain": repr(finished(cat, text, f"glue:{name}", page.stem))}
    setup = False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = translate(render.template(cell), cell["id"], cat, page.stem)
            cell.metadata.get("book", {}).pop("template", None)
            if "book" in cell.metadata and not cell.metadata["book"]:
                del cell.metadata["book"]
            render.render_cell(cell, values)
        elif cell.cell_type == "code":
            if not setup and cell.source.startswith("# Colab setup"):
                cell.source += "\n" + SETUP_LINE
                setup = True
            for out in cell.get("outputs", []):
                if "book_quiz" in out.get("metadata", {}):
                    out["data"] = quiz_output(out["metadata"]["book_quiz"], cat, page.stem)
    if not setup:
        raise ValueError(f"{page.name}: no Colab setup cell (a code cell starting '# Colab setup') to set BOOK_LANG")
    for w in widget_state(nb).values():
        label = w["state"].get("description")
        if label and WORDS.search(label):
            w["state"]["description"] = finished(cat, label, "widget", page.stem)
    nb.metadata.setdefault("book", {})["language"] = "zh"
    return {f"chapters/{page.name}": nbformat.writes(nb) + "\n"}


def site_files() -> dict:
    """zh/_config.yml and zh/_toc.yml: the English ones with the language, title, captions, the Colab button's path
    and the extensions' folder (one level up) changed."""
    import yaml

    cat = read_catalog(po_path(SITE))
    tr = lambda ctx, text: finished(cat, text, ctx, "_site")   # noqa: E731
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf8"))
    cfg["title"] = tr("site:title", cfg["title"])
    cfg["repository"]["path_to_book"] = "zh"
    cfg["exclude_patterns"] = [p for p in cfg["exclude_patterns"] if p != "zh"]
    cfg["html"]["favicon"] = "../" + cfg["html"]["favicon"]
    sphinx = cfg["sphinx"]
    sphinx["local_extensions"] = {name: "../" + folder for name, folder in sphinx["local_extensions"].items()}
    sphinx["config"].update(language="zh_CN", book_language="zh", html_static_path=["../_static"],
                            html_css_files=sorted(p.name for p in (ROOT / "_static").glob("*.css")))
    toc = yaml.safe_load(SITE.read_text(encoding="utf8"))
    for part in toc["parts"]:
        part["caption"] = tr("toc:caption", part["caption"])
    head = "# Generated by tools/i18n.py from the English {} (do not edit: edit the English, then build).\n"
    dump = lambda d: yaml.safe_dump(d, allow_unicode=True, sort_keys=False, width=120)   # noqa: E731
    return {"_config.yml": head.format("_config.yml") + dump(cfg), "_toc.yml": head.format("_toc.yml") + dump(toc)}


def build(check_only: bool = False) -> list:
    """Write (or, check_only, compare) every Chinese page, the included tables and the book's config -> the paths
    under zh/ that differ."""
    out = {}
    for page in pages():
        out.update(build_page(page))
    for table in sorted((CHAPTERS / "_generated").glob("*.md")):
        out[f"chapters/_generated/{table.name}"] = table.read_text()
    differ = [name for name, text in out.items()
              if not (ZH_ROOT / name).exists() or (ZH_ROOT / name).read_text() != text]
    if not check_only:
        for name in differ:
            (ZH_ROOT / name).parent.mkdir(parents=True, exist_ok=True)
            atomic_write(ZH_ROOT / name, out[name])
    return differ


def parity(en, zh) -> list:
    """What differs between an English notebook and its Chinese one beyond what the edition changes on purpose (the
    markdown, the quiz outputs' data, the widgets' labels, the setup cell's one line, the language mark) -> problems
    (empty: the same code, outputs, glue and widget state)."""
    import copy

    problems = []
    if [c.cell_type for c in en.cells] != [c.cell_type for c in zh.cells]:
        return ["the cells differ in number or kind"]
    for a, b in zip(en.cells, zh.cells):
        if a.cell_type != "code":
            continue
        want = a.source + ("\n" + SETUP_LINE if a.source.startswith("# Colab setup") else "")
        if b.source != want:
            problems.append(f"code cell {a.get('id')}: the source differs")
        oa, ob = copy.deepcopy(a.get("outputs", [])), copy.deepcopy(b.get("outputs", []))
        for o in oa + ob:
            if "book_quiz" in o.get("metadata", {}):
                o.pop("data", None)
        if oa != ob:
            problems.append(f"code cell {a.get('id')}: the outputs differ")
    wa, wb = copy.deepcopy(widget_state(en)), copy.deepcopy(widget_state(zh))
    for w in list(wa.values()) + list(wb.values()):
        w["state"].pop("description", None)
    if wa != wb:
        problems.append("the widget state differs (beyond the labels)")
    return problems


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["extract", "status", "check", "build"])
    p.add_argument("--check", action="store_true", help="build: compare with the committed pages, write nothing")
    p.add_argument("pages", nargs="*", type=Path, help="default: every page")
    args = p.parse_args(argv)
    todo = [q.resolve() for q in args.pages] or pages()
    if args.command == "build":
        differ = build(check_only=args.check)
        verb = "differ from what the catalog makes" if args.check else "written"
        print(f"{len(differ)} Chinese page(s) {verb}: " + ", ".join(differ) if differ else "the Chinese pages are "
              "up to date")
        return 1 if args.check and differ else 0
    if args.command == "check":
        bad = 0
        for page in todo:
            for ctx, problem in check(read_catalog(po_path(page) if page.suffix != ".po" else page)):
                bad += 1
                print(f"{page.stem} [{ctx}]: {problem}")
        print(f"{bad} problem(s)")
        return 1 if bad else 0
    print(f"{'page':24s} {'entries':>7s} {'done':>5s} {'fuzzy':>5s} {'empty':>5s} {'en chars':>8s} {'zh chars':>8s}")
    for page in todo:
        cat = extract(page) if args.command == "extract" else read_catalog(po_path(page))
        s = status(cat)
        print(f"{page.stem:24s} {s['entries']:7d} {s['translated']:5d} {s['fuzzy']:5d} {s['untranslated']:5d} "
              f"{s['english_chars']:8d} {s['chinese_chars']:8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
