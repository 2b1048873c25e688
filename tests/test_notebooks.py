"""Checks on the committed chapter notebooks and on the executor (tools/execute.py)."""
import importlib.util
import json
import re
import shutil

import nbformat
import pytest
import torch

from nbtools import (CHAPTERS, ROOT, chapter_paths, colab_setup_source, is_solution, prose_template, repository_url,
                     scratch_namespace, text_outputs)

CHAPTER_NAMES = ["01_next_token", "02_rnn_limits", "03_bahdanau_attention", "04_self_attention",
                 "05_positional_encoding", "06_multihead_block", "07_training_gpt", "08_encoder_decoder",
                 "09_bert_gpt_t5", "10_modern_gpt"]
PATHS = chapter_paths()


def load_executor():
    spec = importlib.util.spec_from_file_location("execute", ROOT / "tools" / "execute.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_there_are_chapters_with_the_agreed_names():
    assert PATHS, "no chapter notebooks found"
    assert all(p.stem in CHAPTER_NAMES for p in PATHS), [p.stem for p in PATHS]


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_first_cell_is_the_colab_setup_cell(path):
    nb = nbformat.read(str(path), as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "code"
    assert first.source == colab_setup_source(repository_url()), "setup cell drifted from _config.yml's URL"
    assert {"remove-cell", "nbval-ignore-output"} <= set(first.metadata.get("tags", []))


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_committed_executed_lean_and_clean(path):
    nb = nbformat.read(str(path), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), "not run top to bottom"
    assert not any(o.output_type == "error" for c in code for o in c.outputs)
    uses_widgets = any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
                       for c in code for o in c.outputs)
    assert uses_widgets, "every chapter has at least one slider"
    assert "widgets" in nb.metadata, "widget state missing: sliders would be blank on the website"
    assert path.stat().st_size < 3e6
    assert not any("execution" in c.metadata for c in nb.cells), "volatile timestamps left in"
    assert any("scratch" in c.metadata.get("tags", []) for c in code), "no from-scratch cells tagged"


# Chapters known to break the 3-minute CPU budget, with the measured reason. Each is an open defect, not a waiver:
# the test still fails if the chapter gets slower than its recorded bound, and once it fits, its entry must go.
OVER_BUDGET = {}


def test_runtimes_are_recorded_for_every_chapter():
    runtimes = json.loads((CHAPTERS / "_generated" / "runtimes.json").read_text())
    for p in PATHS:
        bound, _ = OVER_BUDGET.get(p.stem, (180, ""))
        assert runtimes[p.stem]["cpu_s"] <= bound, f"{p.stem} took {runtimes[p.stem]['cpu_s']} s on the CPU"
    for name in OVER_BUDGET:
        assert runtimes[name]["cpu_s"] > 180, f"{name} fits the 180 s budget now: remove it from OVER_BUDGET"
    assert "| chapter |" in (CHAPTERS / "_generated" / "runtimes.md").read_text()


def test_executor_is_idempotent_and_strips_volatile_metadata(tmp_path):
    """Running the executor twice leaves the text outputs unchanged."""
    execute = load_executor()
    src = ROOT / "tests" / "fixtures" / "tiny_chapter.ipynb"
    path = tmp_path / src.name
    shutil.copy(src, path)
    first, s1 = execute.execute(path)
    nbformat.write(first, path)
    second, s2 = execute.execute(path)
    assert text_outputs(first) == text_outputs(second)
    assert len(text_outputs(first)) >= 3 and s1 > 0 and s2 > 0
    assert "widgets" in second.metadata
    assert not any("execution" in c.metadata for c in second.cells)
    rows = execute.leaderboard_rows(second)
    assert rows and rows[0]["name"] == "fixture"
    prose = second.cells[3]
    assert re.fullmatch(r"The first draw is -?\d\.\d\d\.\n\n<details><summary>Solution</summary>\n\n"
                        r"It is random\.\n\n</details>", prose.source), prose.source
    assert prose.metadata["book"]["template"].startswith("The first draw is {glue:text}`fixture_first`.")
    markdown = [[(c.source, c.metadata) for c in nb.cells if c.cell_type == "markdown"] for nb in (first, second)]
    assert markdown[0] == markdown[1], "a second run renders the same prose"
    assert second.cells[4].metadata["tags"] == ["hide-cell"]


def test_executor_refuses_a_hand_edited_rendered_cell_before_running(tmp_path):
    execute = load_executor()
    path = tmp_path / "tiny_chapter.ipynb"
    nb = nbformat.read(str(ROOT / "tests" / "fixtures" / "tiny_chapter.ipynb"), as_version=4)
    nb.cells[1].source = "raise SystemExit('must not run')"
    nb.cells[2].outputs = [nbformat.v4.new_output("display_data", data={"text/plain": "'1.23'"},
                                                  metadata={"scrapbook": {"name": "fixture_first"}})]
    nb.cells[3].metadata["book"] = {"template": "The first draw is {glue:text}`fixture_first`."}
    nb.cells[3].source = "The first draw is 1.23, edited."   # rendered, then edited by hand
    nbformat.write(nb, path)
    with pytest.raises(execute.render.RenderError, match="edited by hand"):
        execute.execute(path)


def test_executor_main_no_write_keeps_files(tmp_path, monkeypatch, capsys):
    execute = load_executor()
    src = ROOT / "tests" / "fixtures" / "tiny_chapter.ipynb"
    path = tmp_path / src.name
    shutil.copy(src, path)
    before = path.read_bytes()
    assert execute.main(["--no-write", str(path)]) == 0
    assert path.read_bytes() == before and "s\n" in capsys.readouterr().out


# ---- notebook <-> package agreement -----------------------------------------
def test_chapter1_scratch_cells_agree_with_package():
    from book import ngram
    from book.chapters import ch01

    ns = scratch_namespace("01_next_token.ipynb")
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 7, (200,), generator=g)
    assert torch.equal(ns["bigram_table"](ids.tolist(), 7), ngram.bigram_counts(ids, 7))
    W = torch.randn(7, 7, generator=g)
    counts = ngram.bigram_counts(ids, 7).float()
    torch.testing.assert_close(ns["full_loss"](W, ids), ns["counted_loss"](W, counts))
    # the package's neural bigram computes the same loss as the scratch one
    model = ch01.BigramLM(7)
    model.logits.weight.data.copy_(W)
    logits = model(ids[:-1].unsqueeze(0))
    torch.testing.assert_close(torch.nn.functional.cross_entropy(logits[0], ids[1:]), ns["full_loss"](W, ids))
    # the scratch Kneser-Ney gives the package's probabilities, for seen and unseen contexts alike
    for n in (1, 3, 4):
        scratch, package = ns["kneser_ney_scratch"](ids.tolist(), 7, n, 0.8), ngram.kneser_ney(ids, 7, n, 0.8)
        contexts = torch.randint(0, 7, (30, n - 1), generator=g)
        nxt = torch.randint(0, 7, (30,), generator=g)
        want = package(contexts, nxt).exp()
        got = torch.tensor([scratch(c.tolist(), w.item()) for c, w in zip(contexts, nxt)], dtype=torch.float64)
        torch.testing.assert_close(got, want)


