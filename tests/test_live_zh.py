"""The live sections in Chinese (_ext/live_gpt.js): everything a live section writes goes through its string tables.

The Chinese edition's pages carry the English notebooks' outputs byte for byte, so the live sections (chapters 4, 7
and 8) translate themselves in the browser: on a page whose <html lang> starts with "zh", t(key, args) takes the text
from the table ZH instead of EN. Without a browser (tests/test_live_sections.py drives the real one), this checks the
script's source: every t() key is in both tables, the tables have the same keys and each template the same {names}
in both languages, every Chinese text is Chinese with full-width punctuation, and no English text reaches the page
around t(). Where node is installed, it also runs the script on a small fake DOM with a fake ONNX Runtime (the
committed book/results/live/*.json as the models' metadata), on an English and a Chinese page, through loading,
the precomputed example, the live model, typing, the selectors and three failures: the English page shows exactly
the English texts the script has always written, the Chinese page the same structure with every text Chinese.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
JS = ROOT / "_ext" / "live_gpt.js"
LIVE = ROOT / "book" / "results" / "live"
SOURCE = JS.read_text(encoding="utf-8")
PLACEHOLDER = re.compile(r"\{(\w+)\}")
CHINESE = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")    # ideographs and full-width punctuation
IDEOGRAPH = re.compile(r"[\u4e00-\u9fff]")
# string literals of the code that hold English words yet are no text for the reader
NOT_PROSE = {"use strict", "live-gpt-body live-gpt-example", "px monospace"}


def tokens(src: str) -> list:
    """The script's tokens that matter here, in order: ("str", value, offset) for a string literal, ("code", text,
    offset) for the code between literals; comments dropped. (The script's regex literals hold no quotes.)"""
    out, i, start, n = [], 0, 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            out.append(("code", src[start:i], start))
            i = src.index("\n", i)
            start = i
        elif src.startswith("/*", i):
            out.append(("code", src[start:i], start))
            i = src.index("*/", i) + 2
            start = i
        elif c in "\"'":
            out.append(("code", src[start:i], start))
            j = i + 1
            while src[j] != c:
                assert src[j] != "\n", f"unterminated string at {i}"
                j += 2 if src[j] == "\\" else 1
            literal = src[i:j + 1]
            if c == "'":
                literal = '"' + literal[1:-1].replace('\\\'', "'").replace('"', '\\"') + '"'
            out.append(("str", json.loads(literal), i))
            i = start = j + 1
        else:
            i += 1
    out.append(("code", src[start:], start))
    return [t for t in out if t[0] == "str" or t[1]]


TOKENS = tokens(SOURCE)


def object_span(name: str) -> tuple:
    """(start, end) offsets of the object literal of `var NAME = {...};` (a balanced scan over the tokens)."""
    opening = SOURCE.index(f"var {name} = {{") + len(f"var {name} = ")
    depth = 0
    for kind, text, at in TOKENS:
        if kind == "str" or at + len(text) <= opening:
            continue
        for k, ch in enumerate(text):
            if at + k < opening:
                continue
            depth += {"{": 1, "}": -1}.get(ch, 0)
            if depth == 0:
                return opening, at + k + 1
    raise AssertionError(f"var {name}: no closing brace")


def table(name: str) -> dict:
    """The string table `var NAME = {key: "..." + "...", ...}` -> {key: text}."""
    start, end = object_span(name)
    entries, key = {}, None
    for kind, text, at in TOKENS:
        if at + len(text) <= start or at >= end:
            continue
        if kind == "code":
            text, at = text[max(0, start - at):end - at], max(at, start)
            for piece in re.findall(r"(\w+)\s*:|([,+{}])|(\S)", text):
                word, punct, other = piece
                assert not other, f"{name}: unexpected {other!r} near offset {at}"
                if word:
                    key = word
                    assert key not in entries, f"{name}.{key} twice"
                    entries[key] = ""
                elif punct == ",":
                    key = None
        else:
            assert key is not None, f"{name}: a string without a key near offset {at}"
            entries[key] += text
    return entries


EN, ZH = table("EN"), table("ZH")
TABLES = (object_span("EN")[0], object_span("ZH")[1])
CODE = [t for t in TOKENS if not TABLES[0] <= t[2] < TABLES[1]]      # the script without its tables


def calls() -> list:
    """[(key or None, offset)] of every t(...) call outside the tables (None: its key is not a string literal); not
    t's definition."""
    out = []
    for i, (kind, text, at) in enumerate(CODE):
        if kind != "code":
            continue
        for m in re.finditer(r"(?<![\w.$])(?<!function )t\(", text):
            if m.end() == len(text) and i + 1 < len(CODE) and CODE[i + 1][0] == "str":
                out.append((CODE[i + 1][1], at + m.start()))
            else:
                out.append((None, at + m.start()))
    return out


def test_the_two_tables_have_the_same_keys_and_each_template_the_same_placeholders():
    assert len(EN) >= 40, sorted(EN)
    assert sorted(EN) == sorted(ZH), set(EN) ^ set(ZH)
    for key in EN:
        assert sorted(PLACEHOLDER.findall(EN[key])) == sorted(PLACEHOLDER.findall(ZH[key])), key
        assert "{" not in PLACEHOLDER.sub("", EN[key] + ZH[key]) and "}" not in PLACEHOLDER.sub("", EN[key] + ZH[key])


def test_every_t_call_names_a_key_of_both_tables_and_every_key_is_used():
    found = calls()
    assert [at for key, at in found if key is None] == [], "t() with a key that is not a string literal"
    used = {key for key, _ in found}
    assert used - set(ZH) == set() and used - set(EN) == set()
    assert set(EN) - used == set(), "keys no t() call uses"
    assert len(found) >= 45


def test_every_chinese_text_is_chinese_with_full_width_punctuation():
    for key, zh in ZH.items():
        assert CHINESE.search(zh), key
        assert IDEOGRAPH.search(zh) or key == "list_sep", key
        bare = PLACEHOLDER.sub("", zh)
        assert not re.search(r"[\u4e00-\u9fff][,;:!?()]|[,;:!?(][\u4e00-\u9fff]|[\u4e00-\u9fff]\.(?!json)", bare), key
        assert zh != EN[key]
    assert ZH["loading"] == "正在加载模型…" and ZH["type_line"] == "请输入一行。"
    assert ZH["skipped"].startswith("词表中没有，已跳过：") and ZH["translation"] == "原文：{source}\n译文：{output}"
    assert "注意力" in ZH["gpt_attention"] and "层" in ZH["layer_n"] and "头" in ZH["head_n"]


def test_no_english_text_reaches_the_page_around_t():
    """No string literal with words in the code outside the tables (textContent, aria-label and the other
    attributes, el()'s text, a text node, an Error's message), except those that are no text at all."""
    prose = [(text, at) for kind, text, at in CODE if kind == "str"
             and re.search(r"[A-Za-z]{2,}\W*\s+\W*[A-Za-z]{2,}", text) and text not in NOT_PROSE]
    assert prose == []
    flat = "".join(f'"{text}"' if kind == "str" else text for kind, text, _ in CODE)
    bypass = [
        r'(textContent|innerText|value|title|placeholder|alt)\s*=\s*"(?=[^"]*[A-Za-z])',
        r'setAttribute\("(aria-label|title|placeholder|alt)",\s*"(?=[^"]*[A-Za-z])',
        r'(\btext|"aria-label"|\btitle|\bplaceholder|\balt)\s*:\s*"(?=[^"]*[A-Za-z])',
        r'createTextNode\("(?=[^"]*[A-Za-z])', r'new Error\("', r"\bNO_WASM\b",
    ]
    for pattern in bypass:
        assert not re.search(pattern, flat), pattern


def test_t_picks_the_page_language_and_fills_placeholders_once():
    body = SOURCE[SOURCE.index("  function t(key, args) {"):]
    body = body[:body.index("\n  }\n") + 4]
    assert "document.documentElement.lang" in body and "/^zh/i" in body and "hasOwnProperty" in body


# ---- the script itself, in node ----------------------------------------------------------------------------------
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")

HARNESS = r"""
"use strict";
var fs = require("fs"), vm = require("vm"), path = require("path");
var SCRIPT = fs.readFileSync(process.argv[2], "utf8"), LIVE = process.argv[3], LANG = process.argv[4];

function El(tag) {   // the little of a DOM element the script uses
  this.tagName = tag ? tag.toUpperCase() : null;
  this.attrs = {}; this.childNodes = []; this.parentNode = null; this.listeners = {};
  this._text = ""; this.dataset = {}; this.value = ""; this.readOnly = false; this.disabled = false;
}
Object.defineProperty(El.prototype, "textContent", {
  get: function () {
    return this.tagName ? this.childNodes.map(function (c) { return c.textContent; }).join("") : this._text;
  },
  set: function (v) {
    if (!this.tagName) { this._text = String(v); return; }
    this.childNodes.forEach(function (c) { c.parentNode = null; });
    this.childNodes = [];
    if (String(v) !== "") this.appendChild(text(String(v)));
  }
});
Object.defineProperty(El.prototype, "innerHTML", {set: function (v) {
  if (v !== "") throw new Error("innerHTML " + v);
  this.textContent = "";
}});
Object.defineProperty(El.prototype, "children", {get: function () {
  return this.childNodes.filter(function (c) { return c.tagName; });
}});
El.prototype.appendChild = function (c) {
  if (c.parentNode) c.parentNode.removeChild(c);
  this.childNodes.push(c); c.parentNode = this;
  if (this.onAppend) this.onAppend(c);
  return c;
};
El.prototype.removeChild = function (c) {
  this.childNodes.splice(this.childNodes.indexOf(c), 1); c.parentNode = null; return c;
};
El.prototype.setAttribute = function (k, v) {
  this.attrs[k] = String(v);
  if (k.indexOf("data-") === 0) {
    this.dataset[k.slice(5).replace(/-(\w)/g, function (m, c) { return c.toUpperCase(); })] = String(v);
  }
  if (k === "value") this.value = String(v);
};
El.prototype.getAttribute = function (k) { return k in this.attrs ? this.attrs[k] : null; };
El.prototype.addEventListener = function (type, fn) { (this.listeners[type] = this.listeners[type] || []).push(fn); };
El.prototype.fire = function (type) { (this.listeners[type] || []).forEach(function (fn) { fn({}); }); };
El.prototype.getContext = function () {
  var noop = function () {};
  return {measureText: function (s) { return {width: 7 * String(s).length}; }, fillText: noop, fillRect: noop,
          save: noop, restore: noop, translate: noop, rotate: noop};
};
El.prototype.find = function (cls) {
  var out = [];
  (function walk(n) {
    if (n.tagName && (" " + (n.attrs["class"] || "") + " ").indexOf(" " + cls + " ") >= 0) out.push(n);
    n.childNodes.forEach(walk);
  })(this);
  return out;
};
function text(s) { var n = new El(null); n._text = s; return n; }

function snapshot(n) {
  if (!n.tagName) return n._text;
  var out = {tag: n.tagName.toLowerCase(), attrs: n.attrs, children: n.childNodes.map(snapshot)};
  if (/^(INPUT|TEXTAREA|SELECT)$/.test(n.tagName)) out.value = n.value;
  return out;
}

// deterministic stand-ins for the models' outputs, shaped as the real ones
function wave(n, k) {
  var a = new Float32Array(n);
  for (var i = 0; i < n; i++) a[i] = Math.sin(0.37 * i + k);
  return a;
}
function causal(L, H, T) {
  var a = new Float32Array(L * H * T * T);
  for (var b = 0; b < L * H; b++) {
    for (var i = 0; i < T; i++) for (var j = 0; j <= i; j++) a[(b * T + i) * T + j] = 1 / (i + 1);
  }
  return a;
}
function flat(n, v) { var a = new Float32Array(n); a.fill(v); return a; }
function session(meta) {
  var cfg = meta.config;
  if (meta.format === "book-live-gpt/1") return {run: function (f) {
    var T = f.idx.dims[1], V = meta.vocab.length;
    return Promise.resolve({logits: {data: wave(T * V, T)}, attention: {data: causal(cfg.n_layers, cfg.n_heads, T)}});
  }};
  if (meta.format === "book-live-reread/1") return {run: function (f) {
    var T = f.x.dims[1], V = meta.vocab.length;
    return Promise.resolve({logits: {data: wave(T * V, T)}, weights: {data: flat(T * T, 1 / T)}});
  }};
  return {run: function (f) {
    var T = f.tgt.dims[1], S = f.src.dims[1], V = meta.tgt_vocab.length;
    return Promise.resolve({logits: {data: wave(T * V, T)},
                            cross: {data: flat(cfg.n_layers * cfg.n_heads * T * S, 1 / S)}});
  }};
}

function page(name, prompt, options) {   // a page with one live section, the script run on it
  options = options || {};
  var meta = JSON.parse(fs.readFileSync(path.join(LIVE, name + ".json"), "utf8"));
  var root = new El("div");
  root.setAttribute("class", "live-gpt"); root.setAttribute("data-model", name);
  root.setAttribute("data-prompt", prompt);
  root.appendChild(new El("p")).textContent = "the page's own line";
  var head = new El("head"), sandbox = {};
  var ort = {env: {wasm: {}}, Tensor: function (type, data, dims) { this.data = data; this.dims = dims; },
             InferenceSession: {create: function () { return Promise.resolve(session(meta)); }}};
  head.onAppend = function (tag) {   // the runtime's <script>: "loads" a moment later
    setTimeout(function () {
      if (options.noRuntime) { tag.onerror(); return; }
      sandbox.ort = ort; tag.onload();
    }, 5);
  };
  var document = {
    readyState: "complete", documentElement: {lang: LANG}, head: head,
    currentScript: {src: "https://example.org/_static/live/live_gpt.js"},
    createElement: function (tag) { return new El(tag); }, createTextNode: text,
    querySelectorAll: function (sel) { if (sel !== ".live-gpt") throw new Error(sel); return [root]; },
    addEventListener: function () {}
  };
  Object.assign(sandbox, {document: document, URL: URL, performance: performance, console: console,
                          setTimeout: setTimeout, clearTimeout: clearTimeout, fetch: function () {
    if (options.http) return Promise.resolve({ok: false, status: options.http});
    return Promise.resolve({ok: true, status: 200, json: function () { return Promise.resolve(meta); }});
  }});
  sandbox.window = sandbox;
  vm.createContext(sandbox);   // (a context has its own builtins, WebAssembly among them)
  if (options.noWasm) vm.runInContext("delete globalThis.WebAssembly;", sandbox);
  vm.runInContext(SCRIPT, sandbox, {filename: "live_gpt.js"});
  return {root: root, api: sandbox.liveGPT, shot: function () { return snapshot(root); }};
}

function settle(ms) { return new Promise(function (r) { setTimeout(r, ms || 30); }); }
function one(root, cls) {
  var n = root.find(cls);
  if (n.length !== 1) throw new Error(cls + ": " + n.length);
  return n[0];
}
function lastBody(p) { return p.root.children[p.root.children.length - 1]; }

async function main() {
  var out = {}, p, s, body, box;
  p = page("ch07_gpt", "ROMEO:\nBut soft, what light "); s = out.gpt = {};
  await p.api.example; s.example = p.shot();
  await p.api.ready; s.live = p.shot();
  body = lastBody(p); box = one(body, "live-gpt-text");
  one(body, "live-gpt-layer").value = "1"; one(body, "live-gpt-layer").fire("change"); s.layer2 = p.shot();
  box.value = "ab\u00e9c\u00e7"; await p.api.refresh(); s.skipped = p.shot();
  box.value = ""; await p.api.refresh(); s.empty = p.shot();
  one(body, "live-gpt-write").fire("click"); await settle(); s.write_error = p.shot();
  box.value = "ab"; one(body, "live-gpt-write").fire("click"); await settle(300); s.written = p.shot();

  p = page("ch04_read_twice", "Sweet are the uses of adversity"); s = out.reread = {};
  await p.api.example; s.example = p.shot();
  await p.api.ready; s.live = p.shot();
  box = one(lastBody(p), "live-gpt-line");
  box.value = ""; await p.api.refresh(); s.empty = p.shot();
  box.value = "ab\u00e9 ab\u00e9 ab"; await p.api.refresh(); s.skipped = p.shot();

  p = page("ch08_translator", "shy owl sees big red fox and hen likes cat"); s = out.translate = {};
  await p.api.example; s.example = p.shot();
  await p.api.ready; s.live = p.shot();
  body = lastBody(p); box = one(body, "live-gpt-line");
  box.value = "zebra"; await p.api.refresh(); s.empty = p.shot();
  box.value = "shy zebra owl"; await p.api.refresh(); s.skipped = p.shot();
  one(body, "live-gpt-layer").value = "0"; one(body, "live-gpt-layer").fire("change"); s.layer1 = p.shot();

  p = page("ch07_gpt", "", {noWasm: true}); out.no_wasm = {status: p.shot()};
  p = page("ch07_gpt", "", {noRuntime: true}); await p.api.ready.catch(function () {}); await settle();
  out.no_runtime = {status: p.shot()};
  p = page("ch04_read_twice", "", {http: 404}); await p.api.ready.catch(function () {}); await settle();
  out.http = {status: p.shot()};
  out.t = {right: p.api.t("reread_right", {right: 3, n: 5}), braces: p.api.t("skipped", {list: "{n} $& $1"}),
           layer: p.api.t("layer_n", {n: 2})};
  process.stdout.write(JSON.stringify(out));
}
process.on("unhandledRejection", function () {});   // as in a browser: the example of a page whose JSON failed
main().catch(function (e) { console.error(e && e.stack || e); process.exit(1); });
"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict:
    """{"en": ..., "zh": ...}: what each live section shows, step by step, on a page of each language."""
    if NODE is None:
        pytest.skip("node is not installed")
    if not all((LIVE / f"{n}.json").is_file() for n in ("ch04_read_twice", "ch07_gpt", "ch08_translator")):
        pytest.skip(f"the exported models' JSON are missing in {LIVE}")
    harness = tmp_path_factory.mktemp("live_zh") / "harness.js"
    harness.write_text(HARNESS, encoding="utf-8")
    out = {}
    for lang in ("en", "zh-CN"):
        run = subprocess.run([NODE, str(harness), str(JS), str(LIVE), lang], capture_output=True, text=True,
                             timeout=60, encoding="utf-8")
        assert run.returncode == 0, run.stderr
        out[lang[:2]] = json.loads(run.stdout)
    return out


def texts(node, out=None) -> list:
    """Every text the reader reads or hears in a snapshot: text nodes and the named attributes, in order."""
    out = [] if out is None else out
    if isinstance(node, str):
        out.append(node)
        return out
    out.extend(node["attrs"][a] for a in ("aria-label", "title", "placeholder", "alt") if a in node["attrs"])
    for child in node["children"]:
        texts(child, out)
    return out


def by_class(node, cls) -> list:
    out = []
    if isinstance(node, dict):
        if cls in node["attrs"].get("class", "").split():
            out.append(node)
        for child in node["children"]:
            out.extend(by_class(child, cls))
    return out


def text_of(node) -> str:
    return "".join(texts({"attrs": {}, "children": node["children"]}))


def shape(node):
    """A snapshot without its words: what must be the same in both languages."""
    if isinstance(node, str):
        return "text"
    attrs = {k: v for k, v in node["attrs"].items() if k not in ("aria-label", "title", "placeholder", "alt")}
    return [node["tag"], attrs, node.get("value"), [shape(c) for c in node["children"]]]


def meta(name: str) -> dict:
    return json.loads((LIVE / f"{name}.json").read_text(encoding="utf-8"))


@needs_node
def test_the_english_page_shows_the_english_texts(pages):
    en = pages["en"]
    gpt, cfg, prov = meta("ch07_gpt"), meta("ch07_gpt")["config"], meta("ch07_gpt").get("provenance", {})
    bits = f", {prov['val_bits_per_char']} bits/char on validation" if prov.get("val_bits_per_char") else ""
    status = lambda snap: text_of(by_class(snap, "live-gpt-status")[0])
    assert status(en["gpt"]["example"]).startswith("Loading the model… Meanwhile, here is its answer for an example")
    assert status(en["gpt"]["live"]) == (
        f"The chapter's GPT ({cfg['n_layers']} layers × {cfg['d_model']}, {gpt['params']:,} parameters{bits}) runs "
        f"in your browser. It reads the last {cfg['context_len']} characters.")
    assert text_of(by_class(en["gpt"]["skipped"], "live-gpt-note")[0]) == "Not in the vocabulary, skipped: é ç"
    assert text_of(by_class(en["gpt"]["empty"], "live-gpt-bars")[0]) == "Type something."
    assert text_of(by_class(en["gpt"]["write_error"], "live-gpt-note")[0]) == "type at least one known character first"
    assert text_of(by_class(en["gpt"]["live"], "live-gpt-write")[0]) == "write 80 characters"
    label = by_class(en["gpt"]["layer2"], "live-gpt-heatmap")[0]["attrs"]["aria-label"]
    assert re.match(r"attention of layer 2, head 1 over the typed text, \d+ rows by \d+ columns; the heaviest weight "
                    r"of the last rows: \S+ puts \d\.\d\d on \S+; ", label), label
    ex = meta("ch04_read_twice")
    assert status(en["reread"]["live"]) == (
        f"The chapter's attention layer ({ex['params']:,} parameters) runs in your browser. Type a line (up to "
        f"{ex['max_line']} characters): it reads the line, then predicts it again character by character.")
    n, right = len(ex["example"]["text"]), ex["example"]["right"]
    assert text_of(by_class(en["reread"]["example"], "live-gpt-note")[0]) == (
        f"{right} of {n} characters predicted right (a miss is underlined in red)")
    assert text_of(by_class(en["reread"]["example"], "live-gpt-reread")[0]).startswith(
        f"line:             {ex['example']['text']}\nsecond reading:   ")
    assert text_of(by_class(en["reread"]["empty"], "live-gpt-reread")[0]) == "Type a line."
    assert text_of(by_class(en["reread"]["skipped"], "live-gpt-note")[0]).endswith(
        " characters predicted right (a miss is underlined in red). Not in the vocabulary, skipped: é")
    tr = meta("ch08_translator")
    assert text_of(by_class(en["translate"]["example"], "live-gpt-reread")[0]) == (
        f"source:      {' '.join(tr['example']['source'])}\ntranslation: {' '.join(tr['example']['output'])}")
    assert text_of(by_class(en["translate"]["empty"], "live-gpt-reread")[0]) == (
        f"Type a sentence of the toy language (1 to {tr['config']['context_len']} known words).")
    assert status(en["translate"]["live"]).startswith(
        f"The chapter's Transformer ({tr['config']['n_layers']} encoder and {tr['config']['n_layers']} decoder layers "
        f"of width {tr['config']['d_model']}, {tr['params']:,} parameters) runs in your browser. Type a sentence of "
        "the toy language; its words: ")
    assert by_class(en["translate"]["layer1"], "live-gpt-heatmap")[0]["attrs"]["aria-label"].startswith(
        "cross-attention of layer 1, head 1, ")
    assert status(en["no_wasm"]["status"]) == ("WebAssembly is unavailable in this browser, so the live model cannot "
                                               "run here (the figures above show what it does).")
    assert status(en["no_runtime"]["status"]) == (
        "The live model could not start: could not load https://example.org/_static/live/ort.wasm.min.js")
    assert status(en["http"]["status"]) == "The live model could not start: ch04_read_twice.json: HTTP 404"
    assert en["t"] == {"right": "3 of 5 characters predicted right (a miss is underlined in red)",
                       "braces": "Not in the vocabulary, skipped: {n} $& $1", "layer": "layer 2"}


@needs_node
def test_the_chinese_page_shows_the_same_section_in_chinese(pages):
    en, zh = pages["en"], pages["zh"]
    # the English texts' fixed words: none may reach the Chinese page
    english = {s.strip() for v in EN.values() for s in PLACEHOLDER.split(v) if re.search(r"[A-Za-z]{4}", s)}
    for kind in en:
        if kind == "t":
            continue
        for step in en[kind]:
            a, b = en[kind][step], zh[kind][step]
            assert shape(a) == shape(b), (kind, step)
            assert "the page's own line" not in texts(b), "setup() replaces the page's static line"
            for was, now in zip(texts(a), texts(b)):
                leaked = [s for s in english if s in now]
                assert leaked == [], (kind, step, now)
                if was != now:
                    assert CHINESE.search(now), (kind, step, now)
    status = lambda snap: text_of(by_class(snap, "live-gpt-status")[0])
    assert status(zh["gpt"]["example"]).startswith("正在加载模型…")
    assert status(zh["gpt"]["live"]).startswith("本章的 GPT（") and "个参数" in status(zh["gpt"]["live"])
    assert text_of(by_class(zh["gpt"]["skipped"], "live-gpt-note")[0]) == "词表中没有，已跳过：é ç"
    assert text_of(by_class(zh["gpt"]["live"], "live-gpt-write")[0]) == "续写 80 个字符"
    assert [text_of(o) for o in by_class({"attrs": {}, "children": [zh["gpt"]["live"]]}, "live-gpt-layer")[0][
        "children"]] == [f"第 {i + 1} 层" for i in range(meta("ch07_gpt")["config"]["n_layers"])]
    assert by_class(zh["gpt"]["layer2"], "live-gpt-heatmap")[0]["attrs"]["aria-label"].startswith(
        "第 2 层第 1 个头在所输入文本上的注意力，")
    ex = meta("ch04_read_twice")["example"]
    assert text_of(by_class(zh["reread"]["example"], "live-gpt-note")[0]) == (
        f"{len(ex['text'])} 个字符中预测对了 {ex['right']} 个（预测错的字符带红色下划线）")
    assert text_of(by_class(zh["reread"]["empty"], "live-gpt-reread")[0]) == "请输入一行。"
    assert text_of(by_class(zh["reread"]["skipped"], "live-gpt-note")[0]).endswith("。词表中没有，已跳过：é")
    tr = meta("ch08_translator")["example"]
    assert text_of(by_class(zh["translate"]["example"], "live-gpt-reread")[0]) == (
        f"原文：{' '.join(tr['source'])}\n译文：{' '.join(tr['output'])}")
    assert status(zh["no_wasm"]["status"]).startswith("此浏览器不支持 WebAssembly")
    assert status(zh["http"]["status"]) == "在线模型无法启动：无法加载 ch04_read_twice.json：HTTP 404"
    assert zh["t"] == {"right": "5 个字符中预测对了 3 个（预测错的字符带红色下划线）",
                       "braces": "词表中没有，已跳过：{n} $& $1", "layer": "第 2 层"}
