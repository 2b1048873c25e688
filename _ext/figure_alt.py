"""Sphinx extension of the course website: each notebook figure's alt text, from the notebook's own output.

book.plots shows every figure as an image/png output whose metadata carries its alt text, made from the data it
draws: {"image/png": {"width": 360, "alt": "..."}} (the convention of IPython.display.Image and nbconvert).
myst-nb 1.x reads only width and height from an output's metadata, so its <img> would carry the file's path as
alt text. It names each image file by the sha256 of the PNG's bytes; after a notebook is read (`doctree-read`),
this gives each image node whose file is one of the notebook's PNG outputs (shown inline or glued) that output's
alt. An output without alt metadata keeps myst-nb's default, so tests/test_alt_text.py checks the notebooks.
"""
from __future__ import annotations

import hashlib
import json
from binascii import a2b_base64
from pathlib import Path

from docutils import nodes


def output_alts(notebook: dict) -> dict:
    """sha256 hex of each PNG output's bytes -> its alt text (outputs with alt metadata only)."""
    alts = {}
    for cell in notebook.get("cells", []):
        for out in cell.get("outputs", []):
            data = out.get("data", {}).get("image/png")
            alt = ((out.get("metadata") or {}).get("image/png") or {}).get("alt")
            if data and isinstance(alt, str) and alt.strip():
                raw = "".join(data) if isinstance(data, list) else data
                alts[hashlib.sha256(a2b_base64(raw)).hexdigest()] = alt.strip()
    return alts


def apply_alts(doctree, alts: dict) -> int:
    """Set the alt of each image node whose file is named after a PNG output with alt text; how many were set."""
    done = 0
    for node in doctree.findall(nodes.image):
        digest = Path(node.get("uri", "")).name.split(".")[0]
        if digest in alts:
            node["alt"] = alts[digest]
            done += 1
    return done


def add_figure_alts(app, doctree) -> None:
    source = Path(app.env.doc2path(app.env.docname))
    if source.suffix == ".ipynb":
        apply_alts(doctree, output_alts(json.loads(source.read_text(encoding="utf8"))))


def setup(app):
    app.connect("doctree-read", add_figure_alts)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
