"""A trained GPT, exported for the browser: ONNX with its logits and every layer's attention. Chapter 7.

    meta = export_gpt(model, tok, "ch07_gpt.onnx", provenance={"val_bits_per_char": 2.452, ...})
    model, meta = load_exported("ch07_gpt.onnx")          # the weights back, in the package's GPT
    errors = onnx_parity("ch07_gpt.onnx", ["To be, or"])  # onnxruntime against PyTorch, max |difference|

`export_gpt` writes two files: NAME.onnx, made by PyTorch's exporter (`torch.onnx.export`, needs the `onnx` and
`onnxscript` packages), with one input `idx` (B, T) of token ids (int64, 1 <= T <= context_len) and two outputs,
`logits` (B, T, V) and `attention` (L, B, H, T, T), every layer's attention weights; and NAME.json, what a
reader of the file needs: the vocabulary (one character per id), the model's config, and the provenance given
(commit, recipe, validation bits/char). The website's live section (`_ext/live_gpt.js`) runs the pair with ONNX
Runtime Web. The weights keep their PyTorch names in the file, so `load_exported` rebuilds the same `GPT`:
tests compare the file with the current model code that way.
"""
from __future__ import annotations

import dataclasses
import datetime
import contextlib
import copy
import hashlib
import io
import json
import logging
import os
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Optional, Sequence, Union

import torch
import torch.nn as nn

from .checks import positive_int
from .files import write_together
from .gpt import GPT, GPTConfig

__all__ = ["export_gpt", "load_exported", "onnx_parity", "export_onnx", "read_meta", "read_weights",
           "example_outputs", "can_export", "git_commit", "live_dir", "LIVE_DIR", "MAX_BYTES", "FORMAT"]

LIVE_DIR = Path(__file__).resolve().parent / "results" / "live"   # the committed export (package data)
MAX_BYTES = 5_000_000          # the .onnx and the .json together: a page's download, kept small
FORMAT = "book-live-gpt/1"     # the JSON's layout; _ext/live_gpt.js checks it


class _LogitsAndMaps(nn.Module):
    """idx (B, T) -> (logits (B, T, V), attention (L, B, H, T, T)): the two outputs of the exported graph."""

    def __init__(self, gpt: GPT):
        super().__init__()
        self.gpt = gpt

    def forward(self, idx: torch.Tensor):
        logits, maps = self.gpt(idx, need_weights=True)
        return logits, torch.stack(maps)


