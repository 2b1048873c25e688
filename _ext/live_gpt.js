// The book's own GPT, live in the page: type, see the next-character distribution, write, look at attention.
//
// Every <div class="live-gpt" data-model="NAME"> becomes the live section. NAME.onnx and NAME.json (written by
// book/export.py when chapter 7 runs) lie beside this file in _static/live/, with ONNX Runtime Web's wasm build
// (npm onnxruntime-web, pinned in tools/fetch_assets.sh): nothing comes from another server. The model is
// loaded when the section first comes near the screen. No framework: plain DOM, one <canvas> for the heatmap.
//
// The model: idx (1, T) int64 -> logits (1, T, V) and attention (L, 1, H, T, T), T <= context_len. Writing runs
// it again on the last context_len characters for every new one, as book.generate.generate does without a cache,
// and samples as book.generate.next_token_probs: temperature first, then top-k (ties with the k-th kept);
// temperature 0 is greedy (the first largest logit, as torch.argmax).
//
// For tests and the curious, window.liveGPT holds {ready, forward(text), write(text, n, options), timings}.
(function () {
  "use strict";
  var BASE = new URL(".", document.currentScript.src).href;   // .../_static/live/
  var ORT_JS = "ort.wasm.min.js";
  var NO_WASM = "WebAssembly is unavailable in this browser, so the live model cannot run here " +
                "(the figures above show what it does).";
  var api = window.liveGPT = {timings: {}};

  // ---- loading: ONNX Runtime Web, then the model and its vocabulary -----------------------------------------
  var runtime = null;
  function loadRuntime() {
    if (runtime) return runtime;
    runtime = new Promise(function (resolve, reject) {
      if (typeof WebAssembly !== "object") { reject(new Error(NO_WASM)); return; }
      var tag = document.createElement("script");
      tag.src = BASE + ORT_JS;
      tag.onload = function () {
        window.ort.env.wasm.wasmPaths = BASE;    // ort-wasm-simd-threaded.{mjs,wasm} beside this file
        window.ort.env.wasm.numThreads = 1;      // threads need cross-origin isolation, which a static host lacks
        resolve(window.ort);
      };
      tag.onerror = function () { reject(new Error("could not load " + tag.src)); };
      document.head.appendChild(tag);
    });
    return runtime;
  }

  function loadModel(name) {
    var t0 = performance.now();
    return loadRuntime().then(function (ort) {
      return Promise.all([
        fetch(BASE + name + ".json").then(function (r) {
          if (!r.ok) throw new Error(name + ".json: HTTP " + r.status);
          return r.json();
        }),
        ort.InferenceSession.create(BASE + name + ".onnx", {executionProviders: ["wasm"]}),
      ]);
    }).then(function (both) {
      var meta = both[0], session = both[1];
      if (meta.format !== "book-live-gpt/1") throw new Error(name + ".json: unknown format " + meta.format);
      api.timings.load_ms = performance.now() - t0;
      return makeModel(window.ort, session, meta);
    });
  }

  // ---- the model as functions of text ----------------------------------------------------------------------
  function makeModel(ort, session, meta) {
    var cfg = meta.config, V = meta.vocab.length, stoi = {};
    meta.vocab.forEach(function (c, i) { stoi[c] = i; });
    var model = {meta: meta, V: V, L: cfg.n_layers, H: cfg.n_heads, ctx: cfg.context_len};

    model.encode = function (text) {   // -> {ids, chars, dropped}: characters outside the vocabulary dropped
      var ids = [], chars = [], dropped = [];
      Array.from(text).forEach(function (c) {
        if (c in stoi) { ids.push(stoi[c]); chars.push(c); } else if (dropped.indexOf(c) < 0) dropped.push(c);
      });
      return {ids: ids.slice(-model.ctx), chars: chars.slice(-model.ctx), dropped: dropped};
    };

    // ids (T <= ctx) -> {logits: Float32Array (T*V), attention: Float32Array (L*H*T*T), T}
    model.run = function (ids) {
      var T = ids.length;
      var idx = new ort.Tensor("int64", BigInt64Array.from(ids, function (i) { return BigInt(i); }), [1, T]);
      return session.run({idx: idx}).then(function (out) {
        return {logits: out.logits.data, attention: out.attention.data, T: T};
      });
    };
    return model;
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
    if (!ids.length) return Promise.reject(new Error("type at least one known character first"));
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
    var status = el("p", {class: "live-gpt-status", text: "Loading the model…"});
    root.innerHTML = "";
    root.appendChild(status);
    if (typeof WebAssembly !== "object") { status.textContent = NO_WASM; return; }
    var started = false;
    function start() {
      if (started) return;
      started = true;
      api.ready = loadModel(name).then(function (model) {
        return build(root, status, model, prompt).then(function () { return model; });
      });
      api.ready.catch(function (err) { status.textContent = "The live model could not start: " + err.message; });
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

  function build(root, status, model, prompt) {
    var V = model.V;
    var text = el("textarea", {class: "live-gpt-text", rows: 4, spellcheck: "false",
                               "aria-label": "text for the model"});
    text.value = prompt;
    var temp = slider("temperature", 0, 2, 0.05, 0.8, "live-gpt-temperature");
    var topk = slider("top-k", 1, V, 1, V, "live-gpt-topk");
    var button = el("button", {type: "button", class: "live-gpt-write", text: "write 80 characters"});
    var bars = el("div", {class: "live-gpt-bars", "aria-live": "polite"});
    var layer = el("select", {class: "live-gpt-layer", "aria-label": "layer"});
    var head = el("select", {class: "live-gpt-head", "aria-label": "head"});
    for (var l = 0; l < model.L; l++) layer.appendChild(el("option", {value: l, text: "layer " + (l + 1)}));
    for (var h = 0; h < model.H; h++) head.appendChild(el("option", {value: h, text: "head " + (h + 1)}));
    var canvas = el("canvas", {class: "live-gpt-heatmap"});
    var note = el("p", {class: "live-gpt-note"});
    var cfg = model.meta.config, prov = model.meta.provenance || {};
    status.textContent = "The chapter's GPT (" + cfg.n_layers + " layers × " + cfg.d_model + ", " +
      model.meta.params.toLocaleString("en") + " parameters" +
      (prov.val_bits_per_char ? ", " + prov.val_bits_per_char + " bits/char on validation" : "") +
      ") runs in your browser. It reads the last " + model.ctx + " characters.";
    root.appendChild(el("div", {class: "live-gpt-grid"}, [
      el("div", {class: "live-gpt-left"}, [text, temp.row, topk.row, button, note]),
      el("div", {class: "live-gpt-right"}, [el("p", {class: "live-gpt-caption",
        text: "Next character: the model's probability (outline) and what writing draws from (filled)"}), bars]),
    ]));
    root.appendChild(el("div", {class: "live-gpt-attention"}, [
      el("p", {class: "live-gpt-caption", text: "Attention of the typed text: row = the character reading, " +
                                                  "column = the character read (darker = more weight)"}),
      el("div", {}, [layer, head]), canvas]));

    var last = null, pending = 0;
    function refresh() {   // run the model on the text; redraw the bars and the heatmap
      var ticket = ++pending, enc = model.encode(text.value);
      note.textContent = enc.dropped.length ? "Not in the vocabulary, skipped: " + enc.dropped.join(" ") : "";
      if (!enc.ids.length) { bars.textContent = "Type something."; last = null; drawHeatmap(); return Promise.resolve(); }
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
      var ctx = canvas.getContext("2d");
      if (!last) { canvas.width = canvas.height = 0; return; }
      var T = last.out.T, H = model.H, l = Number(layer.value), h = Number(head.value);
      var cell = Math.max(6, Math.min(22, Math.floor(460 / T))), pad = 14;
      canvas.width = canvas.height = pad + cell * T + 2;
      ctx.clearRect(0, 0, canvas.width, canvas.height);
      ctx.font = Math.min(12, cell) + "px monospace";
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      var a = last.out.attention, off = (l * H + h) * T * T;
      for (var i = 0; i < T; i++) {
        ctx.fillStyle = "#333";
        ctx.fillText(shown(last.chars[i]), pad / 2, pad + cell * (i + 0.5));          // rows: reading
        ctx.fillText(shown(last.chars[i]), pad + cell * (i + 0.5), pad / 2);          // columns: read
        for (var j = 0; j <= i; j++) {
          var w = a[off + i * T + j];
          ctx.fillStyle = "rgba(31, 119, 180, " + Math.sqrt(w).toFixed(3) + ")";     // sqrt: small weights show
          ctx.fillRect(pad + cell * j, pad + cell * i, cell, cell);
        }
      }
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

  function boot() { Array.prototype.forEach.call(document.querySelectorAll(".live-gpt"), setup); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot); else boot();
})();
