#!/usr/bin/env bash
# Install everything (idempotent) and build the website into _build/html with the public CDN assets.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
BOOK_SKIP_BROWSER=1 bash tools/setup.sh
bash tools/fetch_assets.sh   # ONNX Runtime Web for chapter 7's live GPT: the site serves it itself (needs npm)
.venv/bin/python tools/build_book.py "$@"
echo "website: $root/_build/html/index.html"
