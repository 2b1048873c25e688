"""The typed-input sections of chapters 4 and 8 on the built website, in headless Chromium, offline, and what every
live page weighs.

Chapter 4's attention layer (_static/live/ch04_read_twice.onnx) reads a typed line twice: the page's logits and
attention equal PyTorch's (book.attention.OneLayerAttention with the file's weights) within 1e-4 and 1e-5, and its
second reading, score and map are book.chapters.ch04.read_twice's. Chapter 8's Transformer
(_static/live/ch08_translator.onnx) translates a typed toy sentence: the page writes book.chapters.ch08.
translate_words's words, with its cross-attention within 1e-5. While a model loads, each of the three live sections
shows the example its JSON holds (computed by PyTorch when the chapter ran); on a 360-pixel screen no section is
wider than the page; and every live page adds at most 5.5 MB, gzipped, to what it downloads.
"""
from __future__ import annotations

import gzip
import time

import pytest
import torch

from book.chapters.ch04 import load_read_twice, read_twice
from book.chapters.ch08 import load_translator, translate_words
from book.tasks import ToyTranslation

PAGES = {"ch04_read_twice": "chapters/04_self_attention", "ch07_gpt": "chapters/07_training_gpt",
         "ch08_translator": "chapters/08_encoder_decoder"}
LINES = ["Sweet are the uses of adversity", "abcabcabc xyz", "To be, or not to be: that is the question:",
         "ROMEO:\nBut soft, what light through yonder window breaks? It is the east"]   # the last is too long: cut
SENTENCES = ["shy owl sees big red fox and hen likes cat", "cat sees dog",
             "odd wet bee finds old cow and ant eats shy hen and fox helps dog",
             "cat cat sees", "big red zebra sees the dog"]   # broken grammar, and words not in the language
