"""Predict-then-measure questions (book.quiz): the API, the committed chapters' questions against their glue, and
the answered quiz in headless Chromium under the site's Content-Security-Policy and with JavaScript off."""
from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import nbformat
import pytest
from nbtools import chapter_paths

from book import quiz
from book.utils import GLUED, glue, glued_numbers

ROOT = Path(__file__).resolve().parents[1]
GLUE_DIR = ROOT / "book" / "results" / "glue"
PATHS = chapter_paths()


@pytest.fixture
def glued():
    """book.glue's record of this process's glues, emptied around the test."""
    saved = dict(GLUED)
    GLUED.clear()
    yield GLUED
    GLUED.clear()
    GLUED.update(saved)


# ---- the API ----------------------------------------------------------------------------------------------------
def test_numeric_range_is_the_glued_value_its_tolerance_and_the_readers_slack(glued):
    glue("t_bpc", "2.50", tol=0.05)
    q = quiz.ask("Bits per character?", numeric=True, unit="bits/char", within=0.1)
    q.answer("t_bpc", why="one line.")
    spec = q.spec
    assert spec["answer"] == 2.5 and spec["glue"] == "t_bpc" and spec["tolerance"] == pytest.approx(0.05)
    assert spec["range"] == pytest.approx([2.5 - 0.05 - 0.25, 2.5 + 0.05 + 0.25])
    data, metadata = q.output
    assert metadata["book_quiz"] == spec
    assert "2.50 bits/char" in data["text/html"] and "one line." in data["text/html"]


def test_numeric_tolerance_is_never_below_the_last_digit_shown(glued):
    glue("t_pct", "87%")
    q = quiz.ask("Accuracy?", numeric=True, unit="%", within=0)
    q.answer("t_pct", why="w.")
    assert q.spec["range"] == [86.0, 88.0]


def test_a_percentage_range_stays_within_0_and_100(glued):
    glue("t_acc", "96%", tol=22)
    q = quiz.ask("Accuracy?", numeric=True, unit="%", within=0.1)
    q.answer("t_acc", why="w.")
    assert q.spec["range"] == pytest.approx([96 - 22 - 9.6, 100])


def test_numeric_from_seed_values_reports_their_spread(glued):
    q = quiz.ask("Loss?", numeric=True, within=0)
    q.answer(2.0, spread=[1.9, 2.0, 2.2], why="w.")
    assert q.spec["range"] == pytest.approx([1.7, 2.3]) and q.spec["seeds"] == [1.9, 2.0, 2.2]
    assert "over 3 seeds: 1.9 to 2.2" in q.output[0]["text/html"]


def test_choice_marks_the_measured_choice_and_every_feedback_shows_the_measurement(glued):
    glue("t_ratio", "×4")
    q = quiz.ask("Doubling T multiplies the work by?", choices=["×2", "×4", "×8"], surprise=True)
    q.answer(choice="×4", measured="×4.0", evidence=["t_ratio"], why="T by T.")
    assert q.spec["correct"] == 1 and q.spec["evidence"] == {"t_ratio": "'×4'"} and q.spec["surprise"]
    html = q.output[0]["text/html"]
    questions = json.loads(re.search(r"var questions\w+=(\[.*?\]);\n", html, re.S).group(1))
    assert [a["correct"] for a in questions[0]["answers"]] == [False, True, False]
    assert all("Measured: ×4.0" in a["feedback"] for a in questions[0]["answers"])


def test_the_quiz_is_the_same_bytes_on_every_run(glued):
    outs = []
    for _ in range(2):
        glue("t_x", "3")
        q = quiz.ask("How many?", numeric=True)
        q.answer("t_x", why="w.")
        outs.append(q.output[0]["text/html"])
    assert outs[0] == outs[1]


