"""The package's layers go up, never down: a module imports only from lower layers.

positions and the KV cache -> attention (book.attention) and the FFN and norms (book.layers) -> blocks
(book.blocks) -> models (book.gpt, book.bert, book.transformer, ...) -> generation and training.
In particular no model imports the sampler (book.generate) or the trainers (book.train).
"""
from conftest import load_tool

DRAW = load_tool("draw_package")


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
