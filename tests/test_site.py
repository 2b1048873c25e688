"""The website in a real headless Chromium: pages load with no console error, math typesets, sliders switch frames,
links resolve, and axe-core finds no serious or critical accessibility violation.

The site is built once per session with local copies of the CDN assets (tests/conftest.py), served on
127.0.0.1, and every page of _toc.yml is checked, so new chapters are tested as soon as they are listed.
Needs `bash tools/fetch_assets.sh` and a system Chromium (`apt-get install -y chromium`). The browser
may not reach the internet: any request leaving 127.0.0.1 is blocked and reported.
"""
from __future__ import annotations

import base64
import json
import re
import time
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from conftest import ASSETS, SITE_SOURCE, load_tool
from nbtools import frame_parts

CONFIG = yaml.safe_load((SITE_SOURCE / "_config.yml").read_text(encoding="utf8"))
TOC_PATH = SITE_SOURCE / "_toc.yml"
SHOTS = load_tool("screenshot")
WIDGET_VIEW = SHOTS.WIDGET_VIEW
STATE_RE = re.compile(r'<script type="application/vnd\.jupyter\.widget-state\+json">(.*?)</script>', re.S)
ID_RE = re.compile(r'\s(?:id|name)="([^"]+)"')
# axe-core (pinned in tools/assets/package.json, installed into .assets/ by tools/fetch_assets.sh): every page is
# scanned once loaded; a violation of these impacts fails test_no_serious_accessibility_violations.
AXE_JS = ASSETS / "node_modules" / "axe-core" / "axe.min.js"
AXE_IMPACTS = ("serious", "critical")
AXE_LATER = {"image-alt"}   # figures' and slider frames' alt text: checked by test_every_image_has_alt_text
AXE_RUN_JS = """async () => (await axe.run(document, {resultTypes: ['violations']})).violations.map(
  v => ({id: v.id, impact: v.impact, targets: v.nodes.map(n => n.target.join(' '))}))"""
# Slider models the test can drive with the keyboard: model name -> the attribute a jslink uses
SLIDERS = {"IntSliderModel": "value", "SelectionSliderModel": "index"}
HANDLES = {"FloatSliderModel": 1, "FloatLogSliderModel": 1, "IntRangeSliderModel": 2,
           "FloatRangeSliderModel": 2, "SelectionRangeSliderModel": 2}  # rendered, not driven
ONE_OF = ("StackModel", "TabModel", "AccordionModel")  # containers that show only the selected child


def toc_docnames(toc_path: Path = TOC_PATH) -> list[str]:
    """Documents listed in _toc.yml (root first), without suffix, e.g. chapters/intro."""
    if not toc_path.exists():
        return []
    toc = yaml.safe_load(toc_path.read_text(encoding="utf8"))
    names = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                names.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    walk(toc.get("parts"))
    walk(toc.get("chapters"))
    return [re.sub(r"\.(ipynb|md)$", "", n) for n in names]


def source_of(docname: str) -> Path | None:
    for suffix in (".ipynb", ".md"):
        if (SITE_SOURCE / f"{docname}{suffix}").exists():
            return SITE_SOURCE / f"{docname}{suffix}"
    return None


PAGES = toc_docnames()
# the Chinese edition (tools/i18n.py's zh/ book, built into the site's zh/ folder): every page checked the same way
ZH_CONFIG_PATH = SITE_SOURCE / "zh" / "_config.yml"
ZH_PAGES = [f"zh/{d}" for d in toc_docnames(SITE_SOURCE / "zh" / "_toc.yml")]
SITE_PAGES = PAGES + ZH_PAGES
NOTEBOOK_PAGES = [d for d in SITE_PAGES if (SITE_SOURCE / f"{d}.ipynb").exists()]


def config_of(docname: str) -> dict:
    """The _config.yml of the edition a page belongs to."""
    if docname.startswith("zh/"):
        return yaml.safe_load(ZH_CONFIG_PATH.read_text(encoding="utf8"))
    return CONFIG


