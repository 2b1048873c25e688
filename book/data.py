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
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Optional, Tuple

import torch

from .checks import allocating, positive_int, tensor_dims
from .files import atomic_write

__all__ = ["SHAKESPEARE_URL", "SHAKESPEARE_SHA256", "load_shakespeare", "shakespeare_split", "get_batch",
           "GLUE_DIR", "recorded_glue"]

SHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
FILENAME = "tinyshakespeare.txt"
DOWNLOAD_DEADLINE_S = 60.0   # the whole download (1.1 MB), not each read: a server that trickles bytes cannot hang it
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


def _download(url: str, deadline_s: float) -> bytes:
    """The bytes at `url`, read in chunks; TimeoutError once the whole download has taken `deadline_s` seconds
    (each read waits at most 15 s, so the overshoot stays under that)."""
    start = time.monotonic()
    chunks, size = [], 0
    with urllib.request.urlopen(url, timeout=min(15.0, deadline_s)) as r:
        read = getattr(r, "read1", None) or r.read   # read1: what has arrived, without waiting for a full chunk
        while True:
            if time.monotonic() - start > deadline_s:
                raise TimeoutError(f"the download took longer than its deadline of {deadline_s:g} s "
                                   f"({size:,} bytes arrived)")
            chunk = read(1 << 16)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)


def load_shakespeare(data_dir: Optional[str] = None, download: bool = True) -> str:
    """Return tiny Shakespeare as one string (1,115,394 characters).

    Looks in `data_dir`, then $BOOK_DATA_DIR, then the user cache; otherwise downloads it from
    SHAKESPEARE_URL (within DOWNLOAD_DEADLINE_S seconds in all), checks its sha256 and caches it (written beside,
    then renamed: never a half-written cache; a damaged cache file is downloaded again). Where the cache cannot be
    written, the verified text is returned anyway, with a warning. Without the file and without network it
    raises FileNotFoundError saying exactly where to put it.
    """
    if data_dir is not None and not isinstance(data_dir, (str, os.PathLike)):
        raise TypeError(f"data_dir must be a folder (a str or a Path) or None, got {type(data_dir).__name__}")
    folders = [Path(p) for p in (data_dir, os.environ.get("BOOK_DATA_DIR")) if p] + [cache_dir()]
    target = cache_dir() / FILENAME
    damaged = ""
    for folder in folders:
        if (folder / FILENAME).is_file():
            try:
                return _read_verified(folder / FILENAME)
            except ValueError:
                if folder / FILENAME != target or not download:
                    raise
                warnings.warn(f"{target} is damaged (sha256 mismatch): downloading it again", stacklevel=2)
                damaged = f" ({target} is damaged: sha256 mismatch)"
                break
    error = "download=False"
    if download:
        try:
            data = _download(SHAKESPEARE_URL, DOWNLOAD_DEADLINE_S)
            if _sha256(data) != SHAKESPEARE_SHA256:
                raise ValueError("downloaded file has the wrong sha256")
        except Exception as e:  # no network, proxy, deadline, bad checksum...
            error = f"{type(e).__name__}: {e}"
        else:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(target, data)
            except OSError as e:   # a read-only cache folder: the verified text is still good
                warnings.warn(f"tiny Shakespeare was downloaded and verified but could not be cached at {target} "
                              f"({type(e).__name__}: {e}); it will be downloaded again next time. To keep it, save "
                              f"it as {FILENAME} in a writable folder and set BOOK_DATA_DIR to that folder.",
                              stacklevel=2)
            return data.decode("utf-8")
    looked = ", ".join(str(f / FILENAME) for f in folders)
    raise FileNotFoundError(
        f"tiny Shakespeare not found (looked in: {looked}){damaged} and it could not be downloaded ({error}).\n"
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
    with allocating("(batch_size, context_len) windows of ids", batch_size=batch_size):
        starts = torch.randint(len(data) - context_len, (batch_size,), generator=generator)
        offsets = torch.arange(context_len)
        x = data[starts[:, None] + offsets]        # (B, T)
        y = data[starts[:, None] + offsets + 1]    # (B, T)
    if device is not None:
        try:
            device = torch.device(device)
        except (RuntimeError, TypeError):
            raise ValueError(f"device must be a torch.device or its name ('cpu', 'cuda', 'cuda:0', 'mps'), "
                             f"got {device!r}") from None
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
