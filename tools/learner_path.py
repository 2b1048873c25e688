#!/usr/bin/env python3
"""How a chapter reads: main-path words, visible code, and lines too wide, per chapter (tests/test_learner_path.py).

    python tools/learner_path.py                 # one row per chapter
    python tools/learner_path.py chapters/01_next_token.ipynb --details

The main path is what a learner needs for the next chapter. It leaves out the optional deep dives (a section whose
heading starts "Deep dive (optional)", folded on the website by _ext/deep_dive.py) and the exercises (the
"Exercises" section). Its words are counted in the markdown cells as the reader sees them (glued values rendered;
math, HTML tags and link targets left out). A visible code cell is one the website shows (not removed, not hidden,
not a collapsed solution): each should teach in at most MAX_CELL_LINES lines. Every printed line (streams and text
results, of any cell) should fit in MAX_OUTPUT_CHARS characters.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
MAX_MAIN_WORDS = 3000
MAX_CELL_LINES = 20
MAX_OUTPUT_CHARS = 100
DEEP_DIVE = "Deep dive (optional)"
HIDDEN = {"remove-cell", "remove-input", "hide-input", "hide-cell"}
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_WORD = re.compile(r"[^\W_][\w'’.,%/-]*")


def _plain(markdown: str) -> str:
    """The markdown's reading text: no math, HTML tags, link targets or code fences."""
    text = re.sub(r"<!--.*?-->", " ", markdown, flags=re.S)                # marks for the checks, never shown
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\$[^$\n]+\$", " x ", text)                   # inline math reads as one word
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return text


def segments(nb) -> list:
    """(cell index, text, 'main' | 'deep' | 'exercises') for every cell, a markdown cell split at its headings:
    which part of the chapter each piece belongs to."""
    out, kind, level = [], "main", None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            out.append((i, "", kind))
            continue
        piece = []
        for line in cell.source.splitlines():
            m = _HEADING.match(line.strip())
            if m:
                depth, title = len(m.group(1)), m.group(2).strip()
                new = ("deep", depth) if title.startswith(DEEP_DIVE) else \
                      ("exercises", depth) if title.lower().startswith("exercises") else \
                      ("main", None) if level is None or depth <= level else (kind, level)
                if new != (kind, level):
                    out.append((i, "\n".join(piece), kind))
                    piece, (kind, level) = [], new
            piece.append(line)
        out.append((i, "\n".join(piece), kind))
    return out


def visible_code(cell) -> bool:
    tags = set(cell.metadata.get("tags", []))
    return cell.cell_type == "code" and not (tags & HIDDEN) and not cell.source.lstrip().startswith("#@title")


def output_lines(cell) -> list:
    """The text lines a cell prints (streams, text/plain results)."""
    lines = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            lines += "".join(out.get("text", "")).splitlines()
        elif out.get("output_type") in ("execute_result", "display_data") and "text/html" not in out.get("data", {}):
            lines += "".join(out.get("data", {}).get("text/plain", "")).splitlines()
    return lines


def measure(path: Path) -> dict:
    nb = nbformat.read(path, as_version=4)
    words = {"main": 0, "deep": 0, "exercises": 0}
    for _, text, kind in segments(nb):
        words[kind] += len(_WORD.findall(_plain(text)))
    long_cells, wide, code_lines = [], [], 0
    for i, cell in enumerate(nb.cells):
        if visible_code(cell):
            n = len(cell.source.splitlines())
            code_lines += n
            if n > MAX_CELL_LINES:
                long_cells.append((i, n))
        if cell.cell_type == "code" and "remove-output" not in cell.metadata.get("tags", []):   # what a reader sees
            wide += [(i, len(line)) for line in output_lines(cell) if len(line) > MAX_OUTPUT_CHARS]
    return {"chapter": path.stem, "main_words": words["main"], "deep_words": words["deep"],
            "exercise_words": words["exercises"], "visible_code_lines": code_lines, "long_cells": long_cells,
            "wide_lines": wide}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", type=Path)
    ap.add_argument("--details", action="store_true", help="list the long cells and wide lines")
    args = ap.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
    print(f"{'chapter':24s} {'main':>5s} {'deep':>5s} {'exer.':>5s} {'code':>5s} {'>20':>4s} {'wide':>5s}")
    for p in paths:
        m = measure(p)
        print(f"{m['chapter']:24s} {m['main_words']:5d} {m['deep_words']:5d} {m['exercise_words']:5d} "
              f"{m['visible_code_lines']:5d} {len(m['long_cells']):4d} {len(m['wide_lines']):5d}")
        if args.details:
            for i, n in m["long_cells"]:
                print(f"    cell {i}: {n} lines")
            for i, n in m["wide_lines"]:
                print(f"    cell {i}: a printed line of {n} characters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
