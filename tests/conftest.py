"""Fixtures of the website test (tests/test_site.py): a local-assets build, a server, a browser.

Heavy imports happen inside the fixtures, so other tests never pay for them.
BOOK_SITE_SOURCE=<folder> tests another book root (default: the repository), for development.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE_SOURCE = Path(os.environ.get("BOOK_SITE_SOURCE", ROOT)).resolve()
ASSETS = ROOT / ".assets"
HINT = "run `bash tools/fetch_assets.sh` / `apt-get install -y chromium`"
_FAILED: list[str] = []  # a failed build is reported once per test, not rebuilt for each


def load_tool(name: str):
    """Import tools/<name>.py (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"_tools_{name}", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def site_html(tmp_path_factory) -> Path:
    """The book built with local MathJax/ipywidgets copies (-W -n) into a temporary folder."""
    if _FAILED:
        pytest.fail(_FAILED[0], pytrace=False)
    shots = load_tool("screenshot")
    if shots.chromium_path() is None:
        pytest.fail(f"Chromium not found at /usr/bin/chromium: {HINT}")
    if not (ASSETS / "node_modules" / "mathjax").is_dir():
        pytest.fail(f"local web assets missing in {ASSETS}: {HINT}")
    out = tmp_path_factory.mktemp("site")
    try:
        return load_tool("build_book").build(SITE_SOURCE, out, local_assets=ASSETS, quiet=True)
    except RuntimeError as err:
        _FAILED.append(str(err))
        pytest.fail(str(err), pytrace=False)


@pytest.fixture(scope="session")
def site_url(site_html):
    """Base URL (ending in /) of the built site served on 127.0.0.1."""
    base, server = load_tool("screenshot").serve(site_html)
    yield base
    server.shutdown()


@pytest.fixture(scope="session")
def chromium():
    """Headless system Chromium (playwright with executable_path; never `playwright install`)."""
    from playwright.sync_api import sync_playwright

    shots = load_tool("screenshot")
    with sync_playwright() as pw:
        try:
            browser = shots.launch(pw)
        except Exception as err:  # noqa: BLE001 - report any launch failure with the hint
            pytest.fail(f"cannot start Chromium ({err}): {HINT}")
        yield browser
        browser.close()
