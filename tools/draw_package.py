#!/usr/bin/env python3
"""The structure of the `book` package: its layers and who imports whom, drawn to docs/package.png.

    python tools/draw_package.py            # writes docs/package.png

Layers go up, never down: a module imports only from lower layers (tests/test_layering.py checks it).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "book"

# lowest first; the names say what each layer is for
LAYERS = [
    ("the reader's language", ["language"]),
    ("argument checks, safe writes", ["checks", "files"]),
    ("foundations", ["utils", "data", "results", "tokenizers", "tasks", "objectives", "plots"]),
    ("maths and counts", ["optim", "timing", "positional", "kv_cache", "decoding", "ngram", "widgets",
                          "diagrams", "quiz"]),
    ("attention and modules", ["attention", "layers", "rnn"]),
    ("blocks", ["blocks"]),
    ("models", ["gpt", "bert", "seq2seq", "transformer"]),
    ("generation and training", ["generate", "train", "distributed"]),
    ("pre-training", ["pretrain"]),
    ("the trained model live: export, kernel widget", ["export", "live"]),
]


def level_of() -> dict:
    return {m: i for i, (_, mods) in enumerate(LAYERS) for m in mods}


CHAPTERS = "chapters"   # book/chapters/chNN.py: each chapter's own code, above the whole core


def _book_imports(tree: ast.AST, in_chapters: bool) -> set:
    """The book modules a file imports, as core names ("attention") or chapter names ("chapters.ch04")."""
    deps = set()

    def add(parts, names):          # parts: the dotted path below `book`
        if not parts:
            deps.update(CHAPTERS + "." + n if n.startswith("ch") and in_chapters else n for n in names)
        elif parts[0] == CHAPTERS:
            deps.update([CHAPTERS + "." + parts[1]] if len(parts) > 1 else [CHAPTERS + "." + n for n in names])
        else:
            deps.add(parts[0])

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            parts = node.module.split(".") if node.module else []
            names = [a.name for a in node.names]
            if node.level == 0 and parts[:1] == ["book"]:
                add(parts[1:], names)
            elif node.level == 1 and in_chapters:       # a sibling chapter module
                add([CHAPTERS] + parts, names)
            elif node.level == 1 or (node.level == 2 and in_chapters):
                add(parts, names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("book."):
                    add(a.name.split(".")[1:], [])
    return deps


def imports(package: Path = PACKAGE) -> dict:
    """{module: sorted book modules it imports} for every book/*.py except __init__ (a chapter module as
    "chapters.chNN")."""
    graph = {}
    for f in sorted(Path(package).glob("*.py")):
        if f.stem == "__init__":
            continue
        graph[f.stem] = sorted(_book_imports(ast.parse(f.read_text(encoding="utf8")), False) - {f.stem})
    return graph


def chapter_imports(package: Path = PACKAGE) -> dict:
    """{chNN: sorted book modules it imports} for every book/chapters/chNN.py."""
    return {f.stem: sorted(_book_imports(ast.parse(f.read_text(encoding="utf8")), True) - {CHAPTERS + "." + f.stem})
            for f in sorted((Path(package) / CHAPTERS).glob("ch*.py"))}


def line_counts(package: Path = PACKAGE) -> dict:
    """Lines of code in the core (book/*.py) and in the chapter modules (book/chapters/*.py)."""
    count = lambda files: sum(len(f.read_text(encoding="utf8").splitlines()) for f in files)
    return {"core": count(Path(package).glob("*.py")), "chapters": count((Path(package) / CHAPTERS).glob("*.py"))}


def upward_imports(graph: dict, level: dict) -> list:
    """Every import that does not point down a layer, as text."""
    return [f"{m} (layer {level[m]}) imports {d} (layer {level.get(d, 'none: a chapter module')})"
            for m, deps in graph.items() for d in deps if level.get(d, len(LAYERS)) >= level[m]]


def draw(path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    graph, pos = imports(), {}
    chapters = chapter_imports()
    rows = LAYERS + [("each chapter's own code (book.chapters)", sorted(chapters))]
    width = 4.3 + 1.45 * max(len(mods) for _, mods in rows)   # 4.3: room for the longest layer name
    fig = Figure(figsize=(width, 6.0))
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, width)
    ax.set_ylim(-0.2, len(rows) + 0.5)
    ax.axis("off")
    ax.text(width / 2, len(rows) + 0.2, "the core (book/*.py) never imports a chapter module (book/chapters/*.py); "
            "a chapter module never imports another's", ha="center", fontsize=10, color="#333333")
    for i, (name, mods) in enumerate(rows):
        y = i + 0.4
        ax.text(0.1, y, name, va="center", ha="left", fontsize=10, color="#555555", style="italic")
        for j, m in enumerate(mods):
            x = 4.3 + j * 1.45
            pos[m] = (x, y)
            ax.add_patch(FancyBboxPatch((x - 0.6, y - 0.2), 1.2, 0.4, boxstyle="round,pad=0.02",
                                        fc="#e8f0fe", ec="#3367d6", lw=1.2))
            ax.text(x, y, m, ha="center", va="center", fontsize=10, family="monospace")
    for m, deps in graph.items():
        for d in deps:
            (x0, y0), (x1, y1) = pos[m], pos[d]
            ax.add_patch(FancyArrowPatch((x0, y0 - 0.2), (x1, y1 + 0.2), arrowstyle="-|>", mutation_scale=10,
                                         color="#888888", lw=0.9, connectionstyle="arc3,rad=0.08"))
    for ch, deps in chapters.items():   # lighter: a chapter module may import any core module
        for d in deps:
            (x0, y0), (x1, y1) = pos[ch], pos[d]
            ax.add_patch(FancyArrowPatch((x0, y0 - 0.2), (x1, y1 + 0.2), arrowstyle="-|>", mutation_scale=8,
                                         color="#c58a2c", alpha=0.25, lw=0.7, connectionstyle="arc3,rad=0.05"))
    ax.text(width / 2, -0.1, "an arrow A -> B: module A imports module B; every arrow points down a layer",
            ha="center", fontsize=9, color="#555555")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=160, metadata={"Software": None})
    return path


if __name__ == "__main__":
    out = draw(ROOT / "docs" / "package.png")
    print(f"wrote {out.relative_to(ROOT)}")
    sys.exit(0)
