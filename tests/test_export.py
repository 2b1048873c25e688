"""book.export: a GPT to ONNX (logits and every layer's attention) and back, checked with onnxruntime."""
import json

import pytest
import torch
from torch.testing import assert_close

from book.export import FORMAT, export_gpt, git_commit, live_dir, load_exported, onnx_parity
from book.gpt import GPT, GPTConfig
from book.tokenizers import CharTokenizer

pytest.importorskip("onnxscript", reason="the exporter needs onnx and onnxscript (requirements.txt)")
pytest.importorskip("onnxruntime", reason="the parity check needs onnxruntime (requirements.txt)")

TEXT = "To be, or not to be: that is the question.\nWhether 'tis nobler"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny trained-looking GPT (random weights, every size different) exported once for the module."""
    torch.manual_seed(0)
    tok = CharTokenizer.from_text(TEXT)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, context_len=16, d_model=24, n_heads=3, n_layers=2)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)   # larger than init: logits and attention far from uniform
    path = tmp_path_factory.mktemp("export") / "tiny.onnx"
    meta = export_gpt(model, tok, path, provenance={"val_bits_per_char": 3.5, "recipe": {"steps": 0}})
    return model, tok, path, meta


def test_export_writes_onnx_and_json(tiny):
    model, tok, path, meta = tiny
    on_disk = json.loads(path.with_suffix(".json").read_text())
    assert on_disk == meta
    assert meta["format"] == FORMAT and meta["vocab"] == tok.itos and meta["onnx_bytes"] == path.stat().st_size
    assert meta["config"]["context_len"] == 16 and meta["params"] == sum(p.numel() for p in model.parameters())
    assert meta["provenance"] == {"val_bits_per_char": 3.5, "recipe": {"steps": 0}}


def test_onnxruntime_matches_pytorch(tiny):
    """Logits within 1e-4 and attention within 1e-5, at lengths 1, short, and the whole context (cropped)."""
    model, _, path, _ = tiny
    errors = onnx_parity(path, ["T", "To be", TEXT], model=model)
    assert errors["logits"] < 1e-4 and errors["attention"] < 1e-5, errors
    assert errors["positions"] == 1 + 5 + 16


def test_batch_and_shapes(tiny):
    import onnxruntime as ort

    model, _, path, meta = tiny
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ids = torch.randint(meta["config"]["vocab_size"], (3, 7))
    logits, attention = session.run(None, {"idx": ids.numpy()})
    assert logits.shape == (3, 7, meta["config"]["vocab_size"]) and attention.shape == (2, 3, 3, 7, 7)
    assert_close(torch.from_numpy(attention).sum(-1), torch.ones(2, 3, 3, 7))        # rows are distributions
    assert torch.from_numpy(attention).triu(1).abs().max() == 0                        # causal: no future key


def test_load_exported_gives_the_same_weights(tiny):
    model, _, path, _ = tiny
    back, meta = load_exported(path)
    for name, value in model.state_dict().items():
        assert torch.equal(back.state_dict()[name], value), name
    assert back.lm_head.weight is back.tok_emb.weight       # still tied


def test_load_exported_refuses_a_changed_file(tiny, tmp_path):
    _, _, path, _ = tiny
    copy = tmp_path / "copy.onnx"
    copy.write_bytes(path.read_bytes()[:-1] + b"\0")
    copy.with_suffix(".json").write_text(path.with_suffix(".json").read_text())
    with pytest.raises(ValueError, match="sha256 differs"):
        load_exported(copy)
    with pytest.raises(FileNotFoundError, match="export_gpt"):
        load_exported(tmp_path / "missing.onnx")


def test_too_large_export_is_refused_and_removed(tiny, tmp_path):
    model, tok, _, _ = tiny
    with pytest.raises(ValueError, match="more than max_bytes"):
        export_gpt(model, tok, tmp_path / "big.onnx", max_bytes=1000)
    assert not (tmp_path / "big.onnx").exists() and not (tmp_path / "big.json").exists()


@pytest.mark.parametrize("kwargs, error, message", [
    ({"model": torch.nn.Linear(2, 2)}, TypeError, "book.gpt.GPT"),
    ({"path": "model.pt"}, ValueError, "end in .onnx"),
    ({"tokenizer": object()}, TypeError, "character tokenizer"),
    ({"tokenizer": CharTokenizer.from_text("abc")}, ValueError, "vocab_size"),
    ({"provenance": ["x"]}, TypeError, "provenance must be a dict"),
    ({"provenance": {"when": object()}}, TypeError, "JSON values"),
    ({"max_bytes": 0}, ValueError, "max_bytes"),
])
def test_bad_arguments(tiny, tmp_path, kwargs, error, message):
    model, tok, _, _ = tiny
    args = {"model": model, "tokenizer": tok, "path": tmp_path / "m.onnx"} | kwargs
    with pytest.raises(error, match=message):
        export_gpt(args.pop("model"), args.pop("tokenizer"), args.pop("path"), **args)


def test_parity_refuses_unknown_characters(tiny):
    _, _, path, _ = tiny
    with pytest.raises(ValueError, match="outside the vocabulary"):
        onnx_parity(path, ["xyz~"])
    with pytest.raises(ValueError, match="non-empty list"):
        onnx_parity(path, "To be")


def test_live_dir_is_temporary_unless_named(tmp_path, monkeypatch):
    monkeypatch.delenv("BOOK_LIVE_DIR", raising=False)
    a = live_dir()
    assert a.is_dir() and a != tmp_path
    monkeypatch.setenv("BOOK_LIVE_DIR", str(tmp_path / "out"))
    assert live_dir() == tmp_path / "out" and (tmp_path / "out").is_dir()


def test_git_commit_outside_a_repository(tmp_path):
    assert git_commit(tmp_path) == {"commit": None, "dirty": None}
    here = git_commit()
    assert here["commit"] is None or len(here["commit"]) == 40


def test_export_and_load_leave_the_model_and_the_rng_alone(tiny, tmp_path):
    """A chapter exports mid-way: its model must stay where it is and later cells must draw the same numbers."""
    model, tok, path, _ = tiny
    model.train()
    torch.manual_seed(5)
    want = torch.rand(3)
    torch.manual_seed(5)
    export_gpt(model, tok, tmp_path / "again.onnx")
    load_exported(path)
    assert torch.equal(torch.rand(3), want)
    assert model.training
    model.eval()
