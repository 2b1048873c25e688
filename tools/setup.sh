#!/usr/bin/env bash
# Install everything the course needs on a fresh Debian/Ubuntu machine (idempotent):
# a virtual environment .venv with requirements.txt (and the `book` package, editable) and, without
# their declared dependencies, the packages in requirements-nodeps.txt (chapter 9's pretrained weights),
# headless Chromium for the browser test, and local copies of the website's JS assets.
#   bash tools/setup.sh            # python + chromium + assets
#   BOOK_SKIP_BROWSER=1 bash tools/setup.sh   # python only
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  "$py" -m venv .venv
fi
stamp=.venv/.requirements.sha
want="$(sha256sum requirements.txt requirements-nodeps.txt pyproject.toml | sha256sum | cut -c1-16)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r requirements-nodeps.txt
  echo "$want" > "$stamp"
fi
if [[ "${BOOK_SKIP_BROWSER:-0}" != "1" ]]; then
  if ! command -v chromium >/dev/null && [[ ! -x /usr/bin/chromium ]]; then
    if [[ "$(id -u)" == 0 ]]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -q && $SUDO apt-get install -y -q chromium fonts-wqy-microhei   # a CJK font: the Chinese pages in screenshots
  fi
  if ! command -v npm >/dev/null; then
    if [[ "$(id -u)" == 0 ]]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -q && $SUDO apt-get install -y -q npm
  fi
  bash tools/fetch_assets.sh
fi
echo "setup: done (.venv ready$([[ "${BOOK_SKIP_BROWSER:-0}" == 1 ]] || echo ', chromium and .assets ready'))"