# ---- the portable-check convention (CONTRIBUTING.md, "Notebook checks") -----------------------
CHECK = re.compile(r"\bassert\b|\bclaim\(|assert_close\(|\bcheck_[a-z_]+\(")


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_every_unchecked_output_is_asserted_in_its_cell(path):
    """nbval skips the text of tagged cells, so a tagged cell that prints numbers must check its claim itself."""
    nb = nbformat.read(str(path), as_version=4)
    unchecked = []
    for i, cell in enumerate(nb.cells):
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code" or "nbval-ignore-output" not in tags or "remove-cell" in tags:
            continue
        printed = "".join(text_outputs(nbformat.from_dict({"cells": [cell]})))
        if re.search(r"\d", printed) and not CHECK.search(cell.source):
            unchecked.append(f"cell {i}: {printed.strip()[:80]!r}")
    assert not unchecked, f"{path.stem}: tagged cells print numbers but check nothing:\n" + "\n".join(unchecked)


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_no_check_bounds_a_measured_time(path):
    """Seconds differ between CPUs, under load and on a GPU: laws are asserted on counted operations (FLOPs,
    positions, steps), and a glued time is declared timing=True (CONTRIBUTING.md, "Timings")."""
    from nbtools import timing_checks

    nb = nbformat.read(str(path), as_version=4)
    found = [f"cell {i}: {line}" for i, c in enumerate(nb.cells) if c.cell_type == "code"
             for line in timing_checks(c.source)]
    assert not found, f"{path.stem}: checks or tolerances on seconds:\n" + "\n".join(found)


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_glued_values_declare_their_tolerance_and_are_used(path):
    from nbtools import glued

    nb = nbformat.read(str(path), as_version=4)
    values, twice = {}, []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            names = [o.get("metadata", {}).get("scrapbook", {}).get("name") for o in cell.outputs]
            twice += [f"cell {i}: {n}" for n in sorted({n for n in names if n and (names.count(n) > 1 or n in values)})]
            values.update(glued(cell.outputs))
    assert not twice, (f"{path.stem}: glued more than once (the site build warns on each: -W fails):\n"
                       + "\n".join(twice))
    missing = [name for name, (_, spec) in values.items() if spec is None]
    exact_cells = [c for c in nb.cells
                   if c.cell_type == "code" and "nbval-ignore-output" not in c.metadata.get("tags", [])]
    loose = [name for c in exact_cells for name, (_, spec) in glued(c.outputs).items() if spec]
    assert not loose, (f"{path.stem}: {loose} declare a tolerance but sit in cells nbval compares exactly: "
                       "tag the cell nbval-ignore-output and check its claim there")
    assert not missing, f"{path.stem}: glued without book.glue's tolerance (re-execute?): {missing}"
    prose = "\n".join(prose_template(c) for c in nb.cells if c.cell_type == "markdown")
    cited = set(re.findall(r"\{glue(?::[a-z]+)?\}`([A-Za-z_0-9]+)", prose))
    assert cited <= set(values), f"{path.stem}: prose cites glue names never glued: {sorted(cited - set(values))}"


