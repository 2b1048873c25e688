#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up (idempotent), then pytest, which runs
# the unit tests of `book`, nbval over every chapter, the notebook checks, the -W site build
# and the headless-Chromium test. Extra arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash tools/setup.sh
if [[ -z "${BOOK_DATA_DIR:-}" && -f ../shared/data/tinyshakespeare.txt ]]; then
  export BOOK_DATA_DIR="$(cd ../shared/data && pwd)"
fi
exec .venv/bin/python -m pytest "$@"
