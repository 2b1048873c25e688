"""Sphinx extension of the course website: where MathJax and the ipywidgets manager come from.

Public build (default): the pinned CDN URLs and integrity hashes of `_config.yml`.
Offline/test build: when the environment variable BOOK_LOCAL_ASSETS names the folder filled by
`tools/fetch_assets.sh` (an npm prefix, usually `.assets`), `mathjax_path` and `nb_ipywidgets_js`
point at same-version local copies, copied into the built site's `_static/_vendor/` at the end
of the build. They never go into a `_static/` folder of the book's sources: Jupyter Book v1 would
add a <script> for every .js file there to every page. The switch happens at `config-inited`,
after Jupyter Book's `_static` scan, so MathJax is still loaded only on pages with math and the
widget scripts only on pages with widgets.

Both builds also load `widgets-require-paths.js` between require.js and embed-amd.js, so the
manager's icon fonts resolve to its own dist/ folder rather than the page's folder, and then two more scripts of
ours (WIDGET_JS): `widgets-mathjax-hub.js` gives MathJax 3 the one MathJax 2 call the manager makes to typeset
widget labels (`MathJax.Hub.Queue`), and `widgets-a11y.js` names the sliders' handles for screen readers.
Every page's script list is deduplicated (`dedupe_scripts`): Sphinx 7 lists some extensions' inline scripts twice.

The live sections (chapters 4, 7 and 8, `live_gpt.js` here): a page whose body holds `<div class="live-gpt" ...>`
gets `_static/live/live_gpt.js`, and both builds copy into `_static/live/` that script, the exported models
(book/results/live/*.onnx and *.json, written when those chapters run) and ONNX Runtime Web's wasm build from the
npm folder (BOOK_LOCAL_ASSETS, else .assets/; `tools/fetch_assets.sh` fills it): the public site serves them
itself too, so the live section needs no CDN.

Every page gets a Content-Security-Policy (`<meta http-equiv>`, written into the built HTML at the end of the build,
`add_csp`): scripts only from the site itself, from the folders of the pinned CDN files of `_config.yml` (MathJax,
RequireJS, the widgets manager; their integrity hashes pin the entry files, the folders hold what they load
later) and the page's own inline scripts and event handlers (the theme's print and full-screen buttons: with
'unsafe-hashes'), each allowed by its sha256; on pages with widgets only, 'unsafe-eval' (the widget manager's
bundled JSON-schema validator, ajv, compiles its validators with `new Function`; without it no widget renders);
WebAssembly compilation for ONNX Runtime Web ('wasm-unsafe-eval'); styles from the site, the CDN folders and
inline ('unsafe-inline' for styles only: the themes', MathJax's and the widgets' style attributes and injected
<style> elements); images from the site, data: and blob: URLs (the themes' CSS icons, the Image widget's frames);
fonts from the site, data: and the CDN folders; fetches only from the site; no plugins, no <base>, forms only to
the site. (A <meta> policy cannot set frame-ancestors; that needs an HTTP header from the host.)
"""
from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
from html import unescape
from pathlib import Path

