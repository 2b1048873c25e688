"""Writing a committed file so that a failure never leaves it half-written: write beside, then rename.

    atomic_write("book/results/x.csv", text)                  # str (UTF-8) or bytes
    write_together({"m.onnx": onnx_bytes, "m.json": text})   # a pair: both new, or both as they were

Each file is written to a temporary file in its target's folder (same file system), flushed to disk, and then
renamed over the target with `os.replace`, which is atomic: a reader sees the old file or the new one, never a
truncated mix. When anything fails before the renames (a full disk, a size limit, an exception while the content
was made), the temporary files are removed and every target stays byte for byte as it was.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import List, Mapping, Union

__all__ = ["atomic_write", "write_together"]

PathLike = Union[str, "os.PathLike[str]"]


def _as_bytes(data, target) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"the content of {str(target)!r} must be str (written as UTF-8) or bytes, "
                    f"got {type(data).__name__}")


def _mode_for(target: Path) -> int:
    """The target's permission bits if it exists, else what a plain open() would create (0o666 less the umask)."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _stage(target: Path, data: bytes) -> Path:
    """Write `data` to a new temporary file beside `target`, flushed to disk; return its path."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(target))   # mkstemp makes 0o600; the file keeps the mode it had (or would get)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def write_together(files: Mapping[PathLike, Union[str, bytes]]) -> List[Path]:
    """Write every {target path: content (str as UTF-8, or bytes)}; return the targets.

    All contents are first written to temporary files beside their targets; only when every one is on disk are
    they renamed over the targets (os.replace), in the order given. A failure while writing leaves every target as
    it was and no temporary file behind. The target folders must exist.
    """
    if not isinstance(files, Mapping) or not files:
        raise ValueError(f"files must be a non-empty mapping of target path to content, got {files!r:.80}")
    items = []
    for target, data in files.items():
        if not isinstance(target, (str, os.PathLike)):
            raise TypeError(f"each target must be a path (str or Path), got {type(target).__name__}")
        items.append((Path(target), _as_bytes(data, target)))
    staged: List[Path] = []
    try:
        for target, data in items:
            staged.append(_stage(target, data))
        for tmp, (target, _) in zip(staged, items):
            os.replace(tmp, target)
    except BaseException:
        for tmp in staged:
            tmp.unlink(missing_ok=True)
        raise
    return [target for target, _ in items]


def atomic_write(path: PathLike, data: Union[str, bytes]) -> Path:
    """Write `data` (str as UTF-8, or bytes) to `path` atomically: a temporary file beside it, then os.replace.

    A failure at any point leaves the previous file byte for byte as it was. Returns the path.
    """
    return write_together({path: data})[0]