@pytest.mark.parametrize("kwargs, match", [
    (dict(question=""), "question must be"),
    (dict(question="q?"), "either choices"),
    (dict(question="q?", choices=["a"]), "choices must list"),
    (dict(question="q?", choices=["a", "a"]), "choices must list"),
    (dict(question="q?", choices=["a", "b"], numeric=True), "either choices"),
    (dict(question="q?", numeric=True, within=1.5), "within must be"),
    (dict(question="q?", numeric=True, unit=3), "unit must be"),
])
def test_ask_names_the_bad_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        quiz.ask(**kwargs)


def test_answer_names_the_bad_argument(glued):
    glue("t_two", "3–5")
    glue("t_time", "1.2 s", timing=True)
    choice = quiz.ask("Which?", choices=["a", "b"])
    with pytest.raises(ValueError, match=r"choice must be one of \['a', 'b'\], got 'c'"):
        choice.answer(choice="c", measured="m", why="w.")
    with pytest.raises(ValueError, match="measured must say"):
        choice.answer(choice="a", why="w.")
    with pytest.raises(ValueError, match="evidence must name"):
        choice.answer(choice="a", measured="m", evidence=["nope"], why="w.")
    with pytest.raises(ValueError, match="why must be one line"):
        choice.answer(choice="a", measured="m", why="")
    number = quiz.ask("How many?", numeric=True)
    with pytest.raises(ValueError, match="value must name a value glued"):
        number.answer("t_missing", why="w.")
    with pytest.raises(ValueError, match="shows 2 numbers"):
        number.answer("t_two", why="w.")
    with pytest.raises(ValueError, match="never compared"):
        number.answer("t_time", why="w.")
    with pytest.raises(ValueError, match="spread must list >= 3"):
        number.answer(1.0, spread=[1.0, 2.0], why="w.")
    with pytest.raises(ValueError, match="choice is for a question with choices"):
        number.answer(choice="a", why="w.")


# ---- the committed chapters ---------------------------------------------------------------------------------------
def _questions(nb) -> list:
    """[(cell index, variable, stored spec or None, surprise=)] of each `x = quiz.ask(...)` cell."""
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "quiz.ask(" not in cell.source:
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and getattr(node.value.func, "attr", "") == "ask"):
                try:                                     # a literal question, or one built from the record
                    asked = ast.literal_eval(node.value.args[0])
                except ValueError:
                    asked = None
                specs = [o["metadata"]["book_quiz"] for o in cell.get("outputs", [])
                         if "book_quiz" in o.get("metadata", {})
                         and asked in (None, o["metadata"]["book_quiz"]["question"])]
                surprise = any(k.arg == "surprise" and ast.literal_eval(k.value) for k in node.value.keywords)
                if specs:
                    assert specs[0]["surprise"] == surprise, f"cell {i}: the stored quiz predates its source"
                found.append((i, node.targets[0].id, specs[0] if specs else None, surprise))
    return found


def _glued_in(nb) -> dict:
    """{glue name: index of the cell whose outputs glue it}."""
    return {o["metadata"]["scrapbook"]["name"]: i for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for o in c.get("outputs", []) if "scrapbook" in o.get("metadata", {})}


