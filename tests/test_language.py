"""The exercise checkers speak the reader's language (book.language): English by default, Chinese with
set_language("zh") or BOOK_LANG=zh. The catalog book/locale/zh_Hans_CN/LC_MESSAGES/book.po translates every message
marked `_("...")` in book/, keeping its {placeholders}, and book.mo beside it is that .po compiled.

After marking or changing a message (keep `_()` out of f-strings: pybabel extract does not look inside them):
    pybabel extract --no-default-keywords -k _ --no-wrap --sort-by-file -o /tmp/book.pot book
    pybabel update -i /tmp/book.pot -d book/locale -D book -l zh_Hans_CN --no-wrap
    (translate the new and the fuzzy entries of book.po)
    pybabel compile -d book/locale -D book -l zh_Hans_CN
"""
import ast
import gettext
import re
import string
from io import BytesIO
from pathlib import Path

import pytest
import torch
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from book.attention import OneLayerAttention
from book.chapters import ch01, ch03, ch04, ch07, ch08, ch09
from book.gpt import GPT, GPTConfig
from book.language import LANGUAGES, language, set_language
from book.live import live_gpt
from book.tasks import ToyTranslation
from book.tokenizers import CharTokenizer
from book.transformer import Transformer, TransformerConfig

ROOT = Path(__file__).resolve().parent.parent
LC = ROOT / "book" / "locale" / "zh_Hans_CN" / "LC_MESSAGES"
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


@pytest.fixture(autouse=True)
def english_by_default(monkeypatch):
    """Each test starts from the default (no BOOK_LANG, no set_language) and leaves it so."""
    monkeypatch.delenv("BOOK_LANG", raising=False)
    set_language(None)
    yield
    set_language(None)


def _bits_wrong():
    ch01.check_bits_per_char(lambda probs: 1.0)


def _attention_wrong():
    ch04.check_attention(lambda q, k, v, mask: q)


def _kv_wrong():
    ch07.check_kv_cache_bytes(lambda *args: 1234567)


def _mask_wrong():
    ch09.check_mask_tokens(lambda ids, vocab, g: (ids, ids.clone()))   # every position chosen, none masked


def _no_return():
    ch03.check_general_score(lambda s, H, W: None)


# (a wrong answer, the English message it gets today, values the Chinese message must show too)
CASES = {
    "ch01 bits per char": (_bits_wrong, "for probabilities [1.0, 0.25, 0.125]: expected 1.6667 bits, got 1.0. "
                           "Hint: average -log2(p), not -ln(p), and not the sum.", ["[1.0, 0.25, 0.125]", "1.6667"]),
    "ch04 attention": (_attention_wrong, "output should have shape (2, 3, 5, 4), got (2, 3, 5, 8)",
                       ["(2, 3, 5, 4)", "(2, 3, 5, 8)"]),
    "ch07 KV cache": (_kv_wrong, "for (n_layers, n_kv_heads, d_head, context_len, batch, bytes) = "
                      "(32, 8, 128, 8192, 1, 2): expected 1,073,741,824 bytes, got 1234567. Hint: K and V are both "
                      "cached, in every layer.", ["(32, 8, 128, 8192, 1, 2)", "1,073,741,824", "1234567"]),
    "ch09 masking": (_mask_wrong, "chosen: expected 15%, got 100.00%", ["15%", "100.00%"]),
    "forgotten return": (_no_return, "your function returned None: did you forget `return`? (a function without a "
                         "return statement gives None)", ["None", "`return`"]),
}


def _message(wrong) -> str:
    with pytest.raises(AssertionError) as err:
        wrong()
    return str(err.value)


@pytest.mark.parametrize("case", CASES)
def test_english_by_default(case):
    wrong, english, _values = CASES[case]
    got = _message(wrong)
    assert got == english
    assert not CJK.search(got)


@pytest.mark.parametrize("case", CASES)
def test_chinese_with_set_language(case):
    wrong, english, values = CASES[case]
    set_language("zh")
    assert language() == "zh"
    got = _message(wrong)
    assert CJK.search(got) and got != english, got
    assert "{" not in got and all(v in got for v in values), got


def test_chinese_with_the_environment_variable(monkeypatch):
    monkeypatch.setenv("BOOK_LANG", "zh")
    assert language() == "zh"
    got = _message(_bits_wrong)
    assert CJK.search(got) and "1.6667" in got
    set_language("en")    # the call wins over the environment
    assert _message(_bits_wrong) == CASES["ch01 bits per char"][1]


