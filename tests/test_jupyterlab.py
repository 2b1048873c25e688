"""A chapter opened in a live JupyterLab 4 (headless system Chromium): the prose shows numbers, not MyST markup.

JupyterLab renders markdown with its own CommonMark renderer, as Colab and GitHub do: a {glue:text} role or a
:::{dropdown} fence left in a cell would show raw here (tools/render.py writes them out). Slow: it starts a
Jupyter server on 127.0.0.1 and loads JupyterLab's bundle; needs a system Chromium (see tests/conftest.py).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from nbtools import CHAPTERS, is_solution

CHAPTER = CHAPTERS / "04_self_attention.ipynb"
GLUED = "1015.6"   # ch4_var_1024, written into the prose by the render step
READY_JS = """n => {
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-MarkdownCell')];
  return cells.length === n && cells.every(c => (c.querySelector('.jp-RenderedMarkdown') || {}).textContent);
}"""
PROSE_JS = """() => {
  const md = [...document.querySelectorAll('.jp-Notebook .jp-MarkdownCell .jp-RenderedMarkdown')];
  return {text: md.map(m => m.textContent).join('\\n'),   // textContent: closed <details> too
          details: [...document.querySelectorAll('.jp-RenderedMarkdown details')].map(d => [d.open,
                     (d.querySelector('summary') || {}).textContent]),
          hiddenInputs: document.querySelectorAll('.jp-CodeCell .jp-InputPlaceholder').length,
          hiddenOutputs: document.querySelectorAll('.jp-CodeCell .jp-OutputPlaceholder').length};
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """Base URL of a JupyterLab serving a copy of the chapter (no token; every cell attached, not windowed)."""
    root, home = tmp_path_factory.mktemp("lab"), tmp_path_factory.mktemp("lab-home")
    settings = home / "settings"
    shutil.copy(CHAPTER, root / CHAPTER.name)
    tracker = settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    port = free_port()
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
           f"--ServerApp.root_dir={root}", "--IdentityProvider.token=", "--ServerApp.password=",
           "--LabApp.news_url=", "--LabApp.extension_manager=readonly", "--allow-root"]
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings), JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"))   # nothing written outside the temporary folders
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + "api/status", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start: {server.stderr.read()[-2000:]}")
                time.sleep(0.5)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=20)


@pytest.mark.slow
def test_chapter_prose_renders_in_jupyterlab(jupyterlab, chromium):
    import nbformat

    cells = nbformat.read(str(CHAPTER), as_version=4).cells
    n_markdown = sum(c.cell_type == "markdown" for c in cells)
    page = chromium.new_page(viewport={"width": 1200, "height": 900})
    try:
        page.goto(jupyterlab + f"lab/tree/{CHAPTER.name}", wait_until="load")
        page.wait_for_function(READY_JS, arg=n_markdown, timeout=45000)
        prose = page.evaluate(PROSE_JS)
    finally:
        page.close()
    assert "{glue" not in prose["text"] and ":::{" not in prose["text"], "raw MyST markup shown in JupyterLab"
    assert GLUED in prose["text"], f"the glued value {GLUED} is not in the rendered prose"
    assert prose["details"] and all(d == [False, "Solution"] for d in prose["details"]), prose["details"]
    solutions = sum(c.cell_type == "code" and is_solution(c.source) for c in cells)
    assert prose["hiddenInputs"] >= solutions and prose["hiddenOutputs"] >= solutions, prose
