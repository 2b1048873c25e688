"""Build the course website (Jupyter Book v1), warning-free: `jupyter-book build --all -W -n --keep-going`.

    .venv/bin/python tools/build_book.py                  # public site -> _build/html (pinned CDN assets)
    .venv/bin/python tools/build_book.py --local-assets   # offline site: MathJax/widgets from .assets/
    .venv/bin/python tools/build_book.py --out /tmp/site  # -> /tmp/site/_build/html

Notebooks are not executed (they are committed executed); the build takes seconds. `--local-assets`
needs `bash tools/fetch_assets.sh` first (see _ext/site_assets.py). Exit status 1 on any warning.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASSETS_HINT = "run `bash tools/fetch_assets.sh` (needs npm) to fetch the local assets"


def jupyter_book_exe() -> str:
    """The jupyter-book script next to this Python (the venv's), else the one on PATH."""
    exe = Path(sys.executable).parent / "jupyter-book"
    found = str(exe) if exe.exists() else shutil.which("jupyter-book")
    if not found:
        raise SystemExit("jupyter-book not found: pip install -r requirements.txt")
    return found


def strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def build_command(source: Path, out: Path | None) -> list[str]:
    cmd = [jupyter_book_exe(), "build", "--all", "-W", "-n", "--keep-going"]
    if out is not None:
        cmd += ["--path-output", str(out)]
    return cmd + [str(source)]


def build(source: Path = ROOT, out: Path | None = None, local_assets: Path | None = None,
          quiet: bool = False) -> Path:
    """Build the book and return the html folder; raise RuntimeError with the log on failure."""
    env = dict(os.environ)
    env.pop("BOOK_LOCAL_ASSETS", None)
    if local_assets is not None:
        if not (Path(local_assets) / "node_modules" / "mathjax").is_dir():
            raise RuntimeError(f"local assets missing in {local_assets}: {ASSETS_HINT}")
        env["BOOK_LOCAL_ASSETS"] = str(Path(local_assets).resolve())
    cmd = build_command(Path(source), out)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=quiet, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        log = (proc.stdout or "") + (proc.stderr or "") if quiet else ""
        problems = [ln for ln in strip_ansi(log).splitlines() if re.search(r"WARNING|ERROR|Error|Exception", ln)]
        detail = "\n".join(problems[:40]) or strip_ansi(log)[-3000:] or "(see the output above)"
        raise RuntimeError(f"book build failed (exit {proc.returncode}): {' '.join(cmd)}\n{detail}")
    html = (Path(out) if out is not None else Path(source)) / "_build" / "html"
    if not quiet:
        print(f"build_book: built {html} in {seconds:.1f} s")
    return html


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--local-assets", nargs="?", const=str(ROOT / ".assets"), default=None,
                        metavar="DIR", help="use local copies of MathJax/ipywidgets (default DIR: .assets)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: the book root)")
    parser.add_argument("--source", type=Path, default=ROOT, help="book root (default: the repository)")
    args = parser.parse_args(argv)
    try:
        build(args.source, args.out, Path(args.local_assets) if args.local_assets else None)
    except RuntimeError as err:
        print(err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