RUNTIME = ("ort.wasm.min.js", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm", "live_gpt.js")
MAX_ADDED = 5.5e6      # bytes a live page may add, gzipped (issue: "every page's added weight <= 5.5 MB")


def _open(chromium, site_url, page_name, width=1200, hold=None):
    """(context, page, errors) with the chapter page open and its live section started; `hold`: a file name whose
    request is never answered (its model stays loading)."""
    context = chromium.new_context(viewport={"width": width, "height": 900})
    errors = []
    held = []
    def route(r):
        if not r.request.url.startswith(site_url):
            errors.append(f"external request: {r.request.url}")
            return r.abort()
        if hold and r.request.url.endswith("/" + hold):
            held.append(r)                      # never answered: the model is still loading
            return None
        return r.continue_()
    context.route("**/*", route)
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.goto(f"{site_url}{PAGES[page_name]}.html", wait_until="load")
    assert page.locator(f'.live-gpt[data-model="{page_name}"]').count() == 1, f"no live section {page_name}"
    page.locator(".live-gpt").scroll_into_view_if_needed()
    page.wait_for_function("() => window.liveGPT && window.liveGPT.example", timeout=15000)
    return context, page, errors


def _started(chromium, site_url, site_html, name, load):
    """The page with its model running: (context, (page, PyTorch model with the file's weights, JSON, errors))."""
    context, page, errors = _open(chromium, site_url, name)
    page.evaluate("() => window.liveGPT.ready.then(() => true)")
    return context, (page, *load(site_html / "_static" / "live" / f"{name}.onnx"), errors)


@pytest.fixture(scope="module")
def ch4(chromium, site_url, site_html):
    context, live = _started(chromium, site_url, site_html, "ch04_read_twice", load_read_twice)
    yield live
    context.close()


@pytest.fixture(scope="module")
def ch8(chromium, site_url, site_html):
    context, live = _started(chromium, site_url, site_html, "ch08_translator", load_translator)
    yield live
    context.close()


class _Tok:
    """The export's vocabulary as the tokenizer read_twice needs."""

    def __init__(self, vocab):
        self.itos, self.stoi = list(vocab), {c: i for i, c in enumerate(vocab)}

    def decode(self, ids):
        return "".join(self.itos[i] for i in ids)


@pytest.mark.parametrize("line", LINES)
def test_ch4_page_reads_twice_as_pytorch_does(ch4, line):
    page, model, meta, _ = ch4
    tok = _Tok(meta["vocab"])
    got = page.evaluate("(s) => window.liveGPT.forward(s)", line)
    ids = [tok.stoi[c] for c in line if c in tok.stoi][-meta["max_line"]:]
    assert got["ids"] == ids
    x = torch.tensor([ids + ids[:-1]])
    with torch.no_grad():
        logits = model(x)
    T, V = got["T"], got["V"]
    assert (torch.tensor(got["logits"]).view(1, T, V) - logits).abs().max().item() < 1e-4
    assert (torch.tensor(got["weights"]).view(1, T, T) - model.weights).abs().max().item() < 1e-5
    page_read = page.evaluate("(s) => window.liveGPT.readTwice(s)", line)
    want = read_twice(model, tok, line)
    assert (page_read["text"], page_read["predicted"], page_read["right"]) == \
        (want["text"], want["predicted"], want["right"])
    n = len(want["text"])
    assert (torch.tensor(page_read["weights"]).view(n, n) - want["weights"]).abs().max().item() < 1e-5


def test_ch4_typing_redraws_the_box(ch4):
    page, model, meta, errors = ch4
    box = page.locator(".live-gpt-line")
    box.fill("the cat sat on the mat")
    page.evaluate("() => window.liveGPT.refresh()")
    shown = page.locator(".live-gpt-reread").inner_text()
    want = read_twice(model, _Tok(meta["vocab"]), "the cat sat on the mat")
    assert shown.splitlines()[-1].endswith(want["predicted"])
    assert f"{want['right']} of 22 characters predicted right" in page.locator(".live-gpt-note").inner_text()
    label = page.locator(".live-gpt-heatmap").get_attribute("aria-label")
    assert label.startswith("attention of the line read twice") and "22 rows by 22 columns" in label
    assert not errors, errors


@pytest.mark.parametrize("sentence", SENTENCES)
def test_ch8_page_translates_as_pytorch_does(ch8, sentence):
    page, model, meta, _ = ch8
    task = ToyTranslation()
    assert meta["src_vocab"] == task.src_vocab and meta["tgt_vocab"] == task.tgt_vocab
    got = page.evaluate("(s) => window.liveGPT.translate(s)", sentence)
    want = translate_words(model, task, sentence)
    assert (got["source"], got["skipped"], got["output"]) == (want["source"], want["skipped"], want["output"])
    L, H, T, S = got["L"], got["H"], got["T"], got["S"]
    assert (torch.tensor(got["cross"]).view(L, H, T, S) - want["cross"]).abs().max().item() < 1e-5
    # one forward pass, logits too
    src = [task.src_vocab.index(w) for w in want["source"]]
    tgt = [1] + [task.tgt_vocab.index(w) for w in want["output"][:-1]]
    fwd = page.evaluate("([s, t]) => window.liveGPT.forward(s, t)", [src, tgt])
    with torch.no_grad():
        logits = model(torch.tensor([src]), torch.tensor([tgt]))
    assert (torch.tensor(fwd["logits"]).view(1, len(tgt), -1) - logits).abs().max().item() < 1e-4


def test_ch8_typing_and_selectors_redraw(ch8):
    page, model, meta, errors = ch8
    page.locator(".live-gpt-line").fill("old fox likes wet cat")
    page.evaluate("() => window.liveGPT.refresh()")
    want = translate_words(model, ToyTranslation(), "old fox likes wet cat")
    assert page.locator(".live-gpt-reread").inner_text().splitlines()[-1] == "translation: " + " ".join(want["output"])
    shot = lambda: page.evaluate("() => document.querySelector('.live-gpt-heatmap').toDataURL()")
    first = shot()
    assert page.locator(".live-gpt-layer option").count() == meta["config"]["n_layers"]
    page.locator(".live-gpt-head").select_option("1")
    second = shot()
    page.locator(".live-gpt-layer").select_option("0")
    assert len({first, second, shot()}) == 3
    page.locator(".live-gpt-line").fill("zebra")
    page.evaluate("() => window.liveGPT.refresh()")
    assert "Type a sentence of the toy language" in page.locator(".live-gpt-reread").inner_text()
    assert "zebra" in page.locator(".live-gpt-note").inner_text()
    assert not errors, errors


@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_loading_section_shows_its_precomputed_example(chromium, site_url, name):
    context, page, errors = _open(chromium, site_url, name, hold=f"{name}.onnx")
    try:
        body = page.locator(".live-gpt-example")
        body.wait_for(timeout=10000)
        assert page.locator(".live-gpt-status").inner_text().startswith("Loading the model")
        page.wait_for_function("() => { const c = document.querySelector('.live-gpt-example canvas');"
                               " return c && c.width > 0; }", timeout=10000)
        box = page.locator(".live-gpt-example textarea, .live-gpt-example input[type=text]")
        assert box.first.evaluate("(b) => b.readOnly"), "the example's box should wait for the model"
        time.sleep(0.5)
        assert page.evaluate("() => !window.liveGPT.live"), "the model should still be loading"
        assert not errors, errors
    finally:
        context.close()


@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_live_section_fits_a_narrow_screen(chromium, site_url, name):
    context, page, errors = _open(chromium, site_url, name, width=360)
    try:
        page.evaluate("() => window.liveGPT.ready.then(() => true)")
        widths = page.evaluate("""() => { const s = document.querySelector('.live-gpt');
            const over = Array.from(s.querySelectorAll('*')).filter(e => e.getBoundingClientRect().right >
                s.getBoundingClientRect().right + 1).map(e => e.className || e.tagName);
            return {section: s.getBoundingClientRect().width, page: document.documentElement.clientWidth,
                    scroll: document.documentElement.scrollWidth, over: over}; }""")
        assert widths["section"] <= widths["page"], widths
        assert not widths["over"], f"sticking out of the section on a 360-pixel screen: {widths['over']}"
        assert not errors, errors
    finally:
        context.close()


@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_live_page_adds_at_most_5_5_mb_gzipped(site_html, name):
    live = site_html / "_static" / "live"
    files = [live / f for f in RUNTIME] + [live / f"{name}.onnx", live / f"{name}.json"]
    sizes = {f.name: len(gzip.compress(f.read_bytes(), 6)) for f in files}
    total = sum(sizes.values())
    print(f"{name}: {total / 1e6:.2f} MB gzipped {sizes}")
    assert total <= MAX_ADDED, f"{PAGES[name]} adds {total / 1e6:.2f} MB gzipped: {sizes}"