def test_toc_lists_exactly_the_chapter_files():
    """Every chapters/*.ipynb and chapters/*.md is in _toc.yml, and every toc entry exists."""
    assert PAGES, f"{TOC_PATH} missing or empty"
    missing = [d for d in PAGES if source_of(d) is None]
    assert not missing, f"_toc.yml lists files that do not exist: {missing}"
    files = sorted((SITE_SOURCE / "chapters").glob("*.ipynb")) + sorted((SITE_SOURCE / "chapters").glob("*.md"))
    unlisted = [str(f.relative_to(SITE_SOURCE)) for f in files
                if not f.name.startswith(("_", ".")) and str(f.relative_to(SITE_SOURCE).with_suffix("")) not in PAGES]
    assert not unlisted, f"chapter files missing from _toc.yml (add them, or the site omits them): {unlisted}"
    assert len(set(PAGES)) == len(PAGES), "a page is listed twice in _toc.yml"


# ----------------------------------------------------------------------------------------------
# Loading pages (once each; the per-aspect tests below read the cached result)

PAGE_INFO_JS = r"""() => {
  const skip = new Set(['PRE', 'CODE', 'SCRIPT', 'STYLE', 'TEXTAREA', 'MJX-CONTAINER']);
  const raw = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    let p = n.parentElement, hidden = false;
    while (p && !hidden) { hidden = skip.has(p.tagName.toUpperCase()); p = p.parentElement; }
    if (!hidden && /\\\(|\\\[|\$\$/.test(n.textContent)) raw.push(n.textContent.trim().slice(0, 80));
  }
  const maths = [...document.querySelectorAll('.math')];
  const views = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
  return {
    title: document.title,
    h1: (document.querySelector('main h1, article h1, h1') || {}).textContent || '',
    math: maths.length,
    typeset: maths.filter(m => m.querySelector('mjx-container')).length,
    merror: document.querySelectorAll('mjx-merror').length,
    raw_tex: raw,
    views: views.length,
    rendered: views.filter(s => s.previousElementSibling
                               && s.previousElementSibling.classList.contains('widget-subarea')).length,
    sliders: document.querySelectorAll('.widget-subarea .noUi-handle').length,
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  };
}"""


class Visit:
    """One page opened in a fresh browser context, with everything that went wrong recorded."""

    def __init__(self, browser, base: str, docname: str, axe: bool = False):
        self.base, self.docname = base, docname
        self.context = browser.new_context(viewport={"width": 1200, "height": 900})
        self.external: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.http_errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        self.page.on("response", lambda r: r.status >= 400 and self.http_errors.append(f"{r.status} {r.url}"))
        self.page.on("requestfailed", lambda r: r.url.startswith(base)
                     and self.http_errors.append(f"failed {r.url}: {r.failure}"))
        response = self.page.goto(f"{base}{docname}.html", wait_until="load")
        self.status = response.status if response else None
        self.widgets_ready = SHOTS.wait_for(self.page, SHOTS.WIDGETS_READY_JS)
        self.math_ready = SHOTS.wait_for(self.page, SHOTS.MATH_READY_JS)
        self.info = self.page.evaluate(PAGE_INFO_JS)
        self.violations = self._axe() if axe else None

    def _axe(self) -> list[dict]:
        """axe-core's violations on the loaded page: [{id, impact, targets}]. Injected through the DevTools protocol
        (the page's CSP allows no script of the test's own)."""
        if not AXE_JS.is_file():
            pytest.fail(f"axe-core missing at {AXE_JS}: run `bash tools/fetch_assets.sh`")
        self.page.evaluate(AXE_JS.read_text(encoding="utf8"))
        return self.page.evaluate(AXE_RUN_JS)

    def _route(self, route):
        if route.request.url.startswith(self.base):
            route.continue_()
        else:
            self.external.append(route.request.url)
            route.abort()

    def close(self) -> None:
        self.context.close()


