"""The package's layers go up, never down: a module imports only from lower layers.

positions and the KV cache -> attention (book.attention) and the FFN and norms (book.layers) -> blocks
(book.blocks) -> models (book.gpt, book.bert, book.transformer, ...) -> generation and training.
In particular no model imports the sampler (book.generate) or the trainers (book.train).

Above the whole core sit the chapter modules (book/chapters/chNN.py): each chapter's own tasks, helpers, figures,
recorded-result readers and exercise checkers. The core never imports one, a chapter module never imports another,
and a chapter notebook imports only its own. What lives where has a rule, checked here: a public definition of the
core serves two or more chapters, a benchmark, a tool, or other core code (or is named in GENERAL with the reason);
a chapter module's definitions serve its chapter.
"""
import ast
import json
import re
from functools import lru_cache

import pytest

from conftest import load_tool

DRAW = load_tool("draw_package")
ROOT = DRAW.ROOT
# core definitions that one chapter uses today and stay in the core, with the reason: each is a general tool of the
# package (a reader's own project would import it), not a part of one lesson
GENERAL = {
    "tokenizers.BPETokenizer": "a tokenizer, beside CharTokenizer",
    "widgets.slider2": "the two-slider form of widgets.slider",
    "export.export_gpt": "the live-model export (the site's live sections and tools/execute.py)",
    "export.onnx_parity": "the live-model export's parity check",
    "timing.time_it": "one of the measuring tools CONTRIBUTING prescribes",
    "timing.count_positions": "one of the counting tools CONTRIBUTING prescribes",
    "attention.sliding_window_mask": "a mask beside causal_mask and padding_mask",
    "attention.padding_mask": "the mask attention's shape error tells a reader to build",
    "results.stale_reason": "the provenance check that tests/test_recorded.py runs on every recorded table",
}


def test_every_module_has_a_layer():
    graph, level = DRAW.imports(), DRAW.level_of()
    assert set(graph) == set(level), f"modules without a layer in tools/draw_package.py: {set(graph) ^ set(level)}"


def test_imports_point_down_the_layers_only():
    upward = DRAW.upward_imports(DRAW.imports(), DRAW.level_of())
    assert not upward, "imports that do not point down a layer:\n" + "\n".join(upward)


def test_models_never_import_generation_or_training():
    graph = DRAW.imports()
    for model in ("gpt", "bert", "seq2seq", "transformer", "blocks", "attention", "layers", "kv_cache", "rnn"):
        assert not {"generate", "train"} & set(graph[model]), f"book.{model} imports {graph[model]}"


def test_the_check_catches_an_upward_import(tmp_path):
    """A model that imports the sampler, written three ways, is caught."""
    (tmp_path / "gpt.py").write_text("from .generate import generate\nfrom book.train import train_lm\n"
                                        "import book.layers\n")
    (tmp_path / "generate.py").write_text("from . import layers\n")
    graph = DRAW.imports(tmp_path)
    assert graph == {"generate": ["layers"], "gpt": ["generate", "layers", "train"]}
    upward = DRAW.upward_imports(graph, DRAW.level_of())
    assert len(upward) == 2 and all(u.startswith("gpt") for u in upward)


def test_drawing_exists():
    png = DRAW.ROOT / "docs" / "package.png"
    assert png.is_file() and png.stat().st_size > 10_000, "run: python tools/draw_package.py"


# ---- the chapter modules ------------------------------------------------------------------------------------
def test_the_core_never_imports_a_chapter_module():
    graph = DRAW.imports()
    bad = {m: [d for d in deps if d.startswith(DRAW.CHAPTERS)] for m, deps in graph.items()}
    assert not {m: d for m, d in bad.items() if d}, f"core modules that import a chapter module: {bad}"


def test_a_chapter_module_imports_no_other_chapter_module():
    chapters = DRAW.chapter_imports()
    assert len(chapters) == 10, f"expected book/chapters/ch01.py ... ch10.py, found {sorted(chapters)}"
    bad = {ch: [d for d in deps if d.startswith(DRAW.CHAPTERS)] for ch, deps in chapters.items()}
    assert not {c: d for c, d in bad.items() if d}, f"chapter modules that import another chapter's: {bad}"
    core = set(DRAW.level_of())
    assert all(set(deps) <= core for deps in chapters.values())


