"""Chapter 7's live GPT on the built website, in headless Chromium, offline: the page's numbers are PyTorch's.

The site is built once per session with local assets (tests/conftest.py); the page runs the exported model
(_static/live/ch07_gpt.onnx) with ONNX Runtime Web from the site's own files. Three prompts are typed: the page's
logits equal PyTorch's (the same weights, read back by book.export.load_exported) within 1e-4 and its attention
maps within 1e-5; greedy writing (temperature 0) gives book.generate's characters; moving a slider changes what
the page shows and writes; the layer and head selectors redraw the heatmap; without WebAssembly the section
says so in one line. BOOK_LIVE_REPORT=<file> writes the measured sizes, latencies and errors there as JSON.
"""
from __future__ import annotations

import json
import os
import time

import pytest
import torch

from book.export import load_exported
from book.generate import generate, next_token_probs

PAGE = "chapters/07_training_gpt"
PROMPTS = ["ROMEO:\nBut soft, what light ", "First Citizen:\nWe are accounted poor citizens",
           "KING HENRY:\nWhat say you, my lords? shall we go along with it, and then"]
WRITE = 80   # the page's button writes 80 characters


@pytest.fixture(scope="module")
def reference(site_html):
    """The PyTorch GPT with the weights the page runs, and its JSON."""
    return load_exported(site_html / "_static" / "live" / "ch07_gpt.onnx")


@pytest.fixture(scope="module")
def live(chromium, site_url):
    """The chapter page with the live section started; (page, record of requests and errors)."""
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    seen = {"external": [], "errors": [], "failed": [], "bytes": {}}
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(site_url)
                  else (seen["external"].append(route.request.url), route.abort()))
    page = context.new_page()
    page.on("pageerror", lambda e: seen["errors"].append(f"uncaught: {e}"))
    page.on("console", lambda m: m.type == "error" and seen["errors"].append(m.text))
    page.on("requestfailed", lambda r: seen["failed"].append(f"{r.url}: {r.failure}"))
    page.on("response", lambda r: r.status >= 400 and seen["failed"].append(f"{r.status} {r.url}"))

    def count(response):
        if "/_static/live/" in response.url:
            try:
                seen["bytes"][response.url.rsplit("/", 1)[1]] = len(response.body())
            except Exception:  # noqa: BLE001 - a body that cannot be read is counted as missing
                seen["bytes"][response.url.rsplit("/", 1)[1]] = None
    page.on("response", count)
    page.goto(f"{site_url}{PAGE}.html", wait_until="load")
    assert page.locator(".live-gpt").count() == 1, "no live section on the chapter 7 page"
    t0 = time.perf_counter()
    page.locator(".live-gpt").scroll_into_view_if_needed()   # the section loads its model when it comes near
    page.wait_for_function("() => window.liveGPT && window.liveGPT.ready", timeout=15000)
    page.evaluate("() => window.liveGPT.ready.then(() => true)")
    seen["ready_s"] = time.perf_counter() - t0
    page.wait_for_selector(".live-gpt-bar", timeout=15000)
    yield page, seen
    context.close()


def _type(page, text: str) -> None:
    box = page.locator(".live-gpt-text")
    box.fill(text)                                       # fires an input event, as typing does
    page.evaluate("() => window.liveGPT.refresh()")      # and waits for the model's answer instead of the debounce


def _probs(page) -> list:
    return page.evaluate("() => window.liveGPT.probs()")


@pytest.mark.parametrize("prompt", PROMPTS)
def test_page_logits_and_attention_equal_pytorchs(live, reference, prompt):
    page, seen = live
    model, meta = reference
    _type(page, prompt)
    got = page.evaluate("(s) => window.liveGPT.forward(s)", prompt)
    ids = torch.tensor([[meta["vocab"].index(c) for c in prompt][-meta["config"]["context_len"]:]])
    assert got["ids"] == ids[0].tolist()
    with torch.no_grad():
        logits, maps = model(ids, need_weights=True)
    T, V, L, H = got["T"], got["V"], got["L"], got["H"]
    page_logits = torch.tensor(got["logits"]).view(1, T, V)
    page_maps = torch.tensor(got["attention"]).view(L, 1, H, T, T)
    logit_err = (page_logits - logits).abs().max().item()
    attn_err = (page_maps - torch.stack(maps)).abs().max().item()
    seen.setdefault("parity", []).append({"prompt": prompt, "logits": logit_err, "attention": attn_err})
    assert logit_err < 1e-4, f"{prompt!r}: logits differ by {logit_err:.2e}"
    assert attn_err < 1e-5, f"{prompt!r}: attention differs by {attn_err:.2e}"
    # the bars show the distribution writing draws from (default temperature 0.8, every character)
    want = next_token_probs(logits[0, -1], temperature=0.8)
    order = logits[0, -1].softmax(-1).argsort(descending=True)[:12]
    assert torch.allclose(torch.tensor(_probs(page), dtype=torch.float32), want[order], atol=1e-5)