@pytest.fixture(scope="session")
def visits(chromium, site_url):
    """docname -> Visit: each page loaded once, on first use; its records are kept, the page closed."""

    class Visits(dict):
        def __missing__(self, docname):
            visit = self[docname] = Visit(chromium, site_url, docname, axe=True)
            visit.close()  # the slider test opens its own page
            return visit

    return Visits()


@pytest.mark.parametrize("docname", SITE_PAGES)
def test_page_loads_with_title(visits, docname):
    v = visits[docname]
    assert v.status == 200, f"{docname}.html: HTTP {v.status}"
    title = config_of(docname)["title"]
    assert v.info["title"].strip().endswith(title), f"{docname}: title {v.info['title']!r}"
    assert v.info["h1"].strip(), f"{docname}: no <h1> heading"


def test_site_root_redirects_to_first_page(site_html):
    index = (site_html / "index.html").read_text(encoding="utf8")
    assert f"{PAGES[0]}.html" in index, "index.html does not lead to the intro page"


@pytest.mark.parametrize("docname", SITE_PAGES)
def test_math_is_typeset(visits, docname):
    v = visits[docname]
    assert v.info["typeset"] == v.info["math"], (
        f"{docname}: MathJax typeset {v.info['typeset']} of {v.info['math']} math elements")
    assert v.info["merror"] == 0, f"{docname}: {v.info['merror']} MathJax errors (bad TeX?)"
    assert not v.info["raw_tex"], f"{docname}: raw TeX left on the page: {v.info['raw_tex'][:5]}"


@pytest.mark.parametrize("docname", SITE_PAGES)
def test_no_console_errors_or_failed_requests(visits, docname):
    v = visits[docname]
    assert not v.errors, f"{docname}: console errors: {v.errors}"
    assert not v.http_errors, f"{docname}: failed requests: {v.http_errors}"
    assert not v.external, f"{docname}: requests leaving the site (offline build must not need them): {v.external}"
    assert v.info["rendered"] == v.info["views"], (
        f"{docname}: {v.info['rendered']} of {v.info['views']} widgets rendered")


def serious_violations(violations: list[dict], rules: set | None = None, skip: set = frozenset()) -> list[str]:
    """'rule (impact): target' for each node axe found with a serious or critical violation (of `rules`, if given)."""
    return [f"{v['id']} ({v['impact']}): {target}" for v in violations
            if v["impact"] in AXE_IMPACTS and v["id"] not in skip and (rules is None or v["id"] in rules)
            for target in v["targets"]]


def test_serious_violations_picks_impacts_and_rules():
    found = [{"id": "image-alt", "impact": "critical", "targets": ["img.a", "img.b"]},
             {"id": "region", "impact": "moderate", "targets": ["div"]},
             {"id": "aria-input-field-name", "impact": "serious", "targets": [".noUi-handle"]}]
    assert serious_violations(found) == ["image-alt (critical): img.a", "image-alt (critical): img.b",
                                         "aria-input-field-name (serious): .noUi-handle"]
    assert serious_violations(found, skip={"image-alt"}) == ["aria-input-field-name (serious): .noUi-handle"]
    assert serious_violations(found, rules={"image-alt"}) == ["image-alt (critical): img.a",
                                                              "image-alt (critical): img.b"]


@pytest.mark.parametrize("docname", SITE_PAGES)
def test_no_serious_accessibility_violations(visits, docname):
    """axe-core on the loaded page (widgets rendered, math typeset): no serious or critical violation."""
    found = serious_violations(visits[docname].violations, skip=AXE_LATER)
    if docname.startswith("zh/"):
        # axe-core compares a control's visible text with its label word by word and finds no words in Chinese: the
        # theme's search button, whose label and visible text are the same 搜索, is reported (a false positive)
        found = [f for f in found if not (f.startswith("label-content-name-mismatch")
                                          and f.endswith('.search-button__button[aria-label="搜索"]'))]
    assert not found, f"{docname}: axe-core violations: {found}"


