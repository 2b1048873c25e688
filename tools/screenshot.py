"""Screenshots of built website pages in headless Chromium (also the browser helpers of tests/test_site.py).

    .venv/bin/python tools/screenshot.py chapters/01_next_token                  # -> docs/screenshots/
    .venv/bin/python tools/screenshot.py chapters/intro chapters/01_next_token --full-page
    .venv/bin/python tools/screenshot.py chapters/01_next_token --selector slider --out docs/slider.png
    .venv/bin/python tools/screenshot.py chapters/01_next_token --selector slider --press End --scale 2
    .venv/bin/python tools/screenshot.py chapters/07_training_gpt --selector .live-gpt --wait ".live-gpt-bar"

PAGE is a page of the built site without .html (e.g. chapters/intro). The site (default _build/html)
must be built first: `tools/build_book.py` (CDN assets: needs internet in the browser) or
`tools/build_book.py --local-assets` (offline). `--selector slider` shots the first slider widget with
its figure; any CSS selector works. `--wait SELECTOR` waits, after scrolling to the element, until SELECTOR
is on the page (e.g. the live GPT's bars, drawn once its model has loaded). Uses the system Chromium
(apt-get install chromium), never a download.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync"]
SELECTORS = {"slider": ".widget-subarea:has(.widget-slider)", "math": "div.math, p:has(span.math)"}
WIDGET_VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]'
# JS conditions: every .math element typeset by MathJax; every widget view rendered by the manager
MATH_READY_JS = "() => [...document.querySelectorAll('.math')].every(m => m.querySelector('mjx-container'))"
WIDGETS_READY_JS = f"""() => [...document.querySelectorAll('{WIDGET_VIEW}')].every(s => s.previousElementSibling
  && s.previousElementSibling.classList.contains('widget-subarea'))"""


def chromium_path() -> str | None:
    """System Chromium: $BOOK_CHROMIUM, /usr/bin/chromium, or chromium/chromium-browser on PATH."""
    for cand in (os.environ.get("BOOK_CHROMIUM"), "/usr/bin/chromium"):
        if cand and Path(cand).exists():
            return cand
    return shutil.which("chromium") or shutil.which("chromium-browser")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def serve(directory: Path) -> tuple[str, http.server.ThreadingHTTPServer]:
    """Serve `directory` on 127.0.0.1 (a free port) in a daemon thread; return (base URL, server)."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/", server


def launch(playwright):
    """Launch the system Chromium headless with a fresh profile."""
    exe = chromium_path()
    if exe is None:
        raise RuntimeError("Chromium not found: apt-get install -y chromium (or set BOOK_CHROMIUM)")
    return playwright.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)


def wait_for(page, condition_js: str, timeout_ms: int = 15000) -> bool:
    """Wait until the JS condition holds; False on timeout."""
    try:
        page.wait_for_function(condition_js, timeout=timeout_ms)
        return True
    except Exception:  # playwright's TimeoutError: let the caller decide
        return False


def wait_ready(page, timeout_ms: int = 15000) -> bool:
    """Wait until math is typeset and widgets are rendered; False on timeout."""
    return wait_for(page, WIDGETS_READY_JS, timeout_ms) & wait_for(page, MATH_READY_JS, timeout_ms)


def shoot(site: Path, pages: list[str], out: Path, selector: str | None = None, full_page: bool = False,
          width: int = 1280, height: int = 900, scale: float = 1.0, press: list[str] = (),
          wait: str | None = None) -> list[Path]:
    """Screenshot each page (or its first `selector` match) to PNG files; return their paths.

    `press`: keys pressed on the first slider of the page before the shot (e.g. ["End"]). `wait`: a CSS selector
    to wait for (30 s at most) once the element is in view.
    """
    from playwright.sync_api import sync_playwright

    base, server = serve(site)
    written = []
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=scale)
            for name in pages:
                name = name.removesuffix(".html").removesuffix(".ipynb").removesuffix(".md")
                if not (site / f"{name}.html").exists():
                    raise FileNotFoundError(f"{site / name}.html not found: build the site first")
                page.goto(base + f"{name}.html", wait_until="load")
                if not wait_ready(page):
                    print(f"screenshot: {name}: math/widgets not ready after 15 s (offline CDN build?)")
                for key in press:
                    page.locator(".widget-subarea .noUi-handle").first.focus()
                    page.keyboard.press(key)
                    page.wait_for_timeout(300)
                target = out if out.suffix == ".png" and len(pages) == 1 else out / f"{name.replace('/', '_')}.png"
                target.parent.mkdir(parents=True, exist_ok=True)
                if selector:
                    element = page.locator(SELECTORS.get(selector, selector)).first
                    if element.count() == 0:
                        raise RuntimeError(f"{name}: nothing matches {selector!r}")
                    element.scroll_into_view_if_needed()
                    if wait:
                        page.wait_for_selector(wait, timeout=30000)
                        page.wait_for_timeout(300)
                    box = element.bounding_box()  # in the viewport
                    pad = 24  # some page around the element (labels may overhang its box)
                    x, y = max(box["x"] - pad, 0), max(box["y"] - pad, 0)
                    clip = {"x": x, "y": y, "width": box["width"] + 2 * pad, "height": box["height"] + 2 * pad}
                    page.screenshot(path=str(target), clip=clip)
                else:
                    page.screenshot(path=str(target), full_page=full_page)
                written.append(target)
                print(f"screenshot: {target}")
            browser.close()
    finally:
        server.shutdown()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pages", nargs="+", help="pages of the built site, e.g. chapters/intro")
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html", help="built site folder")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots",
                        help="folder, or a .png file when one page is given")
    parser.add_argument("--selector", help="'slider', 'math' or a CSS selector: shoot that element only")
    parser.add_argument("--full-page", action="store_true", help="the whole page, not just the viewport")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--scale", type=float, default=1.0, help="device pixel ratio (2 for crisp README shots)")
    parser.add_argument("--press", nargs="*", default=[], metavar="KEY",
                        help="keys to press on the first slider before the shot, e.g. --press End")
    parser.add_argument("--wait", metavar="SELECTOR", help="with --selector: wait for SELECTOR after scrolling there")
    args = parser.parse_args(argv)
    try:
        shoot(args.site, args.pages, args.out, args.selector, args.full_page, args.width, args.height,
              args.scale, args.press, args.wait)
    except (RuntimeError, FileNotFoundError) as err:
        print(f"screenshot: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
