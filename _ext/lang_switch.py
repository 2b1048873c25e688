"""Sphinx extension of the course website: the switch between the English book and the Chinese one (zh/).

The English site is built at the root, the Chinese one (tools/i18n.py's zh/ book) into zh/ beside it
(tools/build_book.py). Every page of either gets a <link rel="alternate" hreflang> to the same page in the other
language, and `lang-switch.js` puts a link in the page's header buttons ("中文" on an English page, "English" on
a Chinese one) that lands on the same section: both editions have the same headings in the same order (a Chinese
page is its English page's blocks, translated one by one; tools/i18n.py checks the heading levels), so the link
carries the index of the heading the reader is at (?sec=N) and the other page scrolls to its own N-th heading,
opening a folded deep dive around it. Config: book_language = "en" (default) or "zh".
"""
from __future__ import annotations

import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATIC = HERE / "lang_static"
NAMES = {"en": ("中文", "zh-CN"), "zh": ("English", "en")}


def other_url(pagename: str, language: str) -> str:
    """The relative URL, from page `pagename` of the `language` edition, of the same page in the other edition."""
    up = "../" * pagename.count("/")
    return f"{up}zh/{pagename}.html" if language == "en" else f"../{up}{pagename}.html"


def add_switch(app, pagename, templatename, context, doctree) -> None:
    """html-page-context: the alternate link and the switch's target, in the page's <head>."""
    language = app.config.book_language
    label, hreflang = NAMES[language]
    url = other_url(pagename, language)
    context["metatags"] = context.get("metatags", "") + (
        f'\n<link rel="alternate" hreflang="{hreflang}" href="{url}">'
        f'\n<meta name="book-other-language" content="{url}" data-label="{label}" data-lang="{hreflang}">')


def static_path(app, config) -> None:
    """config-inited: serve lang-switch.js (its own folder, not the book's _static, which Jupyter Book scans)."""
    if config.book_language not in NAMES:
        raise ValueError(f"book_language must be one of {sorted(NAMES)}, got {config.book_language!r}")
    config.html_static_path = list(config.html_static_path) + [str(STATIC)]


PLURAL = re.compile(r"[n0-9\s()?:<>=!&|%+*/-]+")


def static_translations(app, exception) -> None:
    """build-finished: Sphinx's _static/translations.js (written for every language but English) hands its catalog to
    Documentation.addTranslations, which compiles the plural rule with `new Function`: an eval the site's
    Content-Security-Policy forbids (_ext/site_assets.py), so on a page without widgets the browser refuses it. The
    file is rewritten to set the same messages and the same rule as plain code, evaluated by nothing."""
    path = Path(app.outdir) / "_static" / "translations.js"
    if exception is not None or not path.is_file():
        return
    text = path.read_text(encoding="utf8")
    body = text.strip().removeprefix("Documentation.addTranslations(").removesuffix(");")
    catalog = json.loads(body)
    rule = catalog["plural_expr"]
    if not PLURAL.fullmatch(rule):
        raise ValueError(f"translations.js: a plural rule this rewrite does not accept: {rule!r}")
    path.write_text("// Sphinx's catalog, set without addTranslations' `new Function` (_ext/lang_switch.py)\n"
                    f"Object.assign(Documentation.TRANSLATIONS, {json.dumps(catalog['messages'])});\n"
                    f"Documentation.PLURAL_EXPR = function (n) {{ return ({rule}); }};\n"
                    f"Documentation.LOCALE = {json.dumps(catalog['locale'])};\n", encoding="utf8")


def setup(app):
    app.add_config_value("book_language", "en", "html")
    app.connect("config-inited", static_path)
    app.connect("html-page-context", add_switch)
    app.connect("build-finished", static_translations)
    app.add_js_file("lang-switch.js", loading_method="defer")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
