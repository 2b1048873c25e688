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

Two more checks read the prose as the author wrote it (the MyST template, glue roles unrendered); tests/test_prose.py
runs them on the chapters on the learner's path (tests/test_learner_path.py's COVERED):
- typed_numbers: a number typed in the prose (not glued, not in math or code) must be a configuration value, a
  citation or a count the author chose, not a result. Allowed without a mark: a number written as a literal in the
  chapter's code (its notebook cells or book/chapters/chNN.py: a setting), a year after a citation ("et al., 2017"),
  a chapter, exercise or list number, and 0, 1, 2, 3, 4, 10 and 100. Any other typed number needs a mark in its cell,
  an HTML comment the reader never sees: `<!-- typed: 19 (the largest distance in 20 tokens); 0.38 (1 / 2.6) -->`.
- unasserted_verdicts: a sentence that compares (beats, ahead of, more than, below, ...) and cites a glued value
  must be backed by an assertion: one of its glue names is glued in a code cell that asserts (assert, claim(,
  check_...() or in a chapter-module function that calls claim(); otherwise the cell names the function or glue
  that asserts it: `<!-- asserted: check_and_glue_copy_back -->`.
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


TYPED_MARK = re.compile(r"<!--\s*typed:(.*?)-->", re.S)
ASSERTED_MARK = re.compile(r"<!--\s*asserted:(.*?)-->", re.S)
TYPED_NUM = re.compile(r"(?<![\w.\-])(\d(?:[\d,]*\d)?(?:\.\d+)?)(?![\w])")
FREE = {0.0, 1.0, 2.0, 3.0, 4.0, 10.0, 100.0}
CITATION = re.compile(r"(?:et\s+al\.,?|[A-Z][\w\-]+,?|&\s*[A-Z][\w\-]+,?|\()\s*$")
NAMED_ORDINAL = re.compile(r"(?:Chapters?|chapters?|Exercises?|exercises?|Part|part|Table|Figure|GPT-|BERT-|T5-)\s*$")
VERDICT = re.compile(r"\b(?:beats?|wins?|ahead of|behind|better than|worse than|faster than|slower than|more than|"
                     r"fewer than|less than|higher than|lower than|outperforms?|"
                     r"(?:below|above)\s+(?:GLUED|chance|\d))\b")
GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`]+)`")


def template(cell) -> str:
    """The markdown as its author wrote it: the MyST template tools/render.py keeps, else the source."""
    return cell.metadata.get("book", {}).get("template", cell.source)


def _prose_only(text: str) -> str:
    """The template without what is not typed prose: marks, math, glue roles, code, links, tags, headings, list
    numbers."""
    for pattern, repl in ((r"<!--.*?-->", " "), (r"\$\$.*?\$\$", " "), (r"\$[^$\n]*\$", " "),
                          (r"\{glue(?::\w+)?\}`[^`]*`", " "), (r"`[^`]*`", " "), (r"\]\([^)]*\)", "]"),
                          (r"<[^>]+>", " "), (r"(?m)^#+ .*$", " "), (r"(?m)^\s*(?:\*\*)?\d+\.", " ")):
        text = re.sub(pattern, repl, text, flags=re.S)
    return text


def _code_numbers(nb, module: Path) -> set:
    """Every number written as a literal in the chapter's code cells and its module (its settings)."""
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    if module.exists():
        sources.append(module.read_text(encoding="utf8"))
    found = set()
    for src in sources:
        for m in re.finditer(r"(?<![\w.])\d[\d_]*(?:\.\d+)?(?:[eE]-?\d+)?", src):
            try:
                found.add(float(m.group(0).replace("_", "")))
            except ValueError:
                continue
    return found


def _marked(text: str, mark: re.Pattern) -> list:
    return [item.strip() for m in mark.finditer(text) for item in m.group(1).split(";") if item.strip()]


def typed_numbers(path: Path) -> list:
    """Numbers typed in the prose that are neither settings, citations nor marked (see the module's docstring)."""
    nb = nbformat.read(path, as_version=4)
    allowed = _code_numbers(nb, ROOT / "book" / "chapters" / f"ch{path.stem[:2]}.py")
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        text = template(cell)
        marked = {float(re.match(r"[\d.,]+", item).group(0).rstrip(".").replace(",", ""))
                  for item in _marked(text, TYPED_MARK) if re.match(r"\d", item)}
        plain = _prose_only(text)
        for m in TYPED_NUM.finditer(plain):
            value = float(m.group(1).replace(",", ""))
            before = plain[max(0, m.start() - 30):m.start()]
            if value in FREE or value in allowed or value in marked or NAMED_ORDINAL.search(before):
                continue
            if re.fullmatch(r"(?:1[89]|20)\d\d", m.group(1)) and CITATION.search(before):
                continue
            context = " ".join(plain[max(0, m.start() - 40):m.end() + 20].split())
            out.append(f"{path.stem} cell {i}: typed number {m.group(1)} (not glued, not a setting): ...{context}...")
    return out


def _asserting_sources(nb, module: Path) -> list:
    """The code that asserts: notebook cells with assert / claim( / check_...( and the module's functions that call
    claim( or raise AssertionError, as (source, function name or None)."""
    out = [(c.source, None) for c in nb.cells if c.cell_type == "code"
           and re.search(r"\bassert\b|\bclaim\(|\bcheck_\w*\(", c.source)]
    if module.exists():
        src = module.read_text(encoding="utf8")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.FunctionDef):
                body = ast.get_source_segment(src, node) or ""
                if "claim(" in body or "AssertionError" in body:
                    out.append((body, node.name))
    return out


def unasserted_verdicts(path: Path) -> list:
    """Comparing sentences that cite a glued value with no assertion behind them (see the module's docstring)."""
    nb = nbformat.read(path, as_version=4)
    asserting = _asserting_sources(nb, ROOT / "book" / "chapters" / f"ch{path.stem[:2]}.py")
    functions = {name for _, name in asserting if name}
    prefixes = [re.findall(r"""f["'](ch\d+_\w+?)\{""", src) for src, _ in asserting]
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        text = template(cell)
        named = set(_marked(text, ASSERTED_MARK))
        bad = [n for n in named if n not in functions and not any(re.search(rf"\b{re.escape(n)}\b", src)
                                                                   for src, _ in asserting)]
        out += [f"{path.stem} cell {i}: asserted: {n} asserts nothing (no such asserting function or glue)"
                for n in bad]
        for sentence in re.split(r"(?<=[.!?])\s+", re.sub(r"<!--.*?-->", " ", text, flags=re.S)):
            glued = GLUE_ROLE.findall(sentence)
            if not glued or not VERDICT.search(_prose_only(GLUE_ROLE.sub(" GLUED ", sentence))) or named:
                continue
            # a glue name built by an f-string (f"ch5_copy_{s}_{n}") is found by its fixed head
            # or by a sibling glued in the same asserting code ("ch1_kn_bpc" beside "ch1_kn_n")
            heads = {g: re.split(r"_(?=[^_]*$)", g)[0] for g in glued}
            if any(f'"{g}"' in src or f"'{g}'" in src or f'"{heads[g]}_' in src
                   or any(g.startswith(head) for head in prefixes[k])
                   for k, (src, _) in enumerate(asserting) for g in glued):
                continue
            out.append(f"{path.stem} cell {i}: a comparison with no assertion behind it: "
                       f"{' '.join(sentence.split())[:140]}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", type=Path)
    ap.add_argument("--strict", action="store_true", help="also typed numbers and unasserted comparisons")
    args = ap.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
    found = [f for p in paths for f in findings(p)]
    if args.strict:
        found += [f for p in paths for f in typed_numbers(p) + unasserted_verdicts(p)]
    print("\n".join(found) or f"no finding in {len(paths)} chapters")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