def test_the_check_catches_a_core_module_importing_a_chapter(tmp_path):
    """Three spellings of the same wrong import, and one chapter importing another."""
    (tmp_path / "gpt.py").write_text("from .chapters.ch07 import draw_gpt_stack\n")
    (tmp_path / "train.py").write_text("from book.chapters import ch01\n")
    (tmp_path / "plots.py").write_text("import book.chapters.ch04\n")
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "ch02.py").write_text("from ..rnn import RNN\nfrom .ch03 import x\n")
    graph = DRAW.imports(tmp_path)
    assert graph == {"gpt": ["chapters.ch07"], "plots": ["chapters.ch04"], "train": ["chapters.ch01"]}
    assert DRAW.chapter_imports(tmp_path) == {"ch02": ["chapters.ch03", "rnn"]}
    assert len(DRAW.upward_imports(graph, DRAW.level_of())) == 3


def _words(text: str) -> set:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


@lru_cache(maxsize=1)
def _notebook_code() -> dict:
    """{"ch01": the code cells of chapters/01_*.ipynb, joined}."""
    out = {}
    for nb in sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf8"))["cells"]
        out["ch" + nb.name[:2]] = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return out


def _definitions(path):
    """(name, node) of each public top-level function, class or constant of a module."""
    for node in ast.parse(path.read_text(encoding="utf8")).body:
        names = ([node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else
                 [t.id for t in node.targets if isinstance(t, ast.Name)] if isinstance(node, ast.Assign) else [])
        for name in names:
            if not name.startswith("_"):
                yield name, node


def _used_by(name: str, own: str) -> set:
    """Who uses `name` (defined in book/<own>.py): chapters "chNN", "benchmarks", "tools", "core" (other core
    code, the definition's own module included)."""
    users = {ch for ch, code in _notebook_code().items() if name in _words(code)}
    users |= {f.stem for f in (ROOT / "book" / "chapters").glob("ch*.py") if name in _words(f.read_text("utf8"))}
    for where, files in (("benchmarks", (ROOT / "benchmarks").rglob("*.py")), ("tools", (ROOT / "tools").glob("*.py")),
                         ("tools", (ROOT / "_ext").glob("*.py"))):
        if any(name in _words(f.read_text(encoding="utf8")) for f in files):
            users.add(where)
    for f in (ROOT / "book").glob("*.py"):
        if f.stem == own:
            tree = ast.parse(f.read_text(encoding="utf8"))
            others = [n for n in tree.body if getattr(n, "name", None) != name and not (
                isinstance(n, ast.Assign) and any(getattr(t, "id", "") in (name, "__all__") for t in n.targets))]
            used = {x.id if isinstance(x, ast.Name) else x.attr for n in others for x in ast.walk(n)
                    if isinstance(x, (ast.Name, ast.Attribute))}
        else:
            used = _words(re.sub(r'"""[\s\S]*?"""', "", f.read_text(encoding="utf8")))   # not in docstrings
        if name in used:
            users.add("core")
    return users


def test_core_definitions_serve_more_than_one_chapter():
    """A public core definition that only one chapter uses belongs in that chapter's module (or in GENERAL)."""
    single = []
    for f in sorted((ROOT / "book").glob("*.py")):
        for name, _ in _definitions(f):
            users = _used_by(name, f.stem)
            chapters = {u for u in users if u.startswith("ch")}
            if f"{f.stem}.{name}" in GENERAL:
                assert len(chapters) < 2 and not users - chapters, \
                    f"{f.stem}.{name} is used by {sorted(users)}: take it out of GENERAL"
            elif users == chapters and len(chapters) <= 1:
                single.append(f"book.{f.stem}.{name}: used by {sorted(users) or 'nothing'}")
    assert not single, ("core definitions that serve one chapter or none; move each to that chapter's module "
                        "(book/chapters/chNN.py), or name it in GENERAL with the reason:\n" + "\n".join(single))


def test_chapter_modules_serve_their_own_chapter_only():
    for f in sorted((ROOT / "book" / "chapters").glob("ch*.py")):
        code = _notebook_code()
        text = f.read_text(encoding="utf8")
        for name, node in _definitions(f):
            body = text.replace(ast.get_source_segment(text, node), "")
            users = {ch for ch, c in code.items() if name in _words(c)}
            assert users <= {f.stem}, f"book.chapters.{f.stem}.{name} is used by {sorted(users)}: move it to the core"
            assert f.stem in users or name in _words(body.replace("__all__", "")), \
                f"book.chapters.{f.stem}.{name} is not used by its chapter"
    for ch, c in _notebook_code().items():
        others = set(re.findall(r"book\.chapters(?:\.| import )(ch\d\d)", c)) - {ch}
        assert not others, f"chapter {ch} imports another chapter's module: {others}"


def test_every_subpackage_is_installed():
    """A non-editable install (Colab's) ships only the packages pyproject.toml lists."""
    tomllib = pytest.importorskip("tomllib")   # Python 3.11+
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "book").rglob("__init__.py")}
    assert found <= listed, f"packages missing from [tool.setuptools] packages: {sorted(found - listed)}"