VENDOR = "_vendor"  # folder (under the built _static/) that receives the local copies and the paths script
PATHS_JS = "widgets-require-paths.js"
# scripts of ours loaded after PATHS_JS and before the manager, on widget pages only (see their headers)
WIDGET_JS = ("widgets-mathjax-hub.js", "widgets-a11y.js")
HERE = Path(__file__).resolve().parent
# npm package -> (file or folder inside it to copy, name under _vendor/)
LOCAL = {
    "mathjax": ("es5", "mathjax"),
    "requirejs": ("require.js", "requirejs/require.js"),
    "@jupyter-widgets/html-manager": ("dist", "html-manager/dist"),
}
SKIP = shutil.ignore_patterns("*.map", "embed.js", "embed.js.LICENSE.txt")
LIVE = "live"              # folder under the built _static/ with the live GPT
LIVE_JS = "live_gpt.js"
LIVE_MARK = 'class="live-gpt"'
LIVE_MODELS = HERE.parent / "book" / "results" / "live"
ORT = "onnxruntime-web"    # pinned in tools/assets/package.json; only the wasm build's three files are served
ORT_FILES = ("ort.wasm.min.js", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")


CSP_MARK = '<meta http-equiv="Content-Security-Policy"'
SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script\s*>", re.S | re.I)
JS_TYPES = {"", "text/javascript", "application/javascript", "module"}
TAG = re.compile(r"<[a-zA-Z][^<>]*>")
HANDLER = re.compile(r'\son[a-z]+="([^"]*)"')   # an inline event handler's code, in a tag
# Controls of the themes whose accessible name leaves out text they show (axe's label-content-name-mismatch: a speech
# user says what they see): the search buttons, named "Search" while showing "Search Ctrl+K" (named by their text
# instead, the shortcut hint hidden from it and given as aria-keyshortcuts); the colour-mode button, named
# "Color mode" while its icons carry the titles "Light", "Dark", "System Settings" (the titles go: the button's
# tooltip says "Color mode"); and myst-nb's hidden-cell toggle, named "Toggle hidden content" while it shows
# "Show code cell content" (its shown text becomes its name).
A11Y = [
    (re.compile(r'(<button class="[^"]*\bsearch-button-field\b[^"]*"[^>]*?) aria-label="Search"'),
     r'\1 aria-keyshortcuts="Control+K"'),
    (re.compile(r'<span class="search-button__kbd-shortcut">'),
     '<span class="search-button__kbd-shortcut" aria-hidden="true">'),
    (re.compile(r'(<i class="theme-switch [^"]*"[^>]*?) title="[^"]*"'), r"\1"),
    (re.compile(r'<summary aria-label="Toggle hidden content">'), "<summary>"),
]


def cdn_folders(config) -> list:
    """The folders (URL up to the last /) of the http(s) scripts the config loads: MathJax, RequireJS, the manager."""
    urls = [config.mathjax_path, *dict(config.nb_ipywidgets_js)]
    return sorted({u.rsplit("/", 1)[0] + "/" for u in urls if str(u).startswith(("https://", "http://"))})


def inline_script_hashes(html: str) -> list:
    """'sha256-...' of each inline script the browser would run (not data blocks such as the widget state)."""
    hashes = []
    for attrs, body in SCRIPT.findall(html):
        kind = re.search(r"""\btype\s*=\s*["']?([^"'\s>]*)""", attrs, re.I)
        if re.search(r"\bsrc\s*=", attrs, re.I) or (kind and kind.group(1).lower() not in JS_TYPES):
            continue
        digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode()
        if f"'sha256-{digest}'" not in hashes:
            hashes.append(f"'sha256-{digest}'")
    return hashes


def handler_hashes(html: str) -> list:
    """'sha256-...' of each inline event handler (sphinx-book-theme's onclick="window.print()" and the like)."""
    hashes = []
    for value in (code for tag in TAG.findall(html) for code in HANDLER.findall(tag)):
        digest = base64.b64encode(hashlib.sha256(unescape(value).encode("utf-8")).digest()).decode()
        if f"'sha256-{digest}'" not in hashes:
            hashes.append(f"'sha256-{digest}'")
    return hashes


def csp_policy(cdn: list, hashes: list, handlers: list = (), widgets: bool = False) -> str:
    """The page's Content-Security-Policy (see the module docstring)."""
    remote = " ".join(cdn)
    unsafe_hashes = ["'unsafe-hashes'", *handlers] if handlers else []
    evaluates = ["'unsafe-eval'"] if widgets else []
    return "; ".join([
        "default-src 'self'",
        " ".join(["script-src 'self'", *evaluates, "'wasm-unsafe-eval'", *hashes, *unsafe_hashes, *cdn]),
        f"style-src 'self' 'unsafe-inline' {remote}".strip(),
        "img-src 'self' data: blob:",
        f"font-src 'self' data: {remote}".strip(),
        "connect-src 'self' data: blob:",   # reading a widget's own image frames back (data: and blob: URLs)
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
    ])


def with_csp(html: str, cdn: list) -> str:
    """The page with its CSP meta tag (first in <head>, after the charset; an earlier one is replaced)."""
    html = re.sub(re.escape(CSP_MARK) + r'[^>]*>\n?', "", html)
    widgets = bool(re.search(r'<script[^>]*\ssrc="[^"]*/embed-amd\.js(\?[^"]*)?"', html))   # Sphinx may add ?v=
    tag = f'{CSP_MARK} content="{csp_policy(cdn, inline_script_hashes(html), handler_hashes(html), widgets)}">'
    head = re.search(r"<meta charset=[^>]*>\n?", html, re.I) or re.search(r"<head[^>]*>\n?", html, re.I)
    at = head.end() if head else 0   # no <head>: a redirect page (index.html), the tag first
    return html[:at] + tag + "\n" + html[at:]


def with_accessible_names(html: str) -> str:
    """The page with the themes' controls named by what they show (axe's label-content-name-mismatch; see A11Y)."""
    for pattern, replacement in A11Y:
        html = pattern.sub(replacement, html)
    return html


def add_csp(outdir: Path, cdn: list) -> int:
    """Write the CSP into every built page (not into files under _static/), after the accessible-name fixes;
    returns how many pages."""
    pages = [f for f in Path(outdir).rglob("*.html") if "_static" not in f.relative_to(outdir).parts]
    for page in pages:
        page.write_text(with_csp(with_accessible_names(page.read_text(encoding="utf-8")), cdn), encoding="utf-8")
    return len(pages)


def local_assets_dir() -> Path | None:
    """The `node_modules` folder named by BOOK_LOCAL_ASSETS (or its npm prefix), or None."""
    value = os.environ.get("BOOK_LOCAL_ASSETS", "").strip()
    if not value:
        return None
    root = Path(value).resolve()
    modules = root if root.name == "node_modules" else root / "node_modules"
    missing = [p for p in LOCAL if not (modules / p / LOCAL[p][0]).exists()]
    if missing:
        raise RuntimeError(
            f"BOOK_LOCAL_ASSETS={value}: {', '.join(missing)} not found under {modules}; "
            "run `bash tools/fetch_assets.sh` first"
        )
    return modules


def _widget_js(config, local: bool) -> dict:
    """nb_ipywidgets_js with the paths script inserted after require.js (local copies if `local`)."""
    js = {}
    for url, attrs in dict(config.nb_ipywidgets_js).items():
        attrs = dict(attrs)
        if url.endswith("/require.js") or url.endswith("/require.min.js"):
            js[f"{VENDOR}/requirejs/require.js" if local else url] = {} if local else attrs
        elif url.endswith("/embed-amd.js"):
            dist = "html-manager/dist/" if local else url.rsplit("/", 1)[0] + "/"
            js[f"{VENDOR}/{PATHS_JS}"] = {"data-dist": dist}
            js.update({f"{VENDOR}/{name}": {} for name in WIDGET_JS})
            if local:  # keep the CDN attribute (used only for widget modules not in the bundle)
                attrs = {k: v for k, v in attrs.items() if k == "data-jupyter-widgets-cdn"}
                url = f"{VENDOR}/html-manager/dist/embed-amd.js"
            js[url] = attrs
        else:
            js[url] = attrs
    # order matters: require.js, then the paths script (and WIDGET_JS), then embed-amd.js
    return js


def configure(app, config) -> None:
    """config-inited: choose CDN or local assets."""
    modules = local_assets_dir()
    app.site_assets_cdn = cdn_folders(config)   # the public build's CDN folders, before any local swap
    config.nb_ipywidgets_js = _widget_js(config, local=modules is not None)
    if modules is not None:
        config.mathjax_path = f"{VENDOR}/mathjax/tex-mml-chtml.js"
        config.mathjax_options = {}
        app.site_assets_modules = modules


def ort_dir() -> Path:
    """dist/ of the npm onnxruntime-web: under BOOK_LOCAL_ASSETS if set, else the repository's .assets/."""
    value = os.environ.get("BOOK_LOCAL_ASSETS", "").strip()
    root = Path(value).resolve() if value else HERE.parent / ".assets"
    modules = root if root.name == "node_modules" else root / "node_modules"
    return modules / ORT / "dist"


def dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    """html-page-context (last): each script once. Sphinx 7 lists an inline script added after the builder started
    (sphinx-thebe's `const THEBE_JS_URL = ...`, sphinx-togglebutton's selector) twice, once with the file name None
    and once with '', so the page ran `const THEBE_JS_URL` twice: an uncaught SyntaxError on every page."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for js in scripts:
        key = (getattr(js, "filename", js) or "", getattr(js, "priority", None),
               tuple(sorted(getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(js)
    scripts[:] = kept


def add_live_script(app, pagename, templatename, context, doctree) -> None:
    """html-page-context: the live GPT's script, on the pages that hold a live section only."""
    if LIVE_MARK in context.get("body", ""):
        app.add_js_file(f"{LIVE}/{LIVE_JS}", loading_method="defer")
        app.site_assets_live = True


def copy_live(app) -> None:
    """Copy the live GPT's script, models and runtime into _static/live/ (the pages with a section need them)."""
    dest = Path(app.outdir) / "_static" / LIVE
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(HERE / LIVE_JS, dest / LIVE_JS)
    for model in sorted(LIVE_MODELS.glob("*.onnx")) + sorted(LIVE_MODELS.glob("*.json")):
        shutil.copy2(model, dest / model.name)
    dist = ort_dir()
    missing = [f for f in ORT_FILES if not (dist / f).is_file()]
    if missing and getattr(app, "site_assets_live", False):
        raise RuntimeError(f"the live GPT needs {', '.join(missing)} from npm's {ORT} in {dist}: "
                           "run `bash tools/fetch_assets.sh`")
    for name in ORT_FILES:
        if (dist / name).is_file():
            shutil.copy2(dist / name, dest / name)


def copy_assets(app, exception) -> None:
    """build-finished: copy the paths script (and the local copies, if any) into _static/_vendor/."""
    if exception is not None or app.builder.format != "html":
        return
    dest = Path(app.outdir) / "_static" / VENDOR  # Sphinx puts relative js paths under _static/
    dest.mkdir(parents=True, exist_ok=True)
    for name in (PATHS_JS, *WIDGET_JS):
        shutil.copy2(HERE / name, dest / name)
    copy_live(app)
    add_csp(Path(app.outdir), getattr(app, "site_assets_cdn", []))
    modules = getattr(app, "site_assets_modules", None)
    if modules is None:
        return
    for package, (inner, target) in LOCAL.items():
        src, dst = modules / package / inner, dest / target
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=SKIP, dirs_exist_ok=True)
        else:
            shutil.copy2(src, dst)


def setup(app):
    app.connect("config-inited", configure)
    app.connect("html-page-context", add_live_script)
    app.connect("html-page-context", dedupe_scripts, priority=900)   # after every extension added its scripts
    app.connect("build-finished", copy_assets)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
