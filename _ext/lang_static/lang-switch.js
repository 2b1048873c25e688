// The language switch (_ext/lang_switch.py): a link to the same page in the other edition, landing on the same
// section. Both editions have the same headings in the same order; the link carries the index of the heading the
// reader is at (?sec=N: the last heading above the top third of the window), and on arrival the page scrolls to its
// own N-th heading.
(function () {
  "use strict";
  function headings() {
    var main = document.querySelector("article.bd-article") || document.querySelector("main") || document.body;
    return Array.prototype.slice.call(main.querySelectorAll("section > h1, section > h2, section > h3"));
  }
  function current() {
    var hs = headings(), at = 0;
    for (var i = 0; i < hs.length; i++) {
      if (hs[i].getBoundingClientRect().top <= window.innerHeight * 0.3) at = i; else break;
    }
    return at;
  }
  function arrive() {
    var m = /[?&]sec=(\d+)/.exec(window.location.search);
    if (!m || window.location.hash) return;
    var h = headings()[Number(m[1])];
    if (!h) return;
    for (var d = h.parentElement; d; d = d.parentElement) {
      if (d.tagName === "DETAILS") d.open = true;
    }
    h.scrollIntoView();
  }
  function install() {
    var meta = document.querySelector('meta[name="book-other-language"]');
    var bar = document.querySelector(".article-header-buttons");
    if (!meta || !bar) return;
    var a = document.createElement("a");
    a.className = "btn btn-sm book-lang-switch";
    a.href = meta.getAttribute("content");
    a.hreflang = meta.getAttribute("data-lang");
    a.lang = meta.getAttribute("data-lang");
    a.textContent = meta.getAttribute("data-label");
    a.addEventListener("click", function () {
      var n = current();
      a.href = meta.getAttribute("content") + (n > 0 ? "?sec=" + n : "");
    });
    bar.insertBefore(a, bar.firstChild);
    arrive();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", install);
  else install();
})();