def _within(text: str, number: float, tolerance: float) -> bool:
    nums = glued_numbers(text)[1]
    return len(nums) == 1 and abs(nums[0] - number) <= tolerance + 1e-9


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_every_chapter_asks_three_questions_answered_by_its_glue(path):
    nb = nbformat.read(path, as_version=4)
    committed = json.loads((GLUE_DIR / f"{path.stem}.json").read_text())["values"]
    glued_at = _glued_in(nb)
    questions = _questions(nb)
    assert len(questions) >= 3, f"{path.name} asks {len(questions)} predict-then-measure questions, >= 3 wanted"
    for at, var, spec, _ in questions:
        answered = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and f"{var}.answer(" in c.source]
        assert answered and min(answered) > at, f"{path.name}: {var} (cell {at}) is answered in cells {answered}"
        assert spec is not None and spec["answered"], (
            f"{path.name}: cell {at} has no stored answered quiz for {var}: re-execute the chapter (tools/execute.py)")
        names = list(spec.get("evidence", {})) + ([spec["glue"]] if spec.get("glue") else [])
        assert names, f"{path.name}: {spec['question']!r} cites no glued value (glue= or evidence=)"
        for name in names:
            assert name in committed, f"{path.name}: {spec['question']!r} cites {name!r}, not in the committed glue"
            assert glued_at.get(name, max(answered) + 1) <= max(answered), (
                f"{path.name}: {name!r} is glued in cell {glued_at.get(name)}, after the answer (cell {max(answered)})")
        assert any(at < glued_at[name] for name in names), (
            f"{path.name}: every value {spec['question']!r} cites ({names}) is glued before the question (cell {at}): "
            "the question must come before the cell that measures its answer")
        for name, text in spec.get("evidence", {}).items():
            assert text == committed[name], (
                f"{path.name}: {spec['question']!r} was answered with {name} = {text}, the glue now says "
                f"{committed[name]}: re-execute the chapter")
        if spec["kind"] == "numeric":
            lo, hi = spec["range"]
            assert lo <= spec["answer"] <= hi
            if spec.get("glue"):
                assert _within(committed[spec["glue"]], spec["answer"], spec["tolerance"]), (
                    f"{path.name}: {spec['question']!r} has answer {spec['answer']} ± {spec['tolerance']}, the "
                    f"committed glue {spec['glue']} = {committed[spec['glue']]}: re-execute the chapter")
        else:
            assert spec["choices"][spec["correct"]] == spec["answer"]


def test_a_third_of_the_questions_are_surprises():
    marks = [surprise for p in PATHS for *_, surprise in _questions(nbformat.read(p, as_version=4))]
    assert marks and 3 * sum(marks) >= len(marks), f"{sum(marks)} of {len(marks)} questions marked surprise=True"


def test_every_chapter_cell_that_asks_imports_quiz():
    for path in PATHS:
        nb = nbformat.read(path, as_version=4)
        if _questions(nb):
            source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
            assert _imports_quiz(source), f"{path.name} asks questions but never imports book.quiz"


def _imports_quiz(source: str) -> bool:
    """`from book import ..., quiz` (on one line or in brackets), `from book import quiz as q` or `import book.quiz`."""
    import ast

    tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    return any(isinstance(n, ast.ImportFrom) and n.module == "book" and any(a.name == "quiz" for a in n.names)
               or isinstance(n, ast.Import) and any(a.name == "book.quiz" for a in n.names) for n in ast.walk(tree))