def _set_slider(page, selector: str, key: str) -> None:
    page.locator(selector).focus()
    page.keyboard.press(key)


def _write(page) -> str:
    before = page.locator(".live-gpt-text").input_value()
    t0 = time.perf_counter()
    page.locator(".live-gpt-write").click()
    page.wait_for_function("() => !document.querySelector('.live-gpt-write').disabled", timeout=60000)
    page.evaluate("() => window.liveGPT.refresh()")
    after = page.locator(".live-gpt-text").input_value()
    assert after.startswith(before)
    return after[len(before):], time.perf_counter() - t0


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_writing_equals_book_generate(live, reference, prompt):
    page, seen = live
    model, meta = reference
    _type(page, prompt)
    _set_slider(page, ".live-gpt-temperature", "Home")          # temperature 0: greedy
    assert page.locator(".live-gpt-temperature").input_value() == "0"
    written, seconds = _write(page)
    ids = torch.tensor([[meta["vocab"].index(c) for c in prompt]])
    want = generate(model, ids, WRITE, temperature=0)[0, ids.shape[1]:].tolist()
    assert written == "".join(meta["vocab"][i] for i in want), f"{prompt!r}: the page wrote {written!r}"
    seen.setdefault("write_s", []).append(seconds)


def test_moving_a_slider_changes_the_output(live):
    page, _ = live
    prompt = PROMPTS[0]
    _type(page, prompt)
    _set_slider(page, ".live-gpt-temperature", "Home")
    greedy_bars = _probs(page)
    assert max(greedy_bars) == 1.0                               # temperature 0: all mass on one character
    greedy_text, _ = _write(page)
    _set_slider(page, ".live-gpt-temperature", "End")            # temperature 2
    assert page.locator(".live-gpt-temperature").input_value() == "2"
    hot_bars = _probs(page)
    assert hot_bars != greedy_bars and max(hot_bars) < 1.0
    _type(page, prompt)
    hot_text, _ = _write(page)
    assert hot_text != greedy_text
    _set_slider(page, ".live-gpt-topk", "Home")                  # top-k 1: greedy again, at any temperature
    assert max(_probs(page)) == 1.0


def test_layer_and_head_selectors_redraw_the_heatmap(live, reference):
    page, _ = live
    _, meta = reference
    _type(page, PROMPTS[1])
    shot = lambda: page.evaluate("() => document.querySelector('.live-gpt-heatmap').toDataURL()")
    first = shot()
    assert page.locator(".live-gpt-layer option").count() == meta["config"]["n_layers"]
    assert page.locator(".live-gpt-head option").count() == meta["config"]["n_heads"]
    page.locator(".live-gpt-head").select_option("1")
    second = shot()
    page.locator(".live-gpt-layer").select_option(str(meta["config"]["n_layers"] - 1))
    assert len({first, second, shot()}) == 3


def test_offline_and_no_errors(live):
    page, seen = live
    assert not seen["external"], f"requests leaving the site: {seen['external']}"
    assert not seen["failed"], f"failed requests: {seen['failed']}"
    assert not seen["errors"], f"console errors: {seen['errors']}"
    for name in ("live_gpt.js", "ort.wasm.min.js", "ort-wasm-simd-threaded.wasm", "ch07_gpt.onnx", "ch07_gpt.json"):
        assert seen["bytes"].get(name), f"{name} was not loaded from the site: {sorted(seen['bytes'])}"
    report = os.environ.get("BOOK_LIVE_REPORT")
    if report:
        timings = page.evaluate("() => window.liveGPT.timings")
        with open(report, "w") as f:
            json.dump({"bytes": seen["bytes"], "ready_s": seen["ready_s"], "timings_ms": timings,
                       "parity": seen.get("parity"), "write_80_s": seen.get("write_s")}, f, indent=1)


def test_without_webassembly_the_section_says_so(chromium, site_url):
    context = chromium.new_context()
    context.add_init_script("delete window.WebAssembly;")
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(site_url)
                  else route.abort())
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{site_url}{PAGE}.html", wait_until="load")
        status = page.locator(".live-gpt .live-gpt-status")
        status.wait_for(timeout=10000)
        assert status.inner_text().startswith("WebAssembly is unavailable")
        assert page.locator(".live-gpt > *").count() == 1          # one line, no broken controls
        assert not errors, errors
        assert page.locator("h1").count() >= 1                     # the rest of the page is there
    finally:
        context.close()
