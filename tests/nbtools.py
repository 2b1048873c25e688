"""Helpers for tests that read chapter notebooks."""
from __future__ import annotations

import math
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"


def chapter_paths():
    return sorted(CHAPTERS.glob("[0-9][0-9]_*.ipynb"))


def cells_tagged(path, tag: str):
    nb = nbformat.read(str(path), as_version=4)
    return [c for c in nb.cells if c.cell_type == "code" and tag in c.metadata.get("tags", [])]


def scratch_namespace(path) -> dict:
    """Exec the notebook's cells tagged `scratch` (the from-scratch definitions) in a fresh namespace."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    path = Path(path)
    if not path.is_absolute():
        path = CHAPTERS / path
    cells = cells_tagged(path, "scratch")
    if not cells:
        raise AssertionError(f"{path.name} has no cells tagged 'scratch'")
    ns = {"torch": torch, "nn": nn, "F": F, "math": math}
    for cell in cells:
        exec(compile(cell.source, f"{path.name}:scratch", "exec"), ns)
    return ns


def repository_url() -> str:
    """The repository URL, from its one home: _config.yml."""
    import yaml

    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def colab_setup_source(url: str) -> str:
    """The exact first cell every chapter must start with (hidden on the site, a no-op outside Colab)."""
    return ("# Colab setup: installs the course package from the repository (does nothing elsewhere).\n"
            "import sys\n"
            "if \"google.colab\" in sys.modules:\n"
            "    import subprocess\n"
            f"    subprocess.run([sys.executable, \"-m\", \"pip\", \"install\", \"-q\", \"git+{url}@main\"], check=True)")


def text_outputs(nb) -> list:
    """Every text output of a notebook (streams and text/* data), in order: what nbval compares."""
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                out.append(o["text"])
            for mime, value in o.get("data", {}).items():
                if mime.startswith("text/"):
                    out.append(value)
    return out
