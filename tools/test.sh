#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up (idempotent), the linter, then pytest in two stages.
#   0. `ruff check` over the package, tests, tools, benchmarks and chapters (pyproject.toml's [tool.ruff]); a finding
#      fails the suite (the stages still run, to report everything at once);
#   1. the unit tests of `book`, nbval over every chapter (exact where every machine agrees, claims asserted in
#      the cells, glued numbers compared with the committed ones), the notebook checks, the -W site build and
#      the headless-Chromium test;
#   2. the GPU code path on the CPU: nbval over every chapter with BOOK_SCALE=gpu (GPU-sized models),
#      BOOK_MAX_STEPS cutting every training loop short, and PyTorch's scalar kernels (ATEN_CPU_CAPABILITY=default).
# Extra arguments go to pytest and run stage 1 only, e.g. `bash tools/test.sh tests/test_core.py`.
# BOOK_TEST_WORKERS (default 2) sets pytest-xdist's workers; each notebook stays on one worker.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash tools/setup.sh
if [[ -z "${BOOK_DATA_DIR:-}" && -f ../shared/data/tinyshakespeare.txt ]]; then
  export BOOK_DATA_DIR="$(cd ../shared/data && pwd)"
fi
py=.venv/bin/python
workers=(-n "${BOOK_TEST_WORKERS:-2}" --dist loadfile)
if [[ $# -gt 0 ]]; then
  exec "$py" -m pytest "${workers[@]}" "$@"
fi
status=0
lint=0
"$py" -m ruff check . || lint=$?
echo "stage 0 (ruff check): exit $lint"
start=$(date +%s)
"$py" -m pytest "${workers[@]}" --durations=15 || status=$?
echo "stage 1 (suite): $(( $(date +%s) - start )) s, exit $status"
start=$(date +%s)
smoke=0
BOOK_SCALE=gpu BOOK_MAX_STEPS="${BOOK_SMOKE_STEPS:-6}" ATEN_CPU_CAPABILITY=default \
  "$py" -m pytest "${workers[@]}" --no-cov --durations=5 chapters || smoke=$?
echo "stage 2 (GPU code path on the CPU, scalar kernels): $(( $(date +%s) - start )) s, exit $smoke"
(( status == 0 )) && status=$smoke
(( status == 0 )) && status=$lint
exit $status