def test_every_image_has_alt_text(visits, site_html):
    """axe-core's image-alt on every page: each image the reader sees (figures, sliders' frames) has alt text; and
    no figure's alt is its file's path (myst-nb's default when the output carries none: _ext/figure_alt.py)."""
    found = [f"{d}: {v}" for d in SITE_PAGES for v in serious_violations(visits[d].violations, rules=AXE_LATER)]
    assert not found, f"{len(found)} images without alt text: {found}"
    paths = [f"{d}: {alt}" for d in SITE_PAGES for alt in re.findall(r'<img\b[^>]*\balt="([^"]*)"',
                                                               (site_html / f"{d}.html").read_text(encoding="utf8"))
             if re.search(r"\.(png|jpe?g|gif|svg)$", alt.strip())]
    assert not paths, f"{len(paths)} images whose alt text is a file path: {paths[:5]}"


@pytest.mark.parametrize("docname", SITE_PAGES)
def test_each_script_is_included_once(site_html, docname):
    """No <script> twice on a page (Sphinx 7 listed sphinx-thebe's inline `const THEBE_JS_URL` twice: a SyntaxError)."""
    html = (site_html / f"{docname}.html").read_text(encoding="utf8")
    scripts = [(attrs.strip(), body) for attrs, body in re.findall(r"<script\b([^>]*)>(.*?)</script\s*>", html, re.S)
               if "widget-view+json" not in attrs]   # one view per widget output, each its own model id
    twice = sorted({f"{a} {b[:60]}" for a, b in scripts if scripts.count((a, b)) > 1})
    assert not twice, f"{docname}: scripts included more than once: {twice}"


def _labelled_slider_page(site_html: Path) -> tuple[str, str] | None:
    """(docname, description) of a page with math and a slider that has a description, if any."""
    for docname in NOTEBOOK_PAGES:
        html = (site_html / f"{docname}.html").read_text(encoding="utf8")
        state = page_widget_state(site_html, docname)
        if state is None or 'class="math' not in html:
            continue
        for m in state.models.values():
            if m["_name"] in SLIDERS and m.get("description"):
                return docname, m["description"]
    return None


def test_widget_labels_typeset_math_and_name_their_slider(chromium, site_url, site_html):
    """A slider description holding TeX is typeset by the site's MathJax 3 (the widget manager asks with MathJax 2's
    `Hub.Queue`, given by _ext/widgets-mathjax-hub.js), with no console error; the slider's handle is named by it."""
    found = _labelled_slider_page(site_html)
    assert found, "no page with math and a slider with a description to try a TeX label on"
    docname, description = found
    label = description + r" \(\tau = \frac{1}{T}\)"
    original = (site_html / f"{docname}.html").read_text(encoding="utf8")
    old = f'"description": {json.dumps(description)}'
    assert old in original
    context = chromium.new_context()
    errors: list[str] = []
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(site_url) else route.abort())
    context.route(f"{site_url}{docname}.html", lambda route: route.fulfill(
        status=200, content_type="text/html", body=original.replace(old, f'"description": {json.dumps(label)}', 1)))
    page = context.new_page()
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    try:
        page.goto(f"{site_url}{docname}.html", wait_until="load")
        assert SHOTS.wait_ready(page), f"{docname}: widgets or math not ready after 15 s"
        labels = """(text) => [...document.querySelectorAll('.widget-label')]
          .filter(l => l.textContent.startsWith(text))
          .map(l => l.querySelector('mjx-container') ? 'typeset' : l.textContent)"""
        try:
            page.wait_for_function(f"(text) => ({labels})(text).includes('typeset')", arg=description, timeout=10000)
        except Exception:  # noqa: BLE001 - playwright's TimeoutError: report what the labels show
            shown = page.evaluate(labels, description)
            pytest.fail(f"{docname}: the label {label!r} was not typeset by MathJax: {shown}; console errors: {errors}")
        named = page.evaluate("""(text) => [...document.querySelectorAll('.noUi-handle')].map(h => {
            const by = document.getElementById(h.getAttribute('aria-labelledby') || '');
            return by ? by.textContent : h.getAttribute('aria-label'); })""", description)
        assert any(n and n.startswith(description) for n in named), f"{docname}: slider handles named {named}"
        assert not errors, f"{docname}: console errors: {errors}"
    finally:
        context.close()


