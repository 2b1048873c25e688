#!/usr/bin/env bash
# Fetch same-version local copies of the website's CDN assets (MathJax, RequireJS, the ipywidgets
# HTML manager) into .assets/ (git-ignored), for building and testing the site offline.
# The public site loads exactly these versions from jsDelivr (see _config.yml).
# Also ONNX Runtime Web, which both builds serve from the site itself (chapter 7's live GPT, _ext/site_assets.py),
# and axe-core, the accessibility checker tests/test_site.py runs on every page (never served by the site).
# The versions, transitive ones included, are locked in tools/assets/package-lock.json (npm's sha512 integrity for
# every package); `npm ci --ignore-scripts` installs exactly that tree and runs no package's install scripts.
# To change a version: edit tools/assets/package.json (and _config.yml's URLs and hashes), then in tools/assets/
# run `npm install --package-lock-only --ignore-scripts` and commit both files.
# Idempotent: does nothing when DEST already holds an install of the committed lockfile.
# Usage: bash tools/fetch_assets.sh [DEST]   (DEST defaults to <repo>/.assets)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/.assets}"
spec="$root/tools/assets"   # package.json + package-lock.json

if cmp -s "$spec/package-lock.json" "$dest/package-lock.json" \
   && [[ -f "$dest/node_modules/mathjax/es5/tex-mml-chtml.js" ]] \
   && [[ -f "$dest/node_modules/requirejs/require.js" ]] \
   && [[ -f "$dest/node_modules/@jupyter-widgets/html-manager/dist/embed-amd.js" ]] \
   && [[ -f "$dest/node_modules/onnxruntime-web/dist/ort-wasm-simd-threaded.wasm" ]] \
   && [[ -f "$dest/node_modules/axe-core/axe.min.js" ]]; then
  echo "fetch_assets: locked assets already in $dest"
  exit 0
fi
command -v npm >/dev/null || { echo "fetch_assets: npm not found (apt-get install -y npm)" >&2; exit 1; }
mkdir -p "$dest"
cp "$spec/package.json" "$spec/package-lock.json" "$dest/"
(cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
echo "fetch_assets: installed tools/assets/package-lock.json into $dest"
