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
a re-executed notebook whose value changes turns its entry fuzzy. Files are written atomically.
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


def pages() -> list:
    """Every page of the English edition that has prose: the chapters, the intro and the recap."""
    return sorted(CHAPTERS.glob("[0-9][0-9]_*.ipynb")) + [CHAPTERS / "intro.md", CHAPTERS / "recap.md"]


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
    return out + [(f"glue:{name}", text) for name, text in worded_glue(nb).items()]


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
    return I18N / f"{page.stem}.po"


def read_catalog(path: Path):
    from babel.messages.pofile import read_po

    with path.open("rb") as f:
        return read_po(f, locale=LOCALE)


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
    for n, (ctx, text) in enumerate(units(page)):
        tmpl.add(text, context=ctx, locations=[(f"chapters/{page.name}", n + 1)])
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


ZH = ROOT / "zh" / "chapters"


class MissingTranslation(ValueError):
    """A block of an English page with no finished translation in its catalog (absent, empty or fuzzy)."""


def translate(text: str, context: str, cat, page: str) -> str:
    """`text` (a template) with every block replaced by its catalog translation; HTML comments kept as they are."""
    out = []
    for b in blocks(text):
        if COMMENT.match(b):
            out.append(b)
            continue
        m = cat.get(b, context=context)
        if m is None or not m.string or m.fuzzy:
            state = "absent" if m is None else "fuzzy" if m.fuzzy else "untranslated"
            raise MissingTranslation(f"{page} [{context}]: {state} in i18n/zh/{page}.po: {b[:70]!r}... "
                                     "(python tools/i18n.py extract, then translate it)")
        out.append(m.string)
    return "\n\n".join(out) + ("\n" if text.endswith("\n") else "")


def build_page(page: Path) -> dict:
    """The Chinese edition of one page -> {path under zh/chapters: text}."""
    cat = read_catalog(po_path(page))
    if page.suffix == ".md":
        return {page.name: translate(page.read_text(), page.stem, cat, page.stem)}
    import nbformat
    import render

    nb = nbformat.read(page, as_version=4)
    values = render.glue_values(nb)
    for name, text in worded_glue(nb).items():          # glued words, translated like the prose around them
        m = cat.get(text, context=f"glue:{name}")
        if m is None or not m.string or m.fuzzy:
            raise MissingTranslation(f"{page.stem} [glue:{name}]: the glued value {text!r} has no finished "
                                     f"translation in i18n/zh/{page.stem}.po")
        values[name] = {**values[name], "text/plain": repr(m.string)}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = translate(render.template(cell), cell["id"], cat, page.stem)
            cell.metadata.get("book", {}).pop("template", None)
            if "book" in cell.metadata and not cell.metadata["book"]:
                del cell.metadata["book"]
            render.render_cell(cell, values)
    nb.metadata.setdefault("book", {})["language"] = "zh"
    return {page.name: nbformat.writes(nb) + "\n"}


def build(check_only: bool = False) -> list:
    """Write (or, check_only, compare) every Chinese page and the included tables -> the paths that differ."""
    out = {}
    for page in pages():
        out.update(build_page(page))
    for table in sorted((CHAPTERS / "_generated").glob("*.md")):
        out[f"_generated/{table.name}"] = table.read_text()
    differ = [name for name, text in out.items() if not (ZH / name).exists() or (ZH / name).read_text() != text]
    if not check_only:
        for name in differ:
            (ZH / name).parent.mkdir(parents=True, exist_ok=True)
            atomic_write(ZH / name, out[name])
    return differ


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