def test_every_built_page_carries_the_content_security_policy(site_html):
    """The CSP meta tag (_ext/site_assets.py) leads each page's <head>; every inline script and inline handler the
    page holds is allowed by its sha256, nothing inline or evaluated otherwise ('unsafe-eval' only where the widget
    manager runs). The browser tests above then fail on any violation: Chromium logs each one as a console error."""
    import hashlib
    from html import unescape

    pages = [f for f in site_html.rglob("*.html") if "_static" not in f.relative_to(site_html).parts]
    assert len(pages) >= len(PAGES)
    for page in pages:
        html = page.read_text(encoding="utf8")
        found = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
        assert len(found) == 1, f"{page.name}: {len(found)} CSP meta tags"
        assert html.index("Content-Security-Policy") < html.find("<script") or "<script" not in html
        directives = dict(d.split(" ", 1) for d in found[0].split("; "))
        script = directives["script-src"].split()
        assert "'unsafe-inline'" not in script and "*" not in script and "https:" not in script, page.name
        assert directives["object-src"] == "'none'" and directives["default-src"] == "'self'", page.name
        assert ("'unsafe-eval'" in script) == ("embed-amd.js" in html), f"{page.name}: 'unsafe-eval' off widget pages"
        for attrs, body in re.findall(r"<script\b([^>]*)>(.*?)</script\s*>", html, re.S):
            if "src=" in attrs or "type=" in attrs and not re.search(r'type="(text/javascript|module)"', attrs):
                continue
            digest = "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
            assert digest in script, f"{page.name}: an inline script not allowed by the policy: {body[:80]!r}"
        tags = re.findall(r"<[a-zA-Z][^<>]*>", html)
        for code in (c for tag in tags for c in re.findall(r'\son[a-z]+="([^"]*)"', tag)):
            digest = "'sha256-" + base64.b64encode(hashlib.sha256(unescape(code).encode()).digest()).decode() + "'"
            assert "'unsafe-hashes'" in script and digest in script, f"{page.name}: inline handler {code!r}"


@lru_cache(maxsize=None)
def _anchors(path: Path) -> frozenset[str]:
    return frozenset(ID_RE.findall(path.read_text(encoding="utf8", errors="replace")))


@pytest.mark.parametrize("docname", SITE_PAGES)
def test_internal_links_resolve(visits, site_html, site_url, docname):
    broken = []
    for href in visits[docname].info["links"]:
        if not href.startswith(site_url):
            continue  # external (not checked offline), mailto:, javascript:
        path, _, fragment = href[len(site_url):].partition("#")
        path = unquote(path.split("?")[0])
        target = site_html / (path + "index.html" if path == "" or path.endswith("/") else path)
        if not target.is_file():
            broken.append(f"{href} (no file {path})")
        elif fragment and target.suffix == ".html" and unquote(fragment) not in _anchors(target):
            broken.append(f"{href} (no anchor #{fragment})")
    assert not broken, f"{docname}: broken internal links: {broken}"


def colab_url(docname: str) -> str:
    repo = CONFIG["repository"]
    owner_repo = repo["url"].removeprefix("https://github.com/").strip("/")
    prefix = repo.get("path_to_book", "").strip("/")
    path = f"{prefix}/{docname}" if prefix else docname
    return f"https://colab.research.google.com/github/{owner_repo}/blob/{repo['branch']}/{path}.ipynb"


def test_colab_url_format():
    assert re.fullmatch(r"https://colab\.research\.google\.com/github/[\w.-]+/[\w.-]+/blob/[\w./-]+/"
                        r"chapters/01_next_token\.ipynb", colab_url("chapters/01_next_token"))