# ---- in the browser ----------------------------------------------------------------------------------------------
def _page(glued) -> str:
    import importlib.util
    spec = importlib.util.spec_from_file_location("_site_assets", ROOT / "_ext" / "site_assets.py")
    assets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(assets)
    glue("t_ratio", "×4")
    glue("t_bpc", "2.50", tol=0.05)
    a = quiz.ask("Doubling T multiplies the work by?", choices=["×2", "×4", "×8"])
    a.answer(choice="×4", measured="×4.0", evidence=["t_ratio"], why="T by T.")
    b = quiz.ask("Bits per character?", numeric=True, unit="bits/char", within=0.1)
    b.answer("t_bpc", why="one line.")
    body = a.output[0]["text/html"] + "<p>between</p>" + b.output[0]["text/html"]
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>quiz</title></head>"
            f"<body>{body}</body></html>")
    policy = assets.csp_policy([], assets.inline_script_hashes(page))
    return page.replace("<meta charset='utf-8'>",
                        f"<meta charset='utf-8'><meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">")


def test_quiz_runs_under_the_site_csp_and_reads_without_javascript(chromium, glued, tmp_path):
    from conftest import load_tool
    (tmp_path / "quiz.html").write_text(_page(glued), encoding="utf-8")
    base, server = load_tool("screenshot").serve(tmp_path)
    try:
        context = chromium.new_context()
        page = context.new_page()
        errors, violations = [], []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
        page.goto(base + "quiz.html")
        page.wait_for_selector(".Quiz .MCButton", timeout=10_000)
        assert not errors and not violations, (errors, violations)
        assert page.locator(".book-quiz-static").first.is_hidden()          # the script replaced the fallback
        page.locator(".MCButton", has_text="×2").first.click()
        assert "Not this one. Measured: ×4.0" in page.locator(".Feedback").first.inner_text()
        page.locator(".MCButton", has_text="×4").first.click()
        assert page.locator(".Feedback.correct").count() == 1
        box = page.locator("input.Input-text").first
        box.fill("2.6")
        box.press("Enter")
        assert "Close enough" in page.locator(".Feedback").nth(1).inner_text()
        axe = ROOT / ".assets" / "node_modules" / "axe-core" / "axe.min.js"     # as tests/test_site.py scans pages
        if axe.is_file():
            page.wait_for_timeout(1000)             # jupyterquiz's answer animations (0.8 s) have ended
            page.evaluate(axe.read_text(encoding="utf8"))
            found = page.evaluate("""async () => (await axe.run(document, {resultTypes: ['violations']})).violations
              .filter(v => ['serious', 'critical'].includes(v.impact))
              .map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ') + ' ' + (n.any[0] || {}).message)
              .join(' / '))""")
            assert not found, f"axe-core: serious or critical violations in the quiz: {found}"
        context.close()

        off = chromium.new_context(java_script_enabled=False)
        page = off.new_page()
        page.goto(base + "quiz.html")
        text = page.locator("body").inner_text()
        assert "Doubling T multiplies the work by?" in text and "×8" in text and "Bits per character?" in text
        off.close()
    finally:
        server.shutdown()


def test_shown_number_numbers_read_the_glue(glued):
    glue("t_range", "80%–96%")
    glue("t_word", "behind")
    glue("t_one", 3)
    assert quiz.shown("t_range") == "80%–96%" and quiz.numbers("t_range") == [80.0, 96.0]
    assert quiz.shown("t_word") == "behind" and quiz.number("t_one") == 3.0
    with pytest.raises(ValueError, match="shows 2 numbers"):
        quiz.number("t_range")
    with pytest.raises(ValueError, match="name must be a value glued"):
        quiz.shown("t_missing")


def test_nbval_compares_a_quiz_as_one_placeholder(glued):
    """nbval runs the question's cell and compares its output at once, before the answer updates it: the
    sanitizer of tests/sanitize.cfg makes the question alone and the answered quiz compare equal."""
    import configparser
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "tests" / "sanitize.cfg")
    rules = [(cfg[s]["regex"], cfg[s]["replace"]) for s in cfg.sections()]

    def sanitize(text):
        for regex, replace in rules:
            text = re.sub(regex, replace, text)
        return text

    glue("t_bpc", "2.50", tol=0.05)
    q = quiz.ask("Bits per character?", numeric=True, unit="bits/char")
    asked = q.output[0]
    q.answer("t_bpc", why="w.")
    assert asked["text/html"] != q.output[0]["text/html"] and asked["text/plain"] == q.output[0]["text/plain"]
    assert sanitize(asked["text/html"]) == sanitize(q.output[0]["text/html"]) == "<BOOK-QUIZ>"


def test_a_smoke_run_leaves_a_question_unanswered_instead_of_failing(monkeypatch):
    """BOOK_MAX_STEPS trains a few steps: a glued 'nan' is no number, and no answer is checked, as claims are not."""
    from book import glue, quiz
    glue("quiz_smoke_nan", "nan", tol="any")
    monkeypatch.delenv("BOOK_MAX_STEPS", raising=False)
    with pytest.raises(ValueError, match="shows 0 numbers"):
        quiz.number("quiz_smoke_nan")
    q = quiz.ask("How many bits?", numeric=True)
    with pytest.raises(ValueError):
        q.answer("quiz_smoke_nan", why="because")
    monkeypatch.setenv("BOOK_MAX_STEPS", "3")
    assert math.isnan(quiz.number("quiz_smoke_nan"))
    q.answer("quiz_smoke_nan", why="because")
    assert not q.spec.get("answered")