# ---- the same prose in every reader's tool (tools/render.py) ------------------------------------
def load_render():
    return load_executor().render   # the module execute.py itself uses


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_prose_is_its_template_rendered_with_the_committed_glue(path):
    """The numbers written into the markdown are exactly the glued ones: the text cannot drift from the code."""
    render = load_render()
    nb = nbformat.read(str(path), as_version=4)
    values = render.glue_values(nb)
    drifted = [f"cell {i}: {c.source[:60]!r}" for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
               and c.source != render.render_glue(prose_template(c), values)]
    assert not drifted, (f"{path.stem}: text differs from its template rendered with the glued values "
                         f"(run tools/execute.py --render-only):\n" + "\n".join(drifted))
    assert any("template" in c.metadata.get("book", {}) for c in nb.cells), f"{path.stem}: nothing rendered"


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_prose_has_no_myst_only_markup(path):
    """JupyterLab, Colab and GitHub show MyST roles and colon fences raw: only templates may hold them."""
    nb = nbformat.read(str(path), as_version=4)
    raw = [f"cell {i}: {m.group()!r}" for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
           for m in re.finditer(r"\{glue.{0,40}|^.*:::\{.*$", c.source, re.M)]
    assert not raw, f"{path.stem}: MyST-only markup in the text (run tools/execute.py --render-only): {raw[:5]}"


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_solution_code_cells_are_hidden_whole(path):
    """A solution's code and its output are folded away, on the website (hide-cell) and in JupyterLab."""
    nb = nbformat.read(str(path), as_version=4)
    solutions = [c for c in nb.cells if c.cell_type == "code" and is_solution(c.source)]
    assert solutions, f"{path.stem}: no solution code cells"
    for cell in solutions:
        tags = cell.metadata.get("tags", [])
        assert "hide-cell" in tags and "hide-input" not in tags, f"{path.stem}: {cell.source[:40]!r} tags {tags}"
        assert cell.metadata.get("jupyter") == {"source_hidden": True, "outputs_hidden": True}, cell.source[:40]


def test_executor_refuses_to_commit_a_smoke_run(tmp_path, monkeypatch):
    execute = load_executor()
    src = ROOT / "tests" / "fixtures" / "tiny_chapter.ipynb"
    path = tmp_path / src.name
    shutil.copy(src, path)
    monkeypatch.setenv("BOOK_MAX_STEPS", "6")
    with pytest.raises(SystemExit):
        execute.main([str(path)])
    assert path.read_bytes() == src.read_bytes()


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_percentages_declare_their_tolerance_in_points(path):
    """tol is compared with the printed number, so a percentage '38%' with tol=0.1 allows 0.1 points: a slip
    that only a machine rounding differently reveals. A tolerance on a percentage must be at least 1 point."""
    from nbtools import glued

    nb = nbformat.read(str(path), as_version=4)
    tiny = [f"{name} = {text} with {spec}" for c in nb.cells if c.cell_type == "code"
            for name, (text, spec) in glued(c.outputs).items()
            if text and "%" in text and spec and "tol" in spec and spec["tol"] < 1]
    assert not tiny, f"{path.stem}: percentages with a tolerance below one point: {tiny}"


_DRAWS = re.compile(r"^(new_figure|heatmap|line_plot|slider2?|draw_\w+|\w+_plot|plot_\w+)$")


def _top_level_draw_calls(source: str) -> list:
    """Names of the drawing calls a cell makes at its top level (not inside a def, where they only define)."""
    import ast

    try:
        tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    except SyntaxError:
        return []
    names = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if _DRAWS.match(name):
                    names.append(name)
    return names


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_a_cell_that_draws_shows_its_figure(path):
    """A cell that calls a drawing function at its top level shows an image or a widget: chapter 1's bigram table
    once built its figure and displayed nothing (its last line set tick labels, so the figure was never returned)."""
    nb = nbformat.read(path, as_version=4)
    shown = {"image/png", "image/svg+xml", "application/vnd.jupyter.widget-view+json", "text/html"}
    missing = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "remove-output" in cell.metadata.get("tags", []):
            continue
        calls = _top_level_draw_calls(cell.source)
        if calls and not any(shown & set(o.get("data", {})) for o in cell.get("outputs", [])):
            missing.append((i, calls))
    assert not missing, f"{path.stem}: cells that draw but show nothing: {missing}"
