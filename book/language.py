"""The reader's language for what `book` itself says: the exercise checkers' hints (and any message marked with `_`).

English by default. The Chinese edition's setup cell sets the environment variable BOOK_LANG=zh (tools/i18n.py adds
that one line), so a reader who runs a Chinese notebook in Colab or JupyterLab reads the checkers' hints in Chinese;
`set_language("zh")` does the same from Python. Messages are translated with the standard library's gettext from
the catalog book/locale/zh_Hans_CN/LC_MESSAGES/book.po (compiled to book.mo beside it; tests/test_language.py checks the
.mo is the .po compiled, and that every marked message has a translation). A message marked `_("... {x} ...")` is a
template: translate first, then `.format(...)`, so the Chinese can put the values where Chinese puts them.

    from book.language import _
    raise AssertionError(_("expected {want}, got {got!r}").format(want=want, got=got))
"""
from __future__ import annotations

import gettext
import os
from functools import lru_cache
from pathlib import Path
from typing import Optional

__all__ = ["LANGUAGES", "set_language", "language", "_"]

LANGUAGES = ("en", "zh")
LOCALES = {"zh": "zh_Hans_CN"}
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
_chosen: Optional[str] = None


def _valid(lang, where: str) -> str:
    if lang not in LANGUAGES:
        raise ValueError(f"{where} must be one of {list(LANGUAGES)}, got {lang!r}")
    return lang


def set_language(lang: Optional[str]) -> None:
    """Choose the language of `book`'s messages: "en" or "zh"; None goes back to $BOOK_LANG (default "en")."""
    global _chosen
    _chosen = None if lang is None else _valid(lang, "lang")


def language() -> str:
    """The language `book` speaks now: set_language's choice, else $BOOK_LANG, else "en"."""
    if _chosen is not None:
        return _chosen
    return _valid(os.environ.get("BOOK_LANG", "en") or "en", "the environment variable BOOK_LANG")


@lru_cache(maxsize=None)
def _catalog(lang: str) -> gettext.NullTranslations:
    if lang == "en":
        return gettext.NullTranslations()
    return gettext.translation("book", localedir=str(LOCALE_DIR), languages=[LOCALES[lang]])


def _(message: str) -> str:
    """`message` in the reader's language (itself where the catalog has no translation of it)."""
    return _catalog(language()).gettext(message)
