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
    ("argument checks, safe writes", ["checks", "files"]),
    ("foundations", ["utils", "data", "results", "tokenizers", "tasks", "objectives", "plots"]),
    ("maths and counts", ["optim", "timing", "positional", "kv_cache", "decoding", "ngram", "widgets",
                          "diagrams"]),
    ("attention and modules", ["attention", "layers", "rnn"]),
    ("blocks and exercises", ["blocks", "exercises"]),
    ("models", ["gpt", "bert", "seq2seq", "transformer"]),
    ("generation and training", ["generate", "train", "distributed"]),
    ("pre-training and fine-tuning", ["pretrain", "pretrained"]),
    ("the trained model live: export, kernel widget", ["export", "live"]),
]


def level_of() -> dict:
    return {m: i for i, (_, mods) in enumerate(LAYERS) for m in mods}


def imports(package: Path = PACKAGE) -> dict:
    """{module: sorted book modules it imports} for every book/*.py except __init__."""
    graph = {}
    for f in sorted(Path(package).glob("*.py")):
        if f.stem == "__init__":
            continue
        deps = set()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1:
                    deps |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
                elif node.module and node.module.split(".")[0] == "book":
                    parts = node.module.split(".")
                    deps |= {parts[1]} if len(parts) > 1 else {a.name for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[1] for a in node.names if a.name.startswith("book.")}
        graph[f.stem] = sorted(deps - {f.stem})
    return graph


def upward_imports(graph: dict, level: dict) -> list:
    """Every import that does not point down a layer, as text."""
    return [f"{m} (layer {level[m]}) imports {d} (layer {level[d]})"
            for m, deps in graph.items() for d in deps if level[d] >= level[m]]


def draw(path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    graph, pos = imports(), {}
    width = 2.9 + 1.45 * max(len(mods) for _, mods in LAYERS)   # 2.9: room for the longest layer name
    fig = Figure(figsize=(width, 5.2))
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, width)
    ax.set_ylim(-0.2, len(LAYERS) + 0.1)
    ax.axis("off")
    for i, (name, mods) in enumerate(LAYERS):
        y = i + 0.4
        ax.text(0.1, y, name, va="center", ha="left", fontsize=10, color="#555555", style="italic")
        for j, m in enumerate(mods):
            x = 2.9 + j * 1.45
            pos[m] = (x, y)
            ax.add_patch(FancyBboxPatch((x - 0.6, y - 0.2), 1.2, 0.4, boxstyle="round,pad=0.02",
                                        fc="#e8f0fe", ec="#3367d6", lw=1.2))
            ax.text(x, y, m, ha="center", va="center", fontsize=10, family="monospace")
    for m, deps in graph.items():
        for d in deps:
            (x0, y0), (x1, y1) = pos[m], pos[d]
            ax.add_patch(FancyArrowPatch((x0, y0 - 0.2), (x1, y1 + 0.2), arrowstyle="-|>", mutation_scale=10,
                                         color="#888888", lw=0.9, connectionstyle="arc3,rad=0.08"))
    ax.text(width / 2, -0.1, "an arrow A -> B: module A imports module B; every arrow points down a layer",
            ha="center", fontsize=9, color="#555555")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=160, metadata={"Software": None})
    return path


if __name__ == "__main__":
    out = draw(ROOT / "docs" / "package.png")
    print(f"wrote {out.relative_to(ROOT)}")
    sys.exit(0)
