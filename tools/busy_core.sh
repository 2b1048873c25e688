#!/usr/bin/env bash
# The busy-core check: stage 1's notebook checks (nbval: exact outputs, the claims in the cells, the glue drift) on
# the chapters that time things, while a Python busy loop keeps one core busy. Seconds are illustrations and every
# law is asserted on counted operations (CONTRIBUTING.md, "Timings"), so the load may change the seconds the
# chapters print, never whether the checks pass.
#   bash tools/busy_core.sh                      chapters 2, 3, 4, 7, 8 and 10 (the full check, several minutes)
#   bash tools/busy_core.sh chapters/04_*.ipynb  other notebooks; extra pytest options after `--`
# BOOK_PYTHON overrides the interpreter (default .venv/bin/python). The busy loop is stopped however this ends.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${BOOK_PYTHON:-.venv/bin/python}"
if [[ -z "${BOOK_DATA_DIR:-}" && -f ../shared/data/tinyshakespeare.txt ]]; then
  export BOOK_DATA_DIR="$(cd ../shared/data && pwd)"
fi
notebooks=()
extra=()
while [[ $# -gt 0 ]]; do
  if [[ "$1" == "--" ]]; then shift; extra=("$@"); break; fi
  notebooks+=("$1"); shift
done
if [[ ${#notebooks[@]} -eq 0 ]]; then
  notebooks=(chapters/02_rnn_limits.ipynb chapters/03_bahdanau_attention.ipynb chapters/04_self_attention.ipynb
             chapters/07_training_gpt.ipynb chapters/08_encoder_decoder.ipynb chapters/10_modern_gpt.ipynb)
fi

pin=()
if command -v taskset > /dev/null; then pin=(taskset -c 0); fi   # keep core 0 busy, whatever else runs
"${pin[@]}" "$py" -c 'while True: pass' &
busy=$!
stop_busy() {
  kill "$busy" 2> /dev/null || true
  wait "$busy" 2> /dev/null || true
  echo "busy-core check: busy loop (pid $busy) stopped"
}
trap stop_busy EXIT
trap 'exit 130' INT TERM
echo "busy-core check: busy loop pid $busy${pin:+ pinned to core 0}; ${#notebooks[@]} notebook(s): ${notebooks[*]}"

start=$(date +%s)
status=0
"$py" -m pytest -n 1 --no-cov "${notebooks[@]}" "${extra[@]}" || status=$?
busy_cpu=$(ps -o times= -p "$busy" 2> /dev/null | tr -d ' ' || echo "?")
echo "busy-core check: exit $status after $(( $(date +%s) - start )) s; the busy loop used ${busy_cpu} s of CPU meanwhile"
exit $status
