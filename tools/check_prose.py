#!/usr/bin/env python3
"""Prose that cannot drift from the numbers: checks of every chapter's rendered markdown (tests/test_prose.py).

    python tools/check_prose.py                       # every chapter; exit 1 on a finding
    python tools/check_prose.py chapters/05_positional_encoding.ipynb

It reads the markdown as the reader sees it (glued values rendered by tools/execute.py) and reports:
- a range whose two ends are the same number ("4.87–4.87", "11% to 11%"): a spread that did not happen;
- an impossible bound ("at least 100.0%", "more than 100 %", "below 0%");
- a code name in backticks that exists nowhere: a name with an underscore, a dot, brackets or an inner capital
  (`train_seq2seq`, `Decoder.step`, `GPT(idx, need_weights=True)`) each of whose parts is defined neither in the
  package `book`, nor in the chapter's code, nor in PyTorch, nor in the standard library; a renamed function leaves
  such a name behind. EXTERNAL lists the few names of other libraries the prose cites.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import re
import sys
from functools import lru_cache
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NUM = r"\d[\d,]*(?:\.\d+)?"
UNIT = r"(?:\s?%|\s?bits/char|\s?bits|\s?nats|\s?s\b|\s?×)?"
RANGE = re.compile(rf"(?<![\w.])({NUM})({UNIT})\s*(?:–|—|-|to)\s*({NUM})({UNIT})(?![\w.])")
IMPOSSIBLE = re.compile(r"\b(?:at least|more than|above|over|exceeds?)\s+(?:100(?:\.0+)?\s?%|1\.0+ of)|"
                        r"\b(?:at most|less than|below|under)\s+0(?:\.0+)?\s?%|\b-\d[\d.]*\s?% (?:accuracy|of)\b")
CODE = re.compile(r"`([A-Za-z_][\w.]*)(\([^`]*\))?`")
EXTERNAL = {"BertModel", "AutoModel", "AutoTokenizer", "DistributedDataParallel", "estimate_loss",
            "key_padding_mask", "tgt_key_padding_mask", "src_key_padding_mask", "norm_first", "is_causal",
            "scaled_dot_product_attention", "process_time", "perf_counter", "num_threads", "set_num_threads",
            "shakespeare_char", "train_iters", "block_size", "n_embd", "n_head", "n_layer"}


def _identifiers(tree: ast.AST) -> set:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            names.update(a.arg for a in node.args.args + node.args.kwonlyargs) if not isinstance(node, ast.ClassDef) \
                else None
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.update((node.asname or node.name).split("."))
            names.update(node.name.split("."))
    return names


@lru_cache(maxsize=1)
def known_names() -> frozenset:
    """Every identifier of the package, its tools and benchmarks, PyTorch's public namespaces and the stdlib."""
    import torch
    import torch.nn as nn

    names = set(dir(builtins)) | set(sys.stdlib_module_names) | EXTERNAL
    for folder in ("book", "benchmarks", "tools"):
        for path in (ROOT / folder).rglob("*.py"):
            names.add(path.stem)
            try:
                names |= _identifiers(ast.parse(path.read_text(encoding="utf8")))
            except SyntaxError:
                continue
    import importlib
    for name in ("torch", "torch.nn", "torch.nn.functional", "torch.optim", "torch.distributed", "torch.nn.parallel",
                 "torch.utils.data", "torch.utils.flop_counter", "torch.distributed.fsdp", "torch.utils"):
        try:
            names |= set(dir(importlib.import_module(name))) | set(name.split("."))
        except ImportError:
            continue
    for cls in (torch.Tensor, nn.Module, nn.Transformer, nn.MultiheadAttention, nn.TransformerEncoderLayer):
        names |= set(dir(cls))
    import time
    import math
    names |= set(dir(time)) | set(dir(math))
    return frozenset(names)


def _code_like(name: str, call: str) -> bool:
    return bool(call) or "_" in name or "." in name or re.search(r"[a-z][A-Z]|^[A-Z][a-z]+[A-Z]", name) is not None


def prose_cells(nb) -> list:
    """(cell index, rendered markdown) of a notebook's markdown cells."""
    return [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]


def findings(path: Path) -> list:
    nb = nbformat.read(path, as_version=4)
    code = set()
    for c in nb.cells:
        if c.cell_type == "code":
            try:
                code |= _identifiers(ast.parse("\n".join(line for line in c.source.splitlines()
                                                        if not line.lstrip().startswith(("%", "!")))))
            except SyntaxError:
                code |= set(re.findall(r"[A-Za-z_]\w*", c.source))
    known = known_names() | code
    out = []
    for i, text in prose_cells(nb):
        plain = re.sub(r"\$[^$]*\$", " ", text)                       # math is not a range of results
        for m in RANGE.finditer(plain):
            if m.group(1) == m.group(3) and m.group(2).strip() in ("", m.group(4).strip()):
                out.append(f"{path.stem} cell {i}: a range with equal ends: {m.group(0)!r}")
        for m in IMPOSSIBLE.finditer(plain):
            out.append(f"{path.stem} cell {i}: an impossible bound: {m.group(0)!r}")
        for m in CODE.finditer(text):
            name, call = m.group(1), m.group(2) or ""
            if not _code_like(name, call):
                continue
            parts = [p for p in name.split(".") if p]
            args = re.findall(r"([A-Za-z_]\w*)\s*=", call)
            missing = [p for p in parts + args if p not in known]
            if missing:
                out.append(f"{path.stem} cell {i}: `{name}{call}` names {', '.join(missing)}, defined nowhere")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", type=Path)
    args = ap.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
    found = [f for p in paths for f in findings(p)]
    print("\n".join(found) or f"no finding in {len(paths)} chapters")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