@pytest.mark.parametrize("docname", NOTEBOOK_PAGES)
def test_colab_and_download_buttons(visits, docname):
    links = visits[docname].info["links"]
    colab = {h for h in links if h.startswith("https://colab.research.google.com")}
    assert colab == {colab_url(docname)}, f"{docname}: Colab links {colab}, expected {colab_url(docname)}"
    source = (f"zh/_sources/{docname[3:]}" if docname.startswith("zh/") else f"_sources/{docname}") + ".ipynb"
    assert any(h.endswith(source) for h in links), f"{docname}: no .ipynb download link"


# ----------------------------------------------------------------------------------------------
# Sliders: drive each one with the keyboard and compare the visible images with the frames stored
# in the page's widget state.

class WidgetState:
    """The page's stored ipywidgets state, with jslinks followed as a browser would."""

    def __init__(self, state: dict):
        self.models = {mid: dict(m["state"], _name=m["model_name"]) for mid, m in state.items()}
        self.images = {}   # model id -> PNG bytes of each slider frame: an HTML <img> (book.widgets) or an Image
        for mid, m in state.items():
            for buf in m.get("buffers", []):
                if buf.get("path") == ["value"]:
                    self.images[mid] = base64.b64decode(buf["data"])
            if m["model_name"] == "HTMLModel" and frame_parts(m["state"].get("value", "")):
                self.images[mid] = frame_parts(m["state"]["value"])[0]
        self.links = []  # (source id, attr, target id, attr, both directions?)
        for m in self.models.values():
            if m["_name"] in ("LinkModel", "DirectionalLinkModel"):
                (s, sa), (t, ta) = m["source"], m["target"]
                self.links.append((self.ref(s), sa, self.ref(t), ta, m["_name"] == "LinkModel"))

    @staticmethod
    def ref(value: str) -> str:
        return value.removeprefix("IPY_MODEL_")

    def set(self, mid: str, attr: str, value, seen=None) -> None:
        seen = seen if seen is not None else set()
        if (mid, attr) in seen:
            return
        seen.add((mid, attr))
        self.models[mid][attr] = value
        for s, sa, t, ta, both in self.links:
            if (s, sa) == (mid, attr):
                self.set(t, ta, value, seen)
            elif both and (t, ta) == (mid, attr):
                self.set(s, sa, value, seen)

    def visible(self, mid: str) -> list[str]:
        """Leaf widgets shown under `mid`, in document order."""
        m = self.models[mid]
        children = [self.ref(c) for c in m.get("children", [])] if isinstance(m.get("children"), list) else []
        if m["_name"] in ONE_OF:
            k = m.get("selected_index")
            return self.visible(children[k]) if k is not None and 0 <= k < len(children) else []
        if children:
            return [leaf for c in children for leaf in self.visible(c)]
        return [mid]

    def descendants(self, mid: str) -> list[str]:
        children = self.models[mid].get("children")
        kids = [self.ref(c) for c in children] if isinstance(children, list) else []
        return [mid] + [d for c in kids for d in self.descendants(c)]

    def unlinked_stacks(self, root: str) -> list[str]:
        """Stacks under `root` whose selected_index no slider drives (frames the reader can never reach)."""
        driven = {t for s, sa, t, ta, _ in self.links
                  if ta == "selected_index" and self.models.get(s, {}).get("_name") in SLIDERS}
        driven |= {s for s, sa, t, ta, both in self.links
                   if both and sa == "selected_index" and self.models.get(t, {}).get("_name") in SLIDERS}
        return [m for m in self.descendants(root) if self.models[m]["_name"] in ONE_OF and m not in driven]

    def handles(self, root: str) -> list[str | None]:
        """One entry per rendered slider handle under `root`: the slider's id, or None if not driven."""
        out = []
        for mid in self.visible(root):
            name = self.models[mid]["_name"]
            out += [mid] if name in SLIDERS else [None] * HANDLES.get(name, 0)
        return out

    def frames(self, root: str) -> list[bytes]:
        return [self.images.get(mid, b"") for mid in self.visible(root)
                if self.models[mid]["_name"] == "ImageModel" or mid in self.images]

    def press(self, mid: str, key: str) -> None:
        """Apply a key press on slider `mid` (noUiSlider keyboard semantics)."""
        m = self.models[mid]
        attr = SLIDERS[m["_name"]]
        if attr == "index":
            lo, hi, step = 0, len(m["_options_labels"]) - 1, 1
        else:
            lo, hi, step = m["min"], m["max"], m.get("step", 1)
        v = m[attr]
        new = {"ArrowRight": min(v + step, hi), "ArrowLeft": max(v - step, lo), "End": hi, "Home": lo}[key]
        self.set(mid, attr, new)