def test_a_language_not_offered_is_refused(monkeypatch):
    with pytest.raises(ValueError, match=r"lang must be one of \['en', 'zh'\], got 'fr'"):
        set_language("fr")
    assert language() == "en"    # the refused choice changed nothing
    monkeypatch.setenv("BOOK_LANG", "fr")
    with pytest.raises(ValueError, match=r"BOOK_LANG must be one of \['en', 'zh'\], got 'fr'"):
        language()
    with pytest.raises(ValueError, match="BOOK_LANG"):
        _bits_wrong()
    assert LANGUAGES == ("en", "zh")


# ---- the catalog ---------------------------------------------------------------------------------------------------
def _po():
    with (LC / "book.po").open("rb") as f:
        return read_po(f)


def test_the_mo_is_the_po_compiled():
    compiled = BytesIO()
    write_mo(compiled, _po())           # as `pybabel compile` does (fuzzy entries left out)
    compiled.seek(0)
    with (LC / "book.mo").open("rb") as f:
        committed = gettext.GNUTranslations(f)
    assert committed._catalog == gettext.GNUTranslations(compiled)._catalog, \
        "book.mo is stale: pybabel compile -d book/locale -D book -l zh_Hans_CN"


def marked_messages() -> dict:
    """{message: [file:line, ...]} of every `_("...")` call in book/, f-strings included (ast sees into them)."""
    found = {}
    for path in sorted((ROOT / "book").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_":
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                assert len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str), f"{where}: _() takes one string literal"
                found.setdefault(node.args[0].value, []).append(where)
    return found


def _fields(text: str) -> set:
    """The {placeholders} of a str.format template, each with its conversion and format spec."""
    return {"{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
            for _lit, name, spec, conv in string.Formatter().parse(text) if name is not None}


def test_every_marked_message_is_translated_with_its_placeholders():
    marked, po = marked_messages(), _po()
    assert len(marked) > 40, "the checkers' messages are marked with _()"
    problems = []
    for msgid, where in marked.items():
        entry = po.get(msgid)
        if entry is None or not entry.string or entry.fuzzy:
            problems.append(f"{where[0]}: {'fuzzy' if entry is not None and entry.fuzzy else 'untranslated'}: "
                            f"{msgid!r}")
        elif _fields(entry.string) != _fields(msgid):
            problems.append(f"{where[0]}: placeholders {sorted(_fields(entry.string))} in the translation, "
                            f"{sorted(_fields(msgid))} in {msgid!r}")
        elif not CJK.search(entry.string):
            problems.append(f"{where[0]}: not Chinese: {entry.string!r}")
    stale = [m.id for m in po if m.id and m.id not in marked]
    assert not problems and not stale, "\n".join(problems + [f"no longer marked in book/: {s!r}" for s in stale])


def test_the_placeholders_check_sees_a_lost_placeholder():
    assert _fields("expected {want:.6f}, got {got!r}") == {"{want:.6f}", "{got!r}"}
    assert _fields("应为 {want:.4f}，实际得到 {got!r}") != _fields("expected {want:.6f}, got {got!r}")
    assert _fields("{{literal}} {x}") == {"{x}"}


def test_chinese_sentences_use_full_width_punctuation():
    """A colon or semicolon right after a Chinese character is the full-width one (code keeps its own)."""
    bad = [m.string for m in _po() if m.id and re.search(r"[\u4e00-\u9fff][:;,?]", m.string)]
    assert not bad, bad


def test_gettext_reads_the_catalog():
    """The stdlib finds the committed catalog where book.language looks for it."""
    zh = gettext.translation("book", localedir=str(LC.parent.parent), languages=["zh_Hans_CN"])
    assert zh.gettext("your function") == "你的函数"


# ---- the live sections in a kernel (book.live, chapter 4's and 8's typed-input widgets) ----------------------------
@pytest.fixture(scope="module")
def live_models():
    """Small untrained models: chapter 7's GPT, chapter 4's attention layer, chapter 8's Transformer."""
    torch.manual_seed(0)
    tok = CharTokenizer.from_text("ROMEO:\nBut soft, what light through yonder window breaks?")
    gpt = GPT(GPTConfig(vocab_size=tok.vocab_size, context_len=16, d_model=24, n_heads=3, n_layers=2)).eval()
    layer = OneLayerAttention(tok.vocab_size, d=8)
    task = ToyTranslation()
    tf = Transformer(TransformerConfig(len(task.src_vocab), len(task.tgt_vocab), context_len=48, d_model=16,
                                       n_heads=2, n_layers=2, d_ff=32))
    return gpt, tok, layer, tf, task


