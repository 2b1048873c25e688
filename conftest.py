"""Test-wide setup: the corpus location for the unit tests and for nbval's notebook kernels."""
import os
from pathlib import Path

_shared = Path(__file__).resolve().parent.parent / "shared" / "data"
if "BOOK_DATA_DIR" not in os.environ and (_shared / "tinyshakespeare.txt").is_file():
    os.environ["BOOK_DATA_DIR"] = str(_shared)   # kernels started by nbval inherit it
os.environ.setdefault("BOOK_DEVICE", "cpu")      # compare against the committed CPU outputs