VISIBLE_IMAGES_JS = """async (el) => {
  const imgs = [...el.querySelectorAll('img')].filter(i => i.checkVisibility());
  return Promise.all(imgs.map(async (img) => {
    const bytes = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
    let s = '';
    for (let k = 0; k < bytes.length; k += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(k, k + 0x8000));
    return btoa(s);
  }));
}"""


def _shown(view) -> list[bytes]:
    return [base64.b64decode(s) for s in view.evaluate(VISIBLE_IMAGES_JS)]


def _wait_shown(view, expected: list[bytes], timeout_s: float = 5.0) -> list[bytes]:
    deadline = time.monotonic() + timeout_s
    while True:
        shown = _shown(view)
        if shown == expected or time.monotonic() > deadline:
            return shown
        time.sleep(0.1)


def _label(state: WidgetState, mid: str) -> str:
    m = state.models[mid]
    return f"{m['_name']} {m.get('description', '')!r}"


def page_widget_state(site_html: Path, docname: str) -> WidgetState | None:
    found = STATE_RE.search((site_html / f"{docname}.html").read_text(encoding="utf8"))
    return WidgetState(json.loads(found.group(1))["state"]) if found else None


@pytest.mark.parametrize("docname", SITE_PAGES)
def test_sliders_switch_frames(visits, chromium, site_url, site_html, docname):
    if visits[docname].info["sliders"] == 0:
        return  # nothing to drive on this page
    state = page_widget_state(site_html, docname)
    assert state is not None, f"{docname}: sliders shown but no widget state in the page"
    visit = Visit(chromium, site_url, docname)
    try:
        assert visit.widgets_ready, f"{docname}: widgets not rendered after 15 s"
        # a slider inside a deep dive sits in a closed <details>: open them all, as a reader would, so its images show
        visit.page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
        scripts = visit.page.locator(WIDGET_VIEW)
        driven = 0
        for i in range(scripts.count()):
            root = json.loads(scripts.nth(i).text_content())["model_id"]
            view = scripts.nth(i).evaluate_handle("s => s.previousElementSibling")
            ids = state.handles(root)
            handles = view.query_selector_all(".noUi-handle")
            assert len(handles) == len(ids), f"{docname} view {i}: {len(handles)} handles, state has {len(ids)}"
            if ids:
                assert not state.unlinked_stacks(root), (
                    f"{docname} view {i}: {len(state.unlinked_stacks(root))} Stack(s) not jslinked to a slider")
            assert _wait_shown(view, state.frames(root)) == state.frames(root), (
                f"{docname} view {i}: initial images differ from the stored frames")
            for handle, mid in zip(handles, ids):
                if mid is None:
                    continue
                m = state.models[mid]
                at_end = m[SLIDERS[m["_name"]]] == (m["max"] if SLIDERS[m["_name"]] == "value"
                                                    else len(m["_options_labels"]) - 1)
                changed = False
                for key in ("ArrowLeft" if at_end else "ArrowRight", "End", "Home"):
                    before = state.frames(root)
                    handle.focus()
                    visit.page.keyboard.press(key)
                    state.press(mid, key)
                    expected = state.frames(root)
                    shown = _wait_shown(view, expected)
                    assert shown == expected, (
                        f"{docname} view {i}: after {key} on {_label(state, mid)} the visible image is not "
                        f"the expected frame ({len(shown)} shown, {len(expected)} expected)")
                    changed |= expected != before
                assert changed, (f"{docname} view {i}: {_label(state, mid)} moves but no frame changes "
                                 "(is it jslinked to a Stack's selected_index?)")
                driven += 1
        assert driven > 0, f"{docname}: sliders on the page, none could be driven"
        assert not visit.errors, f"{docname}: console errors: {visit.errors}"
    finally:
        visit.close()


