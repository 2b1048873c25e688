// The book's own models, live in the page. Three kinds, told apart by the format in NAME.json:
//   book-live-gpt/1        chapter 7's GPT: type, see the next-character distribution, write, look at attention;
//   book-live-reread/1     chapter 4's attention layer: type a line, the layer reads it twice, see its lookup;
//   book-live-translate/1  chapter 8's Transformer: type a toy sentence, see its translation and cross-attention.
//
// Every <div class="live-gpt" data-model="NAME"> becomes a live section. NAME.onnx and NAME.json (written by
// book/export.py and the chapter modules when a chapter runs) lie beside this file in _static/live/, with ONNX
// Runtime Web's wasm build (npm onnxruntime-web, pinned in tools/fetch_assets.sh): nothing comes from another
// server. When the section first comes near the screen it fetches NAME.json (kilobytes) and shows the example
// it holds, computed by PyTorch when the chapter ran, while the runtime and the model load; then the same
// controls run the model. No framework: plain DOM, one <canvas> for each heatmap.
//
// The model: idx (1, T) int64 -> logits (1, T, V) and attention (L, 1, H, T, T), T <= context_len. Writing runs
// it again on the last context_len characters for every new one, as book.generate.generate does without a cache,
// and samples as book.generate.next_token_probs: temperature first, then top-k (ties with the k-th kept);
// temperature 0 is greedy (the first largest logit, as torch.argmax).
//
// For tests and the curious, window.liveGPT holds {ready, example, forward(text), timings, t(key, args)} and, by
// kind, write(text, n, options) (GPT), readTwice(line) (read twice) or translate(sentence) (translation).
//
// The page's language: the section speaks English, or Chinese on the Chinese edition's pages (<html lang="zh-CN">),
// from the two tables EN and ZH below (t(key, args)).
(function () {
  "use strict";
  var BASE = new URL(".", document.currentScript.src).href;   // .../_static/live/
  var ORT_JS = "ort.wasm.min.js";
  var api = window.liveGPT = {timings: {}, t: t};

  // ---- the reader's language ---------------------------------------------------------------------------------
  // Everything the section shows goes through t(key, args): the English of EN, or on a page of the Chinese edition
  // (<html lang="zh-CN">) the Chinese of ZH; a {name} is filled from args, so each language puts the numbers where
  // its word order wants them. (The static line inside the page's <div class="live-gpt"> is translated with the page,
  // i18n/zh/*.po; setup() replaces it.) tests/test_live_zh.py checks the two tables against each other and the calls.
  var EN = {
    no_wasm: "WebAssembly is unavailable in this browser, so the live model cannot run here " +
             "(the figures above show what it does).",
    could_not_load: "could not load {src}",
    http_error: "{name}.json: HTTP {status}",
    unknown_format: "{name}.json: unknown format {format}",
    loading: "Loading the model…",
    loading_example: "Loading the model… Meanwhile, here is its answer for an example, computed by " +
                     "PyTorch when the chapter ran (typing works once the model is here).",
    could_not_start: "The live model could not start: {error}",
    type_known_first: "type at least one known character first",
    heaviest_item: "{row} puts {weight} on {col}",
    list_sep: "; ",
    map_label: "{what}, {rows} rows by {cols} columns; the heaviest weight of the last rows: {heaviest}",
    layer: "layer",
    head: "head",
    layer_n: "layer {n}",
    head_n: "head {n}",
    skipped: "Not in the vocabulary, skipped: {list}",
    // chapter 7: the GPT
    gpt_text: "text for the model",
    temperature: "temperature",
    top_k: "top-k",
    write_n: "write {n} characters",
    gpt_status: "The chapter's GPT ({layers} layers × {width}, {params} parameters{bits}) runs in your browser. " +
                "It reads the last {ctx} characters.",
    gpt_bits: ", {bpc} bits/char on validation",
    gpt_bars: "Next character: the model's probability (outline) and what writing draws from (filled)",
    gpt_attention: "Attention of the typed text: row = the character reading, column = the character read " +
                   "(darker = more weight)",
    type_something: "Type something.",
    gpt_map: "attention of layer {layer}, head {head} over the typed text",
    // chapter 4: an attention layer reads the line twice
    reread_line: "a line for the attention layer to read twice",
    reread_status: "The chapter's attention layer ({params} parameters) runs in your browser. Type a line (up to " +
                   "{max} characters): it reads the line, then predicts it again character by character.",
    reread_caption: "Row: the character the second reading is at; column: a character of the first reading " +
                    "(darker = more weight). The lookup is the bright diagonal: each row finds the character " +
                    "that followed its twin.",
    type_line: "Type a line.",
    reread_lines: "line:             {text}\nsecond reading:   ",
    reread_right: "{right} of {n} characters predicted right (a miss is underlined in red)",
    also_skipped: ". Not in the vocabulary, skipped: {list}",
    reread_map: "attention of the line read twice: row = the second reading, column = the first",
    // chapter 8: the translator
    translate_line: "a sentence of the toy language to translate",
    translate_status: "The chapter's Transformer ({encoders} encoder and {decoders} decoder layers of width {width}, " +
                      "{params} parameters) runs in your browser. Type a sentence of the toy language; its words: " +
                      "{words}.",
    translate_caption: "Cross-attention: row = a word the decoder wrote, column = a source word (darker = more weight)",
    translation: "source:      {source}\ntranslation: {output}",
    type_sentence: "Type a sentence of the toy language (1 to {ctx} known words).",
    cross_map: "cross-attention of layer {layer}, head {head}"
  };
  var ZH = {
    no_wasm: "此浏览器不支持 WebAssembly，在线模型无法在这里运行（上面的图展示了它的效果）。",
    could_not_load: "无法加载 {src}",
    http_error: "无法加载 {name}.json：HTTP {status}",
    unknown_format: "{name}.json 的格式未知：{format}",
    loading: "正在加载模型…",
    loading_example: "正在加载模型…在此期间，先看看它对一个示例的回答，这是本章运行时由 PyTorch 算出的" +
                     "（模型加载完成后才能输入）。",
    could_not_start: "在线模型无法启动：{error}",
    type_known_first: "请先输入至少一个词表中的字符",
    heaviest_item: "{row} 给 {col} 的权重是 {weight}",
    list_sep: "；",
    map_label: "{what}，{rows} 行 × {cols} 列；最后几行各自的最大权重：{heaviest}",
    layer: "层",
    head: "头",
    layer_n: "第 {n} 层",
    head_n: "第 {n} 个头",
    skipped: "词表中没有，已跳过：{list}",
    gpt_text: "给模型的文本",
    temperature: "温度",
    top_k: "top-k 采样",
    write_n: "续写 {n} 个字符",
    gpt_status: "本章的 GPT（{layers} 层、宽 {width}，{params} 个参数{bits}）在你的浏览器中运行，" +
                "读取最后 {ctx} 个字符。",
    gpt_bits: "，验证集上 {bpc} 比特/字符",
    gpt_bars: "下一个字符：模型给出的概率（空心）和续写时从中抽样的分布（实心）",
    gpt_attention: "所输入文本的注意力：行是正在读的字符，列是被读的字符（颜色越深，权重越大）",
    type_something: "请输入一些文字。",
    gpt_map: "第 {layer} 层第 {head} 个头在所输入文本上的注意力",
    reread_line: "供注意力层读两遍的一行文字",
    reread_status: "本章的注意力层（{params} 个参数）在你的浏览器中运行。请输入一行文字（最多 {max} 个字符）：" +
                   "它先读这一行，再逐个字符地把它重新预测一遍。",
    reread_caption: "行：第二遍读到的字符；列：第一遍中的字符（颜色越深，权重越大）。查找就是那条亮的对角线：" +
                    "每一行都找到了紧跟在它的孪生字符后面的那个字符。",
    type_line: "请输入一行。",
    reread_lines: "这一行：  {text}\n第二遍：  ",
    reread_right: "{n} 个字符中预测对了 {right} 个（预测错的字符带红色下划线）",
    also_skipped: "。词表中没有，已跳过：{list}",
    reread_map: "读两遍的这一行的注意力：行是第二遍，列是第一遍",
    translate_line: "要翻译的一句玩具语言",
    translate_status: "本章的 Transformer（{encoders} 层编码器、{decoders} 层解码器，宽 {width}，{params} 个参数）" +
                      "在你的浏览器中运行。请输入一句玩具语言，它的词有：{words}。",
    translate_caption: "交叉注意力：行是解码器写出的词，列是原文中的词（颜色越深，权重越大）",
    translation: "原文：{source}\n译文：{output}",
    type_sentence: "请输入一句玩具语言（1 到 {ctx} 个已知的词）。",
    cross_map: "第 {layer} 层第 {head} 个头的交叉注意力"
  };

  // the text `key` in the page's language, each {name} replaced by args[name] (a value's own braces stay as they are)
  function t(key, args) {
    var zh = /^zh/i.test(document.documentElement.lang || "") && ZH.hasOwnProperty(key);
    return (zh ? ZH : EN)[key].replace(/\{(\w+)\}/g, function (m, name) { return String(args[name]); });
  }

  // ---- loading: ONNX Runtime Web, then the model and its vocabulary -----------------------------------------
  var runtime = null;
  function loadRuntime() {
    if (runtime) return runtime;
    runtime = new Promise(function (resolve, reject) {
      if (typeof WebAssembly !== "object") { reject(new Error(t("no_wasm"))); return; }
      var tag = document.createElement("script");
      tag.src = BASE + ORT_JS;
      tag.onload = function () {
        window.ort.env.wasm.wasmPaths = BASE;    // ort-wasm-simd-threaded.{mjs,wasm} beside this file
        window.ort.env.wasm.numThreads = 1;      // threads need cross-origin isolation, which a static host lacks
        resolve(window.ort);
      };
      tag.onerror = function () { reject(new Error(t("could_not_load", {src: tag.src}))); };
      document.head.appendChild(tag);
    });
    return runtime;
  }

  function loadMeta(name) {   // NAME.json: the vocabulary, the config and the precomputed example
    return fetch(BASE + name + ".json").then(function (r) {
      if (!r.ok) throw new Error(t("http_error", {name: name, status: r.status}));
      return r.json();
    }).then(function (meta) {
      if (!KINDS[meta.format]) throw new Error(t("unknown_format", {name: name, format: meta.format}));
      return meta;
    });
  }

  function loadModel(name, meta) {
    var t0 = performance.now();
    return loadRuntime().then(function (ort) {
      return ort.InferenceSession.create(BASE + name + ".onnx", {executionProviders: ["wasm"]});
    }).then(function (session) {
      api.timings.load_ms = performance.now() - t0;
      return KINDS[meta.format].model(window.ort, session, meta);
    });
  }

  // ---- the model as functions of text ----------------------------------------------------------------------
  function makeModel(ort, session, meta) {
    var cfg = meta.config, V = meta.vocab.length;
    var model = {meta: meta, V: V, L: cfg.n_layers, H: cfg.n_heads, ctx: cfg.context_len, encode: encoder(meta)};
    // ids (T <= ctx) -> {logits: Float32Array (T*V), attention: Float32Array (L*H*T*T), T}
    model.run = function (ids) {
      var T = ids.length;
      return session.run({idx: int64(ort, ids)}).then(function (out) {
        return {logits: out.logits.data, attention: out.attention.data, T: T};
      });
    };
    return model;
  }

  function int64(ort, ids) {
    return new ort.Tensor("int64", BigInt64Array.from(ids, function (i) { return BigInt(i); }), [1, ids.length]);
  }

  // the GPT's example as a model that answers for its own text only: the page before the model is there
  function exampleGPT(meta) {
    var cfg = meta.config, V = meta.vocab.length, ex = meta.example;
    var model = {meta: meta, V: V, L: cfg.n_layers, H: cfg.n_heads, ctx: cfg.context_len, encode: encoder(meta),
                 precomputed: true};
    var ids = model.encode(ex.text).ids, T = ids.length, logits = new Float32Array(T * V);
    logits.set(ex.logits, (T - 1) * V);   // only the last row is kept: the bars need no more
    model.run = function () { return Promise.resolve({logits: logits, attention: ex.attention, T: T}); };
    return model;
  }

  function encoder(meta) {
    var stoi = {}, ctx = meta.config.context_len || meta.max_line;
    meta.vocab.forEach(function (c, i) { stoi[c] = i; });
    return function (text) {   // -> {ids, chars, dropped}: characters outside the vocabulary dropped
      var ids = [], chars = [], dropped = [];
      Array.from(text).forEach(function (c) {
        if (c in stoi) { ids.push(stoi[c]); chars.push(c); } else if (dropped.indexOf(c) < 0) dropped.push(c);
      });
      return {ids: ids.slice(-ctx), chars: chars.slice(-ctx), dropped: dropped};
    };
  }

  // sampling distribution of one row of logits: temperature, then top-k (book.generate.next_token_probs)
  function nextProbs(logits, temperature, topK) {
    var V = logits.length, p = new Float64Array(V), i;
    if (temperature === 0) { p[argmax(logits)] = 1; return p; }
    var z = Array.from(logits, function (v) { return v / temperature; });
    if (topK && topK < V) {
      var kth = z.slice().sort(function (a, b) { return b - a; })[topK - 1];
      z = z.map(function (v) { return v < kth ? -Infinity : v; });
    }
    var max = Math.max.apply(null, z), sum = 0;
    for (i = 0; i < V; i++) { p[i] = Math.exp(z[i] - max); sum += p[i]; }
    for (i = 0; i < V; i++) p[i] /= sum;
    return p;
  }

  function argmax(row) {
    var best = 0;
    for (var i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
    return best;
  }

  function rng(seed) {   // mulberry32: a small seeded generator, so a setting and a seed give one text
    var a = seed >>> 0;
    return function () {
      a = (a + 0x6D2B79F5) >>> 0;
      var t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  function draw(p, random) {
    var u = random(), acc = 0;
    for (var i = 0; i < p.length; i++) { acc += p[i]; if (u < acc) return i; }
    return argmax(p);
  }

  function lastRow(out, V) { return out.logits.subarray((out.T - 1) * V, out.T * V); }

  // write n characters after text; onChar(char) after each one. Resolves to the new characters.
  function write(model, text, n, options, onChar) {
    var ids = model.encode(text).ids.slice(), random = rng(options.seed || 0), added = "", t0 = performance.now();
    if (!ids.length) return Promise.reject(new Error(t("type_known_first")));
    function step(k) {
      if (k === n) {
        api.timings.per_char_ms = (performance.now() - t0) / n;
        return Promise.resolve(added);
      }
      return model.run(ids.slice(-model.ctx)).then(function (out) {
        var next = draw(nextProbs(lastRow(out, model.V), options.temperature, options.topK), random);
        ids.push(next);
        added += model.meta.vocab[next];
        if (onChar) onChar(model.meta.vocab[next]);
        return step(k + 1);
      });
    }
    return step(0);
  }

  // ---- the section's controls --------------------------------------------------------------------------------
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k]; else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { node.appendChild(c); });
    return node;
  }

  function shown(c) { return c === " " ? "␣" : c === "\n" ? "↵" : c; }

  function slider(label, min, max, step, value, cls) {
    var input = el("input", {type: "range", min: min, max: max, step: step, value: value, class: cls,
                             "aria-label": label});
    var out = el("output", {text: String(value)});
    input.addEventListener("input", function () { out.textContent = input.value; });
    return {input: input, row: el("label", {class: "live-gpt-slider"}, [el("span", {text: label}), input, out])};
  }

  function setup(root) {
    var name = root.getAttribute("data-model");
    var prompt = root.getAttribute("data-prompt") || "";
    var status = el("p", {class: "live-gpt-status", text: t("loading")});
    root.innerHTML = "";
    root.appendChild(status);
    if (typeof WebAssembly !== "object") { status.textContent = t("no_wasm"); return; }
    var started = false;
    function start() {
      if (started) return;
      started = true;
      var meta = loadMeta(name);
      api.example = meta.then(function (m) {   // shown while the runtime and the model load
        if (!m.example || api.live) return null;
        var kind = KINDS[m.format], body = el("div", {class: "live-gpt-body live-gpt-example"});
        root.appendChild(body);
        status.textContent = t("loading_example");
        return kind.build(body, status, kind.example(m), m.example.text).then(function () { return body; });
      });
      api.ready = meta.then(function (m) {
        return loadModel(name, m).then(function (model) {
          return api.example.then(null, function () { return null; }).then(function (old) {
            api.live = true;
            if (old && old.parentNode === root) root.removeChild(old);
            var body = el("div", {class: "live-gpt-body"});
            root.appendChild(body);
            return KINDS[m.format].build(body, status, model, prompt).then(function () { return model; });
          });
        });
      });
      api.ready.catch(function (err) { status.textContent = t("could_not_start", {error: err.message}); });
    }
    api.start = start;
    if ("IntersectionObserver" in window) {   // load the runtime (14 MB) only when the section is near
      var seen = new IntersectionObserver(function (entries) {
        if (entries.some(function (e) { return e.isIntersecting; })) { seen.disconnect(); start(); }
      }, {rootMargin: "800px"});
      seen.observe(root);
    } else {
      start();
    }
  }

  // a (rows x cols) map on a canvas: value(i, j) in [0, 1], or null where nothing is drawn (a causal mask)
  function drawMatrix(canvas, rows, cols, value, what) {
    var ctx = canvas.getContext("2d");
    if (!rows.length || !cols.length) { canvas.width = canvas.height = 0; return; }
    var cell = Math.max(6, Math.min(22, Math.floor(460 / Math.max(rows.length, cols.length))));
    var font = Math.max(8, Math.min(12, cell)) + "px monospace";
    ctx.font = font;
    var widest = function (labels) {
      return Math.max.apply(null, labels.map(function (s) { return ctx.measureText(s).width; }));
    };
    var left = Math.ceil(widest(rows)) + 6, top = Math.ceil(widest(cols)) + 6;
    canvas.width = left + cell * cols.length + 2;     // (a new size clears the canvas and its settings)
    canvas.height = top + cell * rows.length + 2;
    ctx.font = font;
    ctx.fillStyle = "#333";
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    rows.forEach(function (r, i) { ctx.fillText(r, left - 4, top + cell * (i + 0.5)); });
    ctx.textAlign = "left";
    cols.forEach(function (c, j) {
      ctx.save();
      ctx.translate(left + cell * (j + 0.5), top - 4);
      ctx.rotate(-Math.PI / 2);
      ctx.fillText(c, 0, 0);
      ctx.restore();
    });
    var heaviest = [];
    for (var i = 0; i < rows.length; i++) {
      var best = -1;
      for (var j = 0; j < cols.length; j++) {
        var w = value(i, j);
        if (w === null) continue;
        if (best < 0 || w > value(i, best)) best = j;
        ctx.fillStyle = "rgba(31, 119, 180, " + Math.sqrt(Math.max(0, w)).toFixed(3) + ")";  // sqrt: small show
        ctx.fillRect(left + cell * j, top + cell * i, cell, cell);
      }
      if (best >= 0) {
        heaviest.push(t("heaviest_item", {row: rows[i], weight: value(i, best).toFixed(2), col: cols[best]}));
      }
    }
    canvas.setAttribute("role", "img");               // what a screen reader says: the heaviest weight per row
    canvas.setAttribute("aria-label", t("map_label", {what: what, rows: rows.length, cols: cols.length,
                                                      heaviest: heaviest.slice(-8).join(t("list_sep"))}));
  }

  // ---- chapter 7: the GPT ---------------------------------------------------------------------------------------
  function buildGPT(root, status, model, prompt) {
    var V = model.V;
    var text = el("textarea", {class: "live-gpt-text", rows: 4, spellcheck: "false",
                               "aria-label": t("gpt_text")});
    text.value = prompt;
    var temp = slider(t("temperature"), 0, 2, 0.05, 0.8, "live-gpt-temperature");
    var topk = slider(t("top_k"), 1, V, 1, V, "live-gpt-topk");
    var button = el("button", {type: "button", class: "live-gpt-write", text: t("write_n", {n: 80})});
    var bars = el("div", {class: "live-gpt-bars", "aria-live": "polite"});
    var layer = el("select", {class: "live-gpt-layer", "aria-label": t("layer")});
    var head = el("select", {class: "live-gpt-head", "aria-label": t("head")});
    for (var l = 0; l < model.L; l++) layer.appendChild(el("option", {value: l, text: t("layer_n", {n: l + 1})}));
    for (var h = 0; h < model.H; h++) head.appendChild(el("option", {value: h, text: t("head_n", {n: h + 1})}));
    var canvas = el("canvas", {class: "live-gpt-heatmap"});
    var note = el("p", {class: "live-gpt-note"});
    var cfg = model.meta.config, prov = model.meta.provenance || {};
    if (model.precomputed) { text.readOnly = true; button.disabled = true; }
    else status.textContent = t("gpt_status", {layers: cfg.n_layers, width: cfg.d_model,
      params: model.meta.params.toLocaleString("en"), ctx: model.ctx,
      bits: prov.val_bits_per_char ? t("gpt_bits", {bpc: prov.val_bits_per_char}) : ""});
    root.appendChild(el("div", {class: "live-gpt-grid"}, [
      el("div", {class: "live-gpt-left"}, [text, temp.row, topk.row, button, note]),
      el("div", {class: "live-gpt-right"}, [el("p", {class: "live-gpt-caption", text: t("gpt_bars")}), bars]),
    ]));
    root.appendChild(el("div", {class: "live-gpt-attention"}, [
      el("p", {class: "live-gpt-caption", text: t("gpt_attention")}),
      el("div", {}, [layer, head]), canvas]));

    var last = null, pending = 0;
    function refresh() {   // run the model on the text; redraw the bars and the heatmap
      var ticket = ++pending, enc = model.encode(text.value);
      note.textContent = enc.dropped.length ? t("skipped", {list: enc.dropped.join(" ")}) : "";
      if (!enc.ids.length) {
        bars.textContent = t("type_something");
        last = null;
        drawHeatmap();
        return Promise.resolve();
      }
      var t0 = performance.now();
      return model.run(enc.ids).then(function (out) {
        if (api.timings.first_ms === undefined) api.timings.first_ms = performance.now() - t0;
        if (ticket !== pending) return;   // a newer keystroke is on its way
        last = {out: out, chars: enc.chars};
        drawBars();
        drawHeatmap();
      });
    }

    function drawBars() {
      if (!last) return;
      var row = lastRow(last.out, V);
      var base = nextProbs(row, 1, 0), p = nextProbs(row, Number(temp.input.value), Number(topk.input.value));
      var order = Array.from(base.keys()).sort(function (a, b) { return base[b] - base[a]; }).slice(0, 12);
      bars.innerHTML = "";
      order.forEach(function (i) {
        var track = el("span", {class: "live-gpt-track"}, [
          el("span", {class: "live-gpt-model", style: "width:" + (100 * base[i]).toFixed(1) + "%"}),
          el("span", {class: "live-gpt-drawn", style: "width:" + (100 * p[i]).toFixed(1) + "%"})]);
        bars.appendChild(el("div", {class: "live-gpt-bar", "data-char": model.meta.vocab[i],
                                    "data-p": p[i].toFixed(6)}, [
          el("code", {text: shown(model.meta.vocab[i])}), track,
          el("span", {class: "live-gpt-pct", text: (100 * p[i]).toFixed(1) + "%"})]));
      });
    }

    function drawHeatmap() {
      if (!last) { drawMatrix(canvas, [], [], null, ""); return; }
      var T = last.out.T, H = model.H, l = Number(layer.value), h = Number(head.value);
      var a = last.out.attention, off = (l * H + h) * T * T, labels = last.chars.map(shown);
      drawMatrix(canvas, labels, labels, function (i, j) { return j <= i ? a[off + i * T + j] : null; },
                 t("gpt_map", {layer: l + 1, head: h + 1}));
    }

    var clicks = 0;
    button.addEventListener("click", function () {
      button.disabled = true;
      var options = {temperature: Number(temp.input.value), topK: Number(topk.input.value), seed: ++clicks};
      write(model, text.value, 80, options, function (c) { text.value += c; })
        .then(refresh, function (err) { note.textContent = err.message; })
        .then(function () { button.disabled = false; });
    });
    var timer = null;
    text.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(refresh, 60); });
    temp.input.addEventListener("input", drawBars);
    topk.input.addEventListener("input", drawBars);
    layer.addEventListener("change", drawHeatmap);
    head.addEventListener("change", drawHeatmap);

    if (model.precomputed) return refresh();
    // for tests: the raw outputs of a text as plain arrays, and writing without the controls
    api.model = model;
    api.refresh = refresh;
    api.forward = function (s) {
      var enc = model.encode(s);
      return model.run(enc.ids).then(function (out) {
        return {ids: enc.ids, logits: Array.from(out.logits), attention: Array.from(out.attention),
                T: out.T, V: V, L: model.L, H: model.H};
      });
    };
    api.write = function (s, n, options) { return write(model, s, n, options || {temperature: 0}); };
    api.probs = function () { return Array.from(bars.children, function (b) { return Number(b.dataset.p); }); };
    return refresh();
  }

  // ---- chapter 4: one attention layer reads the reader's line twice ----------------------------------------------
  function readTwiceModel(ort, session, meta) {
    var model = {meta: meta, V: meta.vocab.length, encode: encoder(meta)};
    model.run = function (ids) {   // the line, then the line again without its last character
      var x = ids.concat(ids.slice(0, -1));
      return session.run({x: int64(ort, x)}).then(function (out) {
        return {logits: out.logits.data, weights: out.weights.data, T: x.length};
      });
    };
    model.readTwice = function (line) {   // -> {text, predicted, right, weights (n*n), dropped}, as ch04.read_twice
      var enc = model.encode(line), n = enc.ids.length;
      if (!n) return Promise.resolve(null);
      return model.run(enc.ids).then(function (out) {
        var V = model.V, T = out.T, weights = new Float32Array(n * n), predicted = "", right = 0;
        for (var i = 0; i < n; i++) {
          var r = n - 1 + i;                             // the query that predicts character i of the second copy
          for (var j = 0; j < n; j++) weights[i * n + j] = out.weights[r * T + j];
          var best = argmax(out.logits.subarray(r * V, (r + 1) * V));
          predicted += meta.vocab[best];
          if (best === enc.ids[i]) right++;
        }
        return {text: enc.chars.join(""), predicted: predicted, right: right, weights: weights, ids: enc.ids,
                dropped: enc.dropped};
      });
    };
    return model;
  }

  function exampleReadTwice(meta) {
    var ex = meta.example;
    return {meta: meta, precomputed: true, readTwice: function () {
      return Promise.resolve({text: ex.text, predicted: ex.predicted, right: ex.right, weights: ex.weights,
                              dropped: []});
    }};
  }

  function buildReadTwice(root, status, model, prompt) {
    var input = el("input", {type: "text", class: "live-gpt-line", spellcheck: "false", maxlength: "200",
                             "aria-label": t("reread_line")});
    input.value = prompt;
    var lines = el("pre", {class: "live-gpt-reread", "aria-live": "polite"});
    var note = el("p", {class: "live-gpt-note"});
    var canvas = el("canvas", {class: "live-gpt-heatmap"});
    if (model.precomputed) input.readOnly = true;
    else status.textContent = t("reread_status", {params: model.meta.params.toLocaleString("en"),
                                                  max: model.meta.max_line});
    root.appendChild(el("div", {}, [input, lines, note]));
    root.appendChild(el("div", {class: "live-gpt-attention"}, [
      el("p", {class: "live-gpt-caption", text: t("reread_caption")}), canvas]));
    var pending = 0;
    function refresh() {
      var ticket = ++pending, t0 = performance.now();
      return model.readTwice(input.value).then(function (res) {
        if (api.timings.first_ms === undefined && !model.precomputed) api.timings.first_ms = performance.now() - t0;
        if (ticket !== pending) return;
        if (!res) { lines.textContent = t("type_line"); note.textContent = ""; drawMatrix(canvas, [], []); return; }
        var n = res.text.length, chars = Array.from(res.text);
        lines.textContent = "";
        lines.appendChild(document.createTextNode(t("reread_lines", {text: res.text})));
        Array.from(res.predicted).forEach(function (c, i) {
          lines.appendChild(el("span", {class: c === chars[i] ? "live-gpt-hit" : "live-gpt-miss", text: c}));
        });
        note.textContent = t("reread_right", {right: res.right, n: n}) +
          (res.dropped.length ? t("also_skipped", {list: res.dropped.join(" ")}) : "");
        var rows = [chars[n - 1]].concat(chars.slice(0, n - 1)).map(shown);
        drawMatrix(canvas, rows, chars.map(shown), function (i, j) { return res.weights[i * n + j]; },
                   t("reread_map"));
      });
    }
    var timer = null;
    input.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(refresh, 60); });
    if (model.precomputed) return refresh();
    api.model = model;
    api.refresh = refresh;
    api.readTwice = function (s) {
      return model.readTwice(s).then(function (r) {
        return r && {text: r.text, predicted: r.predicted, right: r.right, weights: Array.from(r.weights)};
      });
    };
    api.forward = function (s) {
      var ids = model.encode(s).ids;
      return model.run(ids).then(function (out) {
        return {ids: ids, logits: Array.from(out.logits), weights: Array.from(out.weights), T: out.T, V: model.V};
      });
    };
    return refresh();
  }

  // ---- chapter 8: the encoder-decoder translates the reader's toy sentence ---------------------------------------
  function translateModel(ort, session, meta) {
    var cfg = meta.config, sp = meta.specials, stoi = {}, specials = [sp.pad, sp.bos, sp.eos];
    meta.src_vocab.forEach(function (w, i) { if (specials.indexOf(i) < 0) stoi[w] = i; });
    var model = {meta: meta, L: cfg.n_layers, H: cfg.n_heads, V: meta.tgt_vocab.length, ctx: cfg.context_len};
    model.words = function (text) {   // -> {source, ids, skipped}: as ch08._source_words
      var words = text.toLowerCase().split(/\s+/).filter(Boolean), source = [], skipped = [];
      words.forEach(function (w) {
        if (w in stoi) source.push(w); else if (skipped.indexOf(w) < 0) skipped.push(w);
      });
      return {source: source, ids: source.map(function (w) { return stoi[w]; }), skipped: skipped.sort()};
    };
    model.run = function (src, tgt) {
      return session.run({src: int64(ort, src), tgt: int64(ort, tgt)}).then(function (out) {
        return {logits: out.logits.data, cross: out.cross.data, T: tgt.length, S: src.length};
      });
    };
    // greedy, as book.generate.greedy_translate: from <bos>, the first largest logit, until <eos> or n + 5 words
    model.translate = function (text) {
      var w = model.words(text);
      if (!w.ids.length || w.ids.length > model.ctx) return Promise.resolve({source: w.source, skipped: w.skipped});
      var tgt = [sp.bos], out = [], maxLen = Math.min(w.ids.length + meta.extra_words, model.ctx - 1);
      function step() {
        return model.run(w.ids, tgt).then(function (o) {
          var next = argmax(o.logits.subarray((o.T - 1) * model.V, o.T * model.V));
          out.push(next);
          tgt.push(next);
          if (next === sp.eos || out.length >= maxLen) {   // the last run's rows are the words written: T = n
            return {source: w.source, skipped: w.skipped, ids: out, cross: o.cross, T: o.T, S: o.S,
                    output: out.map(function (i) { return meta.tgt_vocab[i]; })};
          }
          return step();
        });
      }
      return step();
    };
    return model;
  }

  function exampleTranslate(meta) {
    var cfg = meta.config, ex = meta.example;
    return {meta: meta, precomputed: true, L: cfg.n_layers, H: cfg.n_heads, ctx: cfg.context_len,
            translate: function () {
              return Promise.resolve({source: ex.source, skipped: ex.skipped, output: ex.output, cross: ex.cross,
                                      T: ex.output.length, S: ex.source.length});
            }};
  }

  function buildTranslate(root, status, model, prompt) {
    var meta = model.meta, sp = meta.specials;
    var input = el("input", {type: "text", class: "live-gpt-line", spellcheck: "false", maxlength: "400",
                             "aria-label": t("translate_line")});
    input.value = prompt;
    var lines = el("pre", {class: "live-gpt-reread", "aria-live": "polite"});
    var note = el("p", {class: "live-gpt-note"});
    var layer = el("select", {class: "live-gpt-layer", "aria-label": t("layer")});
    var head = el("select", {class: "live-gpt-head", "aria-label": t("head")});
    for (var l = 0; l < model.L; l++) layer.appendChild(el("option", {value: l, text: t("layer_n", {n: l + 1})}));
    for (var h = 0; h < model.H; h++) head.appendChild(el("option", {value: h, text: t("head_n", {n: h + 1})}));
    layer.value = String(model.L - 1);
    var canvas = el("canvas", {class: "live-gpt-heatmap"});
    var words = meta.src_vocab.filter(function (w, i) { return [sp.pad, sp.bos, sp.eos].indexOf(i) < 0; });
    if (model.precomputed) input.readOnly = true;
    else status.textContent = t("translate_status", {encoders: model.L, decoders: model.L, width: meta.config.d_model,
      params: meta.params.toLocaleString("en"), words: words.join(" ")});
    root.appendChild(el("div", {}, [input, lines, note]));
    root.appendChild(el("div", {class: "live-gpt-attention"}, [
      el("p", {class: "live-gpt-caption", text: t("translate_caption")}), el("div", {}, [layer, head]), canvas]));
    var last = null, pending = 0;
    function drawMap() {
      if (!last || !last.cross) { drawMatrix(canvas, [], []); return; }
      var T = last.T, S = last.S, H = model.H, off = (Number(layer.value) * H + Number(head.value)) * T * S;
      drawMatrix(canvas, last.output, last.source, function (i, j) { return last.cross[off + i * S + j]; },
                 t("cross_map", {layer: Number(layer.value) + 1, head: Number(head.value) + 1}));
    }
    function refresh() {
      var ticket = ++pending, t0 = performance.now();
      return model.translate(input.value).then(function (res) {
        if (api.timings.first_ms === undefined && !model.precomputed) api.timings.first_ms = performance.now() - t0;
        if (ticket !== pending) return;
        last = res;
        lines.textContent = res.output ? t("translation", {source: res.source.join(" "), output: res.output.join(" ")})
                                       : t("type_sentence", {ctx: model.ctx});
        note.textContent = res.skipped.length ? t("skipped", {list: res.skipped.join(" ")}) : "";
        drawMap();
      });
    }
    var timer = null;
    input.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(refresh, 60); });
    layer.addEventListener("change", drawMap);
    head.addEventListener("change", drawMap);
    if (model.precomputed) return refresh();
    api.model = model;
    api.refresh = refresh;
    api.translate = function (s) {
      return model.translate(s).then(function (r) {
        return {source: r.source, skipped: r.skipped, output: r.output, T: r.T, S: r.S, L: model.L, H: model.H,
                cross: r.cross && Array.from(r.cross)};
      });
    };
    api.forward = function (src, tgt) {
      return model.run(src, tgt).then(function (o) {
        return {logits: Array.from(o.logits), cross: Array.from(o.cross), T: o.T, S: o.S, V: model.V};
      });
    };
    return refresh();
  }

  var KINDS = {
    "book-live-gpt/1": {model: makeModel, example: exampleGPT, build: buildGPT},
    "book-live-reread/1": {model: readTwiceModel, example: exampleReadTwice, build: buildReadTwice},
    "book-live-translate/1": {model: translateModel, example: exampleTranslate, build: buildTranslate},
  };

  function boot() { Array.prototype.forEach.call(document.querySelectorAll(".live-gpt"), setup); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot); else boot();
})();