def _live_texts(live_models) -> dict:
    """What the three kernel sections write: their labels and messages, in the language chosen now."""
    gpt, tok, layer, tf, task = live_models
    w = live_gpt(gpt, tok, "ROMEO: 123", n_chars=20)
    texts = {"labels": [w.text.description, w.temperature.description, w.top_k.description, w.button.description,
                        w.layer.description, w.head.description],
             "options": list(w.layer._options_labels) + list(w.head._options_labels),
             "skipped": w.note.value, "alt": w.heatmap.value.split('" src=')[0]}
    w.text.value = "§"
    texts.update(empty=w.bars.value, write=(w.write(), w.note.value)[1])
    read = ch04.live_read_twice(layer, tok, "soft")
    texts["read twice"] = [read.children[0].description, read.children[1].value]
    read.children[0].value = "§"
    texts["type a line"] = read.children[1].value
    texts["score"] = ch04._read_twice_html({"text": "a<b", "predicted": "a<c", "right": 2})
    tr = ch08.live_translator(tf, task, "cat sees zebra dog")
    box, out, selectors, _picture = tr.children
    texts["translator"] = [box.description, selectors.children[0].description, selectors.children[1].description,
                           *selectors.children[0]._options_labels, out.value]
    box.value = "zebra"
    texts["type a sentence"] = out.value
    return texts


def test_the_live_sections_speak_english_by_default(live_models):
    got = _live_texts(live_models)
    assert got["labels"] == ["text", "temperature", "top-k", "write 20 characters", "layer", "head"]
    assert got["options"] == ["layer 1", "layer 2", "head 1", "head 2", "head 3"]
    assert got["skipped"] == "Not in the vocabulary, skipped: 1 2 3"
    assert got["alt"].startswith('<img alt="attention of layer 1, head 1 over 7 characters, the heaviest weight of '
                                 'each of the last 7 rows: &#x27;R&#x27; puts 1.00 on &#x27;R&#x27;; &#x27;O&#x27; '
                                 'puts '), got["alt"]
    assert (got["empty"], got["write"]) == ("Type something.", "type at least one known character first")
    assert got["read twice"][0] == "your line" and got["read twice"][1].startswith(
        '<pre style="margin:0">line read twice: soft\nsecond reading writes: <span')
    assert got["read twice"][1].endswith(" of 4 characters right (red: a miss)</p>")
    assert got["type a line"] == "Type a line."
    assert got["score"] == ('<pre style="margin:0">line read twice: a&lt;b\nsecond reading writes: '
                            '<span style="">a</span><span style="">&lt;</span><span style="background:#f4c7c3;">c'
                            '</span></pre><p>2 of 3 characters right (red: a miss)</p>')
    assert got["translator"][:5] == ["sentence", "layer", "head", "layer 1", "layer 2"]
    assert got["translator"][5].startswith('<pre style="margin:0">source:      cat sees dog\ntranslation: ')
    assert got["translator"][5].endswith("</pre><br>Not in the vocabulary, skipped: zebra")
    assert got["type a sentence"] == "Type a sentence of the toy language (1 to 48 known words)."
    assert not CJK.search(repr(got))


def test_the_live_sections_speak_chinese(live_models):
    """The words of the website's live sections (_ext/live_gpt.js, table ZH), the numbers and markup kept."""
    set_language("zh")
    got = _live_texts(live_models)
    assert got["labels"] == ["文本", "温度", "top-k 采样", "续写 20 个字符", "层", "头"]
    assert got["options"] == ["第 1 层", "第 2 层", "第 1 个头", "第 2 个头", "第 3 个头"]
    assert got["skipped"] == "词表中没有，已跳过：1 2 3"
    assert got["alt"].startswith('<img alt="第 1 层第 1 个头在 7 个字符上的注意力，最后 7 行各自的最大权重：'
                                 '&#x27;R&#x27; 给 &#x27;R&#x27; 的权重是 1.00；&#x27;O&#x27; 给 '), got["alt"]
    assert (got["empty"], got["write"]) == ("请输入一些文字。", "请先输入至少一个词表中的字符")
    assert got["read twice"][0] == "一行文字" and got["read twice"][1].startswith(
        '<pre style="margin:0">这一行：  soft\n第二遍：  <span')
    assert "4 个字符中预测对了 " in got["read twice"][1] and got["type a line"] == "请输入一行。"
    assert got["score"] == ('<pre style="margin:0">这一行：  a&lt;b\n第二遍：  <span style="">a</span>'
                            '<span style="">&lt;</span><span style="background:#f4c7c3;">c</span></pre>'
                            '<p>3 个字符中预测对了 2 个（红底的是预测错的字符）</p>')
    assert got["translator"][:5] == ["句子", "层", "头", "第 1 层", "第 2 层"]
    assert got["translator"][5].startswith('<pre style="margin:0">原文：cat sees dog\n译文：')
    assert got["translator"][5].endswith("</pre><br>词表中没有，已跳过：zebra")
    assert got["type a sentence"] == "请输入一句玩具语言（1 到 48 个已知的词）。"
    english = set_language("en") or _live_texts(live_models)
    assert all(got[k] != english[k] for k in got), [k for k in got if got[k] == english[k]]