def test_some_chapter_has_math_and_a_slider(visits):
    chapters = [d for d in NOTEBOOK_PAGES if d.split("/")[-1][:2].isdigit()]
    assert chapters, "no chapter notebook in _toc.yml"
    assert any(visits[d].info["math"] > 0 for d in chapters), "no chapter page has math"
    assert any(visits[d].info["sliders"] > 0 for d in chapters), "no chapter page has a slider"


HEADINGS_JS = """() => [...(document.querySelector('article.bd-article') || document.body)
  .querySelectorAll('section > h1, section > h2, section > h3')].map(h => h.textContent.trim())"""


@pytest.mark.parametrize("docname", [d for d in PAGES if f"zh/{d}" in ZH_PAGES])
def test_both_editions_have_the_same_headings_in_the_same_order(site_html, docname):
    """The language switch lands on the N-th heading of the other page: both must have as many, at the same levels."""
    def levels(path):
        html = path.read_text(encoding="utf8")
        return re.findall(r"<section[^>]*>\s*<h([1-3])", html)
    en, zh = levels(site_html / f"{docname}.html"), levels(site_html / "zh" / f"{docname}.html")
    assert en and en == zh, f"{docname}: heading levels differ: {en} vs {zh}"


def test_the_language_switch_lands_on_the_same_section(chromium, site_url):
    """From an English chapter, scrolled to its 5th heading, the switch opens the Chinese page at its 5th heading
    (a folded deep dive around it opened), and back."""
    docname = next(d for d in NOTEBOOK_PAGES if not d.startswith("zh/") and d.split("/")[-1][:2].isdigit())
    for start, other, label in ((docname, f"zh/{docname}", "中文"), (f"zh/{docname}", docname, "English")):
        visit = Visit(chromium, site_url, start)
        try:
            heads = visit.page.locator("article.bd-article section > h2")
            assert heads.count() >= 3, f"{start}: fewer than 3 sections"
            k = 2
            target = heads.nth(k)
            target.evaluate("h => { for (let d = h.parentElement; d; d = d.parentElement) "
                            "if (d.tagName === 'DETAILS') d.open = true; h.scrollIntoView(); }")
            index = visit.page.evaluate(HEADINGS_JS).index(target.text_content().strip())
            switch = visit.page.locator("a.book-lang-switch")
            assert switch.count() == 1 and switch.text_content() == label, f"{start}: no '{label}' switch"
            switch.evaluate("a => a.click()")   # as a reader clicks it in the sticky header (a Playwright click
            # would first scroll the page to show the link, moving the section the reader is at)
            visit.page.wait_for_url(re.compile(re.escape(f"/{other}.html?sec=") + r"\d+$"))
            assert visit.page.url.endswith(f"?sec={index}"), f"{start}: at heading {index}, the switch went to " \
                                                              f"{visit.page.url}"
            visit.page.wait_for_timeout(300)
            landed = visit.page.evaluate("""n => { const h = [...(document.querySelector('article.bd-article'))
              .querySelectorAll('section > h1, section > h2, section > h3')][n];
              return h ? Math.round(h.getBoundingClientRect().top) : null; }""", index)
            assert landed is not None and -5 <= landed <= 200, f"{start} -> {other}: heading {index} at {landed}px"
            assert not visit.errors, f"{start} -> {other}: console errors {visit.errors}"
        finally:
            visit.close()