def live_dir() -> Path:
    """Where a chapter writes its export: $BOOK_LIVE_DIR, else a fresh temporary folder, so test and smoke runs never
    overwrite the committed file. tools/execute.py, writing the notebooks, sets it to a temporary folder of its own
    and moves what the chapter exported there into LIVE_DIR only once the whole notebook ran and was written."""
    value = os.environ.get("BOOK_LIVE_DIR", "").strip()
    path = Path(value) if value else Path(tempfile.mkdtemp(prefix="book-live-"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def git_commit(cwd: Optional[Path] = None) -> dict:
    """{"commit": HEAD's hash or None (no git), "dirty": uncommitted changes to tracked files?}."""
    cwd = Path(cwd) if cwd is not None else Path(__file__).resolve().parent
    try:
        run = lambda *a: subprocess.run(["git", *a], cwd=cwd, capture_output=True, text=True, timeout=10)
        head = run("rev-parse", "HEAD")
        if head.returncode != 0:
            return {"commit": None, "dirty": None}
        dirty = bool(run("status", "--porcelain", "--untracked-files=no").stdout.strip())
        return {"commit": head.stdout.strip(), "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def _vocab(tokenizer, vocab_size: int) -> list:
    itos = getattr(tokenizer, "itos", None)
    if not isinstance(itos, (list, tuple)) or not all(isinstance(c, str) and len(c) == 1 for c in itos):
        raise TypeError(f"tokenizer must be a character tokenizer with an `itos` list of single characters "
                        f"(book.tokenizers.CharTokenizer), got {type(tokenizer).__name__}")
    if len(itos) != vocab_size:
        raise ValueError(f"the tokenizer has {len(itos)} characters but the model's vocab_size is {vocab_size}")
    return list(itos)


def _json_name(path: Path) -> Path:
    return path.with_suffix(".json")


def export_onnx(module: nn.Module, example_inputs: tuple, path: Union[str, Path], *, input_names: Sequence[str],
                output_names: Sequence[str], dynamic_shapes: dict, meta: dict,
                max_bytes: int = MAX_BYTES, verify=None, tolerance: float = 1e-4) -> dict:
    """Export `module` (a float32 CPU copy in eval mode) to `path` (.onnx) and `meta` to the .json beside it.

    The export every live section uses (Chapters 4, 7, 8): PyTorch's exporter, the weights kept under their PyTorch
    names (read_weights reads them back), checked by onnx.checker. The JSON gets meta's fields (its "format" names
    the layout, which the page's script checks) plus the file's name, size, sha256 and the export's versions.
    verify: a list of input tuples (default: the example's) on which ONNX Runtime must give the module's outputs
    within `tolerance` (max |difference|, kept in the JSON as "parity"); False skips it (no onnxruntime).
    Raises ValueError when the two files together exceed max_bytes. Both files are made and checked before either
    is written, then written together (each beside its target, then renamed over it): a failed export leaves a
    previous pair at `path` as it was. Returns the JSON's content.
    """
    path = Path(path)
    if path.suffix != ".onnx":
        raise ValueError(f"path must end in .onnx, got {str(path)!r}")
    if not isinstance(meta, dict) or not isinstance(meta.get("format"), str):
        raise TypeError("meta must be a dict with a 'format' string (the JSON's layout)")
    positive_int(max_bytes=max_bytes)
    try:
        json.dumps(meta)
    except TypeError as err:
        raise TypeError(f"meta must hold JSON values only (str, numbers, lists, dicts): {err}") from None
    import onnx   # the exporter's own dependency: fail early with the package's name

    path.parent.mkdir(parents=True, exist_ok=True)
    original = next(module.parameters())
    cpu = copy.deepcopy(module).float().cpu().eval()   # a copy: the caller's model and the RNG stay as they were
    quiet = logging.getLogger("torch.onnx")   # its notes (e.g. "torchvision is not installed") are not ours
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="book-export-") as scratch:
        staged = Path(scratch) / path.name
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():   # the exporter's progress lines
            warnings.simplefilter("ignore")
            try:
                torch.onnx.export(cpu, tuple(example_inputs), str(staged), input_names=list(input_names),
                                  output_names=list(output_names), dynamic_shapes=dynamic_shapes, dynamo=True,
                                  optimize=False, external_data=False, verbose=False)
            finally:
                quiet.setLevel(level)
        onnx.checker.check_model(str(staged))
        graph = staged.read_bytes()
        parity = (_parity(cpu, staged, verify or [example_inputs], list(input_names), tolerance)
                  if verify is not False else None)
    meta = {"format": meta["format"], "onnx": path.name, "onnx_bytes": len(graph),
            "onnx_sha256": hashlib.sha256(graph).hexdigest(),
            **{k: v for k, v in meta.items() if k != "format"},
            "params": sum(p.numel() for p in cpu.parameters()),
            **({"parity": parity} if parity is not None else {}),
            "exported": {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                         "torch": torch.__version__, "onnx": onnx.__version__, "dtype_trained": str(original.dtype),
                         "device_trained": original.device.type}}
    text = json.dumps(meta, indent=1, ensure_ascii=False) + "\n"
    total = len(graph) + len(text.encode("utf8"))
    if total > max_bytes:
        raise ValueError(f"the export takes {total:,} bytes, more than max_bytes={max_bytes:,}: "
                         "a smaller model, or a larger limit (nothing was written; a previous export stays)")
    write_together({path: graph, _json_name(path): text})
    return meta


def _parity(module: nn.Module, staged: Path, inputs: list, names: list, tolerance: float = 1e-4) -> dict:
    """Max |difference| of every output between ONNX Runtime on the staged file and `module`, over `inputs`."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(staged), providers=["CPUExecutionProvider"])
    worst = {}
    with torch.no_grad():
        for args in inputs:
            want = module(*args)
            got = session.run(None, {n: a.numpy() for n, a in zip(names, args)})
            for out, w, g in zip(session.get_outputs(), want, got):
                worst[out.name] = max(worst.get(out.name, 0.0), (torch.from_numpy(g) - w).abs().max().item())
    bad = {k: v for k, v in worst.items() if not v <= tolerance}
    if bad:
        raise ValueError(f"ONNX Runtime differs from PyTorch by more than {tolerance}: {bad} (nothing was written)")
    return {k: float(f"{v:.2e}") for k, v in worst.items()}


def can_export() -> bool:
    """Whether the exporter's packages (onnx, onnxscript, onnxruntime) are installed. When tools/execute.py writes a
    chapter (BOOK_LIVE_DIR set) the website needs the export: then their absence raises, naming the install."""
    import importlib.util

    if all(importlib.util.find_spec(m) for m in ("onnx", "onnxscript", "onnxruntime")):
        return True
    if os.environ.get("BOOK_LIVE_DIR"):
        raise RuntimeError("exporting for the website needs onnx, onnxscript and onnxruntime: "
                           "pip install -r requirements.txt")
    return False


def read_meta(path: Union[str, Path], format: str, writer: str = "export_onnx") -> dict:
    """The JSON beside an export at `path`, checked: its format is `format` and it describes this very .onnx.
    writer: the function that writes such exports, named when the files are missing."""
    path = Path(path)
    if not path.is_file() or not _json_name(path).is_file():
        raise FileNotFoundError(f"{path} and {_json_name(path).name} beside it are needed (written by {writer})")
    meta = json.loads(_json_name(path).read_text(encoding="utf8"))
    if meta.get("format") != format:
        raise ValueError(f"{_json_name(path)}: format {meta.get('format')!r}, expected {format!r}")
    if hashlib.sha256(path.read_bytes()).hexdigest() != meta["onnx_sha256"]:
        raise ValueError(f"{path} is not the file its JSON describes (sha256 differs): export both again")
    return meta


def read_weights(path: Union[str, Path], model: nn.Module, prefix: str = "", tied: Optional[dict] = None) -> nn.Module:
    """Load the weights an export keeps (its initializers, named as in PyTorch after `prefix`) into `model`.

    tied: {name: the name it is stored under} for weights stored once (a tied output matrix). Raises ValueError
    naming the first weight the file lacks: it was exported from other model code. Returns the model, in eval mode.
    """
    import onnx
    from onnx import numpy_helper

    found = {init.name.removeprefix(prefix): torch.from_numpy(numpy_helper.to_array(init).copy())
             for init in onnx.load(str(path)).graph.initializer if init.name.startswith(prefix)}
    state = {}
    for name in model.state_dict():
        source = name if name in found else (tied or {}).get(name)
        if source not in found:
            raise ValueError(f"{path} holds no weight {name!r}: it was exported from other model code")
        state[name] = found[source]
    model.load_state_dict(state)
    return model.eval()


def example_outputs(outputs: dict, digits: int = 4) -> dict:
    """A live section's precomputed example (shown while its model loads): tensors as flat lists, rounded."""
    def flat(v):
        if isinstance(v, torch.Tensor):
            return [round(x, digits) for x in v.detach().float().cpu().flatten().tolist()]
        return v
    return {k: flat(v) for k, v in outputs.items()}


def export_gpt(model: GPT, tokenizer, path: Union[str, Path], *, provenance: Optional[dict] = None,
               max_bytes: int = MAX_BYTES, example: Optional[str] = None) -> dict:
    """Export `model` to `path` (.onnx) and its vocabulary, config and provenance to the .json beside it.

    The graph takes any batch size and any length 1..context_len. example: a text whose outputs the JSON keeps
    (the page shows them while the model loads). Raises ValueError when the two files together exceed max_bytes;
    a failed export leaves a previous pair at `path` as it was (export_onnx). Returns the JSON's content.
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a book.gpt.GPT, got {type(model).__name__}")
    if provenance is not None and not isinstance(provenance, dict):
        raise TypeError(f"provenance must be a dict of JSON values or None, got {type(provenance).__name__}")
    cfg = model.config
    vocab = _vocab(tokenizer, cfg.vocab_size)
    meta = {"format": FORMAT,
            "inputs": {"idx": "int64 (B, T), 1 <= T <= context_len"},
            "outputs": {"logits": "float32 (B, T, V)", "attention": "float32 (L, B, H, T, T)"},
            "vocab": vocab, "config": dataclasses.asdict(cfg), "provenance": provenance or {}}
    if example is not None:
        stoi = {c: i for i, c in enumerate(vocab)}
        if not isinstance(example, str) or not example or set(example) - stoi.keys():
            raise ValueError(f"example must be a non-empty text of the vocabulary's characters, got {example!r}")
        ids = torch.tensor([[stoi[c] for c in example[-cfg.context_len:]]])
        with torch.no_grad():
            logits, attention = _LogitsAndMaps(copy.deepcopy(model).float().cpu().eval())(ids)
        meta["example"] = {"text": example, **example_outputs({"logits": logits[0, -1], "attention": attention})}
    dims = {"idx": {0: torch.export.Dim("B", min=1, max=4096),
                    1: torch.export.Dim("T", min=1, max=cfg.context_len)}}
    example_ids = torch.zeros(1, min(4, cfg.context_len), dtype=torch.long)
    return export_onnx(_LogitsAndMaps(model), (example_ids,), path, input_names=["idx"],
                       output_names=["logits", "attention"], dynamic_shapes={"idx": dims["idx"]}, meta=meta,
                       max_bytes=max_bytes)


def load_exported(path: Union[str, Path]):
    """(GPT with the file's weights in eval mode, the JSON's content) for an export written by export_gpt.

    The weights are read from the ONNX file's initializers, which keep their PyTorch names; a tied output
    matrix is stored once. Raises ValueError when the file does not match the JSON or the current GPT code.
    """
    meta = read_meta(path, FORMAT, writer="export_gpt")
    with torch.random.fork_rng(devices=[]):   # building a model draws initial weights: leave the caller's RNG alone
        model = GPT(GPTConfig(**meta["config"]))
    tied = {"tok_emb.weight": "lm_head.weight", "lm_head.weight": "tok_emb.weight"} if model.config.tie_weights else {}
    return read_weights(path, model, prefix="gpt.", tied=tied), meta


@torch.no_grad()
def onnx_parity(path: Union[str, Path], texts: Sequence[str], model: Optional[GPT] = None) -> dict:
    """Max |difference| between onnxruntime and PyTorch on each text (its last context_len characters).

    model: the PyTorch GPT to compare with (default: the weights read back by load_exported). Returns
    {"logits": max error, "attention": max error, "positions": characters compared}.
    """
    import onnxruntime as ort

    reloaded, meta = load_exported(path)
    model = reloaded if model is None else model
    if isinstance(texts, str) or not texts:
        raise ValueError("texts must be a non-empty list of strings")
    stoi = {c: i for i, c in enumerate(meta["vocab"])}
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ctx = meta["config"]["context_len"]
    worst = {"logits": 0.0, "attention": 0.0, "positions": 0}
    device = next(model.parameters()).device
    for text in texts:
        unknown = sorted(set(text) - stoi.keys())
        if unknown or not text:
            raise ValueError(f"text {text!r} is empty or has characters outside the vocabulary: {unknown}")
        ids = torch.tensor([[stoi[c] for c in text[-ctx:]]])
        logits, attention = session.run(None, {"idx": ids.numpy()})
        ref_logits, maps = model(ids.to(device), need_weights=True)
        worst["logits"] = max(worst["logits"], (torch.from_numpy(logits) - ref_logits.cpu()).abs().max().item())
        worst["attention"] = max(worst["attention"],
                                 (torch.from_numpy(attention) - torch.stack(maps).cpu()).abs().max().item())
        worst["positions"] += ids.shape[1]
    return worst
