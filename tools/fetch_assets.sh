#!/usr/bin/env bash
# Fetch same-version local copies of the website's CDN assets (MathJax, RequireJS, the ipywidgets
# HTML manager) into .assets/ (git-ignored), for building and testing the site offline.
# The public site loads exactly these versions from jsDelivr (see _config.yml).
# Also ONNX Runtime Web, which both builds serve from the site itself (chapter 7's live GPT, _ext/site_assets.py).
# Idempotent: does nothing when the pinned versions are already present.
# Usage: bash tools/fetch_assets.sh [DEST]   (DEST defaults to <repo>/.assets)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/.assets}"
pkgs=(mathjax@3.2.2 requirejs@2.3.8 @jupyter-widgets/html-manager@1.0.15 onnxruntime-web@1.30.0)

have() {  # have NAME VERSION: is node_modules/NAME/package.json at VERSION?
  local pj="$dest/node_modules/$1/package.json"
  [[ -f "$pj" ]] && grep -q "\"version\": *\"$2\"" "$pj"
}
if have mathjax 3.2.2 && have requirejs 2.3.8 && have @jupyter-widgets/html-manager 1.0.15 \
   && have onnxruntime-web 1.30.0 \
   && [[ -f "$dest/node_modules/@jupyter-widgets/html-manager/dist/embed-amd.js" ]] \
   && [[ -f "$dest/node_modules/onnxruntime-web/dist/ort-wasm-simd-threaded.wasm" ]]; then
  echo "fetch_assets: pinned assets already in $dest"
  exit 0
fi
command -v npm >/dev/null || { echo "fetch_assets: npm not found (apt-get install -y npm)" >&2; exit 1; }
mkdir -p "$dest"
npm install --prefix "$dest" --no-audit --no-fund --no-save --loglevel=error "${pkgs[@]}"
echo "fetch_assets: installed ${pkgs[*]} into $dest"
