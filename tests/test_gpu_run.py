"""tools/gpu_run.sh, the prepared GPU run: its syntax and the plan it prints (--dry-run runs nothing)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "gpu_run.sh"


def plan(*args, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("GPU_RUN_")}
    full.update(GPU_RUN_PYTHON=sys.executable, **env)
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=full, cwd=ROOT)


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


def test_the_gpu_plan_runs_every_chapter_on_cuda_and_installs_offline():
    out = plan("--dry-run")
    assert out.returncode == 0, out.stderr
    chapters = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
    assert f"chapters ({len(chapters)}): {' '.join(chapters)}" in out.stdout
    assert "mode: gpu (BOOK_DEVICE=cuda)" in out.stdout
    assert f"workers: {min(len(chapters), 10)}" in out.stdout
    assert "--require-hashes --no-index --find-links .whl -r .whl/hashes.txt" in out.stdout
    assert "--require-hashes --no-index --find-links .whl --no-deps -r .whl/hashes-nodeps.txt" in out.stdout
    assert "--junitxml=$(mktemp -d)/junit.xml" in out.stdout      # a fresh private folder, no predictable /tmp name
    assert "--nbval " in out.stdout and "--dist loadfile" in out.stdout
    assert "results: book/results/gpu_run.json" in out.stdout


def test_the_smoke_plan_runs_one_chapter_on_the_cpu():
    for out in (plan("--dry-run", "--smoke"), plan("--dry-run", GPU_RUN_SMOKE="1")):
        assert out.returncode == 0, out.stderr
        assert re.search(r"mode: smoke \(BOOK_DEVICE=cpu BOOK_MAX_STEPS=\d+ BOOK_SCALE=gpu\)", out.stdout)
        assert "chapters (1): chapters/01_next_token.ipynb" in out.stdout
        assert "workers: 1" in out.stdout


def test_the_pins_are_requirements_txt_pins():
    out = plan("--dry-run", "--download")
    assert out.returncode == 0, out.stderr
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().split()
                if "==" in line)
    for name in ("nbval", "ipykernel", "ipywidgets", "nbformat", "tqdm", "myst-nb"):
        assert f"{name}=={pins[name]}" in out.stdout
    assert "--python-version 3.12" in out.stdout
    downloads = [line for line in out.stdout.splitlines() if line.startswith("pip download")]
    assert len(downloads) == 3 and all("--only-binary=:all:" in line for line in downloads)   # no build hooks run
    assert "sha256 of every wheel -> .whl/hashes.txt" in out.stdout


def test_the_script_uses_no_predictable_temporary_path():
    text = SCRIPT.read_text()
    assert "$$" not in text and 'mktemp -d "${TMPDIR:-/tmp}/gpu_run.XXXXXXXX"' in text


def test_the_pretrained_section_is_what_gets_deselected_without_its_weights():
    path = "chapters/09_bert_gpt_t5.ipynb"
    out = plan("--dry-run", GPU_RUN_CHAPTERS=path)
    cells = re.findall(rf"--deselect={re.escape(path)}::Cell (\d+)", out.stdout)
    code = [c for c in json.loads((ROOT / path).read_text())["cells"] if c["cell_type"] == "code"]
    numbers = [int(n) for n in cells]
    assert numbers == list(range(numbers[0], numbers[-1] + 1))        # one section, in one piece
    assert "import load_minilm" in "".join(code[numbers[0]]["source"]).replace("import (", "import ")
    rest = ["".join(c["source"]) for i, c in enumerate(code) if i not in numbers]
    assert not any(re.search(r"minilm|\bwp\.", s) for s in rest)     # nothing outside it uses the weights


@pytest.mark.parametrize("args, env, message", [
    (["--bogus"], {}, "unknown argument --bogus"),
    (["--dry-run"], {"GPU_RUN_BENCH": "cpu"}, "GPU_RUN_BENCH must be gpu, full or off"),
])
def test_bad_options_are_refused(args, env, message):
    out = plan(*args, **env)
    assert out.returncode == 2 and message in out.stderr
