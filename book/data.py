"""The course corpus (tiny Shakespeare) and batches of it. Chapter 1.

Shape legend: B batch, T time (context_len).

One loader, one cache, one split: the first 90 % of characters train, the last 10 % validate
(the split nanoGPT uses, so results compare).
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import urllib.request
from pathlib import Path
from typing import Optional, Tuple

import torch

from .checks import positive_int, tensor_dims

__all__ = ["SHAKESPEARE_URL", "SHAKESPEARE_SHA256", "load_shakespeare", "shakespeare_split", "get_batch",
           "GLUE_DIR", "recorded_glue"]

SHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
FILENAME = "tinyshakespeare.txt"
# what each chapter glued when tools/execute.py last ran it, one <chapter stem>.json each (package data)
GLUE_DIR = Path(__file__).resolve().parent / "results" / "glue"


def cache_dir() -> Path:
    """The user cache folder for downloaded data (XDG_CACHE_HOME or ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "transformers-gap-by-gap"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_verified(path: Path) -> Optional[str]:
    data = path.read_bytes()
    if _sha256(data) != SHAKESPEARE_SHA256:
        raise ValueError(f"{path} is not the expected tiny Shakespeare file (sha256 mismatch); "
                         "delete it and let the loader download it again")
    return data.decode("utf-8")


def load_shakespeare(data_dir: Optional[str] = None, download: bool = True) -> str:
    """Return tiny Shakespeare as one string (1,115,394 characters).

    Looks in `data_dir`, then $BOOK_DATA_DIR, then the user cache; otherwise downloads it from
    SHAKESPEARE_URL, checks its sha256 and caches it. Without the file and without network it
    raises FileNotFoundError saying exactly where to put it.
    """
    if data_dir is not None and not isinstance(data_dir, (str, os.PathLike)):
        raise TypeError(f"data_dir must be a folder (a str or a Path) or None, got {type(data_dir).__name__}")
    folders = [Path(p) for p in (data_dir, os.environ.get("BOOK_DATA_DIR")) if p] + [cache_dir()]
    for folder in folders:
        if (folder / FILENAME).is_file():
            return _read_verified(folder / FILENAME)
    target = cache_dir() / FILENAME
    error = "download=False"
    if download:
        try:
            with urllib.request.urlopen(SHAKESPEARE_URL, timeout=30) as r:
                data = r.read()
            if _sha256(data) != SHAKESPEARE_SHA256:
                raise ValueError("downloaded file has the wrong sha256")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            return data.decode("utf-8")
        except Exception as e:  # no network, proxy, bad checksum...
            error = f"{type(e).__name__}: {e}"
    looked = ", ".join(str(f / FILENAME) for f in folders)
    raise FileNotFoundError(
        f"tiny Shakespeare not found (looked in: {looked}) and it could not be downloaded ({error}).\n"
        f"Download {SHAKESPEARE_URL}\nand save it as {target}, or save it as {FILENAME} in a folder "
        f"and set the environment variable BOOK_DATA_DIR to that folder.")


def shakespeare_split(text: Optional[str] = None, train_frac: float = 0.9) -> Tuple[str, str]:
    """Split the corpus into (train, val): first `train_frac` of the characters, then the rest."""
    if isinstance(train_frac, bool) or not isinstance(train_frac, (int, float)) or not 0.0 < train_frac < 1.0:
        raise ValueError(f"train_frac must be a number strictly between 0 and 1, got {train_frac!r}")
    if text is not None and not isinstance(text, str):
        raise TypeError(f"text must be a str (or None: the corpus), got {type(text).__name__}")
    if text == "":
        raise ValueError("text is empty: nothing to split")
    text = load_shakespeare() if text is None else text
    n = int(len(text) * train_frac)
    return text[:n], text[n:]


def get_batch(data: torch.Tensor, batch_size: int, context_len: int,
              generator: Optional[torch.Generator] = None, device=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Random windows of a 1-D token tensor: x (B, T) and the next tokens y (B, T).

    Example: data = [5, 6, 7, 8], context_len 2 -> x could be [[6, 7]] with y [[7, 8]].
    """
    tensor_dims(data, 1, "data (a 1-D tensor of token ids)")
    if data.dtype.is_floating_point or data.dtype.is_complex or data.dtype == torch.bool:
        raise TypeError(f"data must hold integer token ids (torch.long), got dtype {data.dtype}")
    positive_int(batch_size=batch_size, context_len=context_len)
    if len(data) <= context_len:
        raise ValueError(f"data has {len(data)} tokens, need more than context_len={context_len}")
    starts = torch.randint(len(data) - context_len, (batch_size,), generator=generator)
    offsets = torch.arange(context_len)
    x = data[starts[:, None] + offsets]        # (B, T)
    y = data[starts[:, None] + offsets + 1]    # (B, T)
    if device is not None:
        x, y = x.to(device), y.to(device)
    return x, y


def recorded_glue(chapter: str) -> dict:
    """{name: value} of everything `chapter` glued when tools/execute.py last executed it. Chapter 8.

    `chapter` is the notebook's stem, e.g. "03_bahdanau_attention". The executor records each glued value's text
    (book/results/glue/<chapter>.json, shipped with the package); it comes back as the Python value it was:
    "'92%'" as the string '92%', "{(3, 7): (0.92, 1.0)}" as that dict. A later chapter reads an earlier one's
    results this way, from data and not from printed text.
    """
    if not isinstance(chapter, str) or not chapter or "/" in chapter or chapter.endswith(".ipynb"):
        raise ValueError(f"chapter must be a notebook's stem such as '03_bahdanau_attention', got {chapter!r}")
    path = GLUE_DIR / f"{chapter}.json"
    if not path.is_file():
        known = sorted(p.stem for p in GLUE_DIR.glob("*.json"))
        raise FileNotFoundError(f"no recorded glue for chapter {chapter!r} ({path} is missing; recorded: {known}). "
                                f"Record it with: python tools/execute.py --record-only chapters/{chapter}.ipynb")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON ({e}): a truncated or hand-edited record? Record it again with: "
                         f"python tools/execute.py --record-only chapters/{chapter}.ipynb") from None
    if not isinstance(record, dict) or not isinstance(record.get("values"), dict):
        raise ValueError(f"{path} must hold an object with a 'values' object (name -> text), got "
                         f"{type(record).__name__}" + (f" with the keys {sorted(record)}" if isinstance(record, dict)
                                                       else ""))
    values = {}
    for name, text in record["values"].items():
        try:
            values[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):   # a value whose text is not a Python literal stays text
            values[name] = text
    return values
