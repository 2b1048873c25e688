"""What the benchmarks share: the corpus as tensors, the usual options, and writing a results table."""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from book.data import load_shakespeare, shakespeare_split  # noqa: E402
from book.tokenizers import CharTokenizer  # noqa: E402


def char_corpus():
    """(train ids, validation ids, tokenizer): the book's corpus and split, character-level (BOOK_DATA_DIR)."""
    text = load_shakespeare()
    train_text, val_text = shakespeare_split(text)
    tok = CharTokenizer.from_text(text)
    return torch.tensor(tok.encode(train_text)), torch.tensor(tok.encode(val_text)), tok


def parser(doc: str, out: Path, eval_batches: int = 8) -> argparse.ArgumentParser:
    """The options every recorded benchmark takes: --eval-batches --threads --seed --out --quick."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--eval-batches", type=int, default=eval_batches, help="validation windows / 64 per evaluation")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: robust on a shared machine)")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--out", type=Path, default=out, help="the results table (CSV) to write")
    p.add_argument("--quick", action="store_true", help="tiny runs to test the harness; writes nothing")
    return p


def write_rows(path: Path, fields, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
