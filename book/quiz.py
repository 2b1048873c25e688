"""Predict, then measure: a question the reader answers before the cell that measures its answer runs.

    q = quiz.ask("Doubling T multiplies attention's multiply-adds by?", choices=["×2", "×4", "×8"])
    ...                                                   # the next cell measures, glues, and ends with
    q.answer(choice="×4" if ratio > 3 else "×2", measured=f"×{ratio:.1f}", evidence=["ch4_ratio"], why="...")

    q = quiz.ask("What bits/char will the bigram reach?", numeric=True, unit="bits/char", within=0.1)
    ...
    q.answer("ch1_bigram_bpc", why="...")                # a glued name: its value and tolerance, recorded by glue

`ask` shows the question and its choices (plain HTML, readable with JavaScript off) under a fixed display id;
`answer`, at the end of the measuring cell, replaces that output (IPython's update_display: nbclient stores it in
the question's cell) with a jupyterquiz quiz whose correct choice or numeric range comes from the measured value:
never a typed number. A numeric range is the measured value ± (its tolerance as glued: margin × spread over seeds,
or the glue's tol/rel, and never less than one step of the last digit shown) ± `within` × |value| (how close a
reader's guess must come). Each choice's feedback shows the measured value, its spread over seeds where one was
recorded, and one line on why. The quiz is one text/html output (its HTML, style and inline script, with ids
derived from the question text, so a re-run writes the same bytes), and the output's metadata "book_quiz" holds
the spec the test suite checks against the committed glue (tests/test_quiz.py).
"""
from __future__ import annotations

import hashlib
import html
import json
import math
import re
from typing import Optional, Sequence

from .language import _
from .utils import GLUED, _display_unit, glued_numbers, recorded_seed_values, smoke_run

__all__ = ["ask", "Question", "MIME_KEY", "shown", "number", "numbers"]

MIME_KEY = "book_quiz"          # the output metadata key that holds the question's spec


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _short(x: float) -> str:
    """A number as a reader reads it: 4 significant digits, no float noise."""
    return f"{x:.4g}"


class Question:
    """One question: made by `ask`, shown at once, answered by `answer` once the measuring cell has run."""

    def __init__(self, question: str, choices: Optional[Sequence[str]], numeric: bool, unit: str, within: float,
                 surprise: bool):
        self.question, self.choices, self.numeric = question, list(choices or []), numeric
        self.unit, self.within, self.surprise = unit, within, surprise
        digest = hashlib.sha256(json.dumps([question, self.choices, numeric]).encode()).hexdigest()[:12]
        self.div_id = "bq" + digest           # a JS identifier too: jupyterquiz names a variable after it
        self.display_id = "book-quiz-" + digest
        self.spec: dict = {"question": question, "kind": "numeric" if numeric else "choice", "surprise": surprise,
                           "answered": False}
        if not numeric:
            self.spec["choices"] = self.choices
        else:
            self.spec.update(unit=unit, within=within)
        # (data, metadata) shown: the question alone, then (`answer`) the answered quiz
        self.output: tuple = self._bundle(self._static(
            "<p><em>" + _("Commit to an answer; the cells below measure it.") + "</em></p>"))

    # ---- what the reader sees -------------------------------------------------------------------------
    def _static(self, answer_html: str = "") -> str:
        """The question as plain HTML: what shows before the answer, and with JavaScript off (or in an
        untrusted notebook, whose scripts JupyterLab strips)."""
        items = "".join(f"<li>{html.escape(c)}</li>" for c in self.choices)
        body = (f"<ul>{items}</ul>" if self.choices else
                "<p><em>" + (_("Your estimate ({unit})?").format(unit=html.escape(self.unit)) if self.unit
                             else _("Your estimate?")) + "</em></p>")
        return (f'<div class="book-quiz-static" id="{self.div_id}-static">'
                "<p><strong>" + _("Predict, then measure.") + f"</strong> {html.escape(self.question)}</p>{body}"
                f"{answer_html}</div>")

    def _bundle(self, content: str) -> tuple:
        return ({"text/html": f'<div class="book-quiz">{content}</div>',
                 "text/plain": _("Predict, then measure: {question}").format(question=self.question)},
                {MIME_KEY: self.spec})

    def _show(self) -> None:
        from IPython.display import display
        data, metadata = self.output
        display(data, raw=True, metadata=metadata, display_id=self.display_id)

    # ---- the measured answer --------------------------------------------------------------------------
    def answer(self, value=None, *, choice: Optional[str] = None, why: str, spread=None,
               measured: Optional[str] = None, evidence: Sequence[str] = ()) -> None:
        """Turn the question into its quiz, answered by what the cell measured (its spec: `self.spec`).

        Numeric: `value` is a glued name (its value, text and tolerance as `book.glue` recorded them) or a number
        with `spread`, the values it took over >= 3 seeds. Choice: `choice` is the choice the measurement picks
        (computed from it, never typed alone), `measured` says the measured values, `evidence` names the glues
        that hold them. `why` is one line on why it comes out that way.
        """
        if not isinstance(why, str) or not why.strip() or "\n" in why:
            raise ValueError(f"why must be one line on why the answer comes out so, got {why!r}")
        try:
            spec = dict(self.spec, answered=True, why=why)
            for name in evidence:
                if name not in GLUED:
                    raise ValueError(f"evidence must name values glued earlier in this kernel, got {name!r} "
                                     f"(glued so far: {sorted(GLUED)[-5:]} ...)")
            spec["evidence"] = {name: GLUED[name]["text"] for name in evidence}
            if self.numeric:
                if choice is not None:
                    raise ValueError(f"choice is for a question with choices; this one is numeric, got "
                                     f"choice={choice!r}")
                spec.update(self._numeric(value, spread, measured))
                quiz = self._numeric_quiz(spec)
            else:
                if value is not None or spread is not None:
                    raise ValueError("a question with choices is answered by choice=..., measured=..., got "
                                     f"value={value!r}, spread={spread!r}")
                if choice not in self.choices:
                    raise ValueError(f"choice must be one of {self.choices}, got {choice!r}")
                if not isinstance(measured, str) or not measured.strip():
                    raise ValueError(f"measured must say the measured values that pick the choice, got {measured!r}")
                spec.update(correct=self.choices.index(choice), answer=choice, measured=measured)
                quiz = self._choice_quiz(spec)
            self.spec = spec
            self._update(quiz, spec)
        except ValueError:
            if not smoke_run():
                raise
            # a smoke run (BOOK_MAX_STEPS) trains for a few steps: its numbers may be NaN or off every choice; the
            # question stays unanswered, as claims stay unchecked there
            return

    def _numeric(self, value, spread, measured) -> dict:
        out: dict = {}
        if isinstance(value, str):
            if value not in GLUED:
                raise ValueError(f"value must name a value glued earlier in this kernel or be a number, got {value!r}")
            if spread is not None:
                raise ValueError(f"a glued value's spread is the one glue recorded; got spread={spread!r} too")
            record = GLUED[value]
            tol = record["tolerance"]
            if tol.get("timing") or tol.get("any"):
                raise ValueError(f"value {value!r} is glued as {tol}: never compared between runs, so it cannot "
                                 "be a numeric answer (ask a choice question about it)")
            numbers = glued_numbers(record["text"])[1]
            if len(numbers) != 1:
                raise ValueError(f"value {value!r} shows {len(numbers)} numbers ({record['text']}); a numeric "
                                 "answer needs a glue that shows one")
            x = numbers[0]
            width = max(tol.get("tol", 0.0), tol.get("rel", 0.0) * abs(x),
                        abs(x) * (tol.get("factor", 1.0) - 1.0), _display_unit(record["text"]))
            seeds = []
            s = tol.get("spread") or {}
            if "values" in s:
                seeds = [float(v) for v in s["values"]]
            elif s.get("source", "").endswith(".csv") and "error" not in s:
                table = s["source"].rsplit("/", 1)[1][:-4]
                texts = recorded_seed_values(value, table) + [record["text"]]
                seeds = [glued_numbers(t)[1][0] for t in texts]
            shown = record["text"].strip("'\"")
            out.update(glue=value, glued_text=record["text"])
        else:
            x = _number(value, "value")
            if spread is None:
                raise ValueError("a measured number needs spread=[its values over >= 3 seeds] (or glue it and pass "
                                 f"its name), got spread=None for value={value!r}")
            try:
                seeds = [float(v) for v in spread]
            except (TypeError, ValueError):
                raise ValueError(f"spread must list >= 3 numbers, one per seed, got {spread!r}") from None
            if len(seeds) < 3 or not all(math.isfinite(v) for v in seeds):
                raise ValueError(f"spread must list >= 3 finite numbers, one per seed, got {spread!r}")
            width = max(seeds) - min(seeds)
            shown = _short(x)
        slack = self.within * abs(x)
        lo, hi = x - width - slack, x + width + slack
        if self.unit == "%":            # a share: never below 0 % or above 100 %
            lo, hi = max(lo, 0.0), min(hi, 100.0)
        # the unit once: a glued share already shows its "%"
        unit = " " + self.unit if self.unit and not shown.endswith(self.unit) else ""
        out.update(answer=x, tolerance=width, range=[lo, hi], seeds=seeds, measured=measured or shown + unit)
        return out

    def _feedback(self, spec: dict, verdict: str) -> str:
        seeds = spec.get("seeds") or []
        # a spread over the seeds, where the seeds differ (a count is the same on every seed)
        over = (_(" (over {n} seeds: {low} to {high})").format(n=len(seeds), low=_short(min(seeds)),
                                                                high=_short(max(seeds)))
                if len(seeds) >= 3 and _short(min(seeds)) != _short(max(seeds)) else "")
        return _("{verdict} Measured: {measured}{over}. {why}").format(verdict=verdict, measured=spec["measured"],
                                                                       over=over, why=spec["why"])

    def _numeric_quiz(self, spec: dict) -> list:
        lo, hi = spec["range"]
        near = _("anything from {low} to {high} counts.").format(low=_short(lo), high=_short(hi))
        question = _("{question} ({unit})").format(question=self.question, unit=self.unit) if self.unit else \
            self.question
        return [{"question": question, "type": "numeric",
                 "answers": [
                     {"type": "range", "range": [lo, math.nextafter(hi, math.inf)], "correct": True,
                      "feedback": self._feedback(spec, _("Close enough: ") + near)},
                     {"type": "range", "range": [-1e300, lo], "correct": False,
                      "feedback": self._feedback(spec, _("Too low; ") + near)},
                     {"type": "range", "range": [hi, 1e300], "correct": False,
                      "feedback": self._feedback(spec, _("Too high; ") + near)},
                     {"type": "default", "feedback": _("Type a number and press Enter.")}]}]

    def _choice_quiz(self, spec: dict) -> list:
        return [{"question": self.question, "type": "multiple_choice",
                 "answers": [{"answer": c, "correct": i == spec["correct"],
                              "feedback": self._feedback(spec, _("Yes.") if i == spec["correct"]
                                                         else _("Not this one."))}
                             for i, c in enumerate(self.choices)]}]

    def html(self, quiz: list, spec: dict) -> str:
        """The answered quiz: static fallback (question, choices, the answer folded) + jupyterquiz's div and script."""
        from jupyterquiz.dynamic.loader import load_questions_script
        from jupyterquiz.dynamic.renderer import build_script, build_styles, render_div

        verdict = (_("{choice}. ").format(choice=html.escape(self.choices[spec["correct"]])) if not self.numeric
                   else "")
        folded = ("<details><summary>" + _("The measured answer") + f"</summary><p>{verdict}"
                  f"{html.escape(self._feedback(spec, ''))}</p></details>")
        div = self.div_id
        prefix, static, url = load_questions_script(quiz, div)
        script = build_script(prefix, static, url, div, False).replace(
            "if (typeof Question === 'undefined') {\n", "if (typeof Question === 'undefined') {\n" + _library_js(quiz))
        # once the quiz is drawn: hide the plain copy, and name the number box for screen readers
        script += (f'\n(function hide() {{ var q = document.getElementById("{div}"), '
                   f's = document.getElementById("{div}-static");\n'
                   f'  if (q && s && q.children.length) {{ s.hidden = true; q.querySelectorAll("input[type=text]")'
                   f'.forEach(function (i) {{ i.setAttribute("aria-label", {json.dumps(self.question)}); }}); }}\n'
                   '  else { setTimeout(hide, 200); }\n'
                   "})();\n")
        # jupyterquiz's container div is left open by render_div; it is closed here, empty until the script runs
        container = render_div(div, False, False, False, 1_000_000, 640, 10, "left") + "</div>"
        return (self._static(folded) + container + re.sub(r"\s*\n\s*", "\n", build_styles(div, _palette()))
                + f"<script>{script}</script>")

    def _update(self, quiz: list, spec: dict) -> None:
        from IPython import get_ipython
        from IPython.display import update_display
        data, metadata = self.output = self._bundle(self.html(quiz, spec))
        if get_ipython() is None:      # a plain Python run (the tests): nothing to show
            return
        update_display(data, raw=True, metadata=metadata, display_id=self.display_id)


_JS_FILES = {"multiple_choice": ("helpers.js", "multiple_choice.js", "show_questions.js"),
             "numeric": ("helpers.js", "numeric.js", "show_questions.js")}
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_DROPPED_LINE = re.compile(r"\s*(//.*|console\.log\(.*\);?)?")


def _library_js(quiz: list) -> str:
    """jupyterquiz's own JavaScript for this question's type only (its build_script inlines every type, 38 kB),
    without comments, console logging and indentation: about a third of that, in every quiz's one output (Colab
    shows each output in its own frame, so each carries the code it runs)."""
    from importlib.resources import files

    kind = quiz[0]["type"]
    code = "\n".join(files("jupyterquiz").joinpath("js", name).read_text(encoding="utf-8")
                     for name in _JS_FILES[kind])
    # its few words a reader sees, in the reader's language (the same bytes in English)
    for en, text in (("Type numeric answer here:", _("Type numeric answer here:")), ("Correct!", _("Correct!")),
                     ("Incorrect -- try again.", _("Incorrect -- try again.")),
                     ("Incorrect. Try again.", _("Incorrect. Try again."))):
        code = code.replace(json.dumps(en), json.dumps(text, ensure_ascii=False))
    lines = [line.strip() for line in _BLOCK_COMMENT.sub("", code).splitlines()]
    kept = [line for line in lines if not _DROPPED_LINE.fullmatch(line)] + [""]
    # A line break after ; { or , or before }, never decides where a statement ends (no automatic semicolon hangs
    # on it), so those lines are joined (unless one may end in a // comment): a notebook stores every line of an
    # output as one more JSON string.
    return "".join(line + (" " if "//" not in line and (line.endswith((";", "{", ",")) or after.startswith("}"))
                           else "\n") for line, after in zip(kept, kept[1:]))


def _palette() -> dict:
    """jupyterquiz's default colours (display_quiz's, which render_div's callers pass in), but a darker green for
    "correct": white on the default #009113 reads at 3.5:1, under the 4.5:1 that axe-core (tests/test_site.py) asks."""
    return {"--jq-multiple-choice-bg": "#392061", "--jq-mc-button-bg": "#fafafa", "--jq-mc-button-border": "#e0e0e0e0",
            "--jq-mc-button-inset-shadow": "#555555", "--jq-many-choice-bg": "#f75c03ff",
            "--jq-numeric-bg": "#392061ff", "--jq-numeric-input-bg": "#c0c0c0", "--jq-numeric-input-label": "#101010",
            "--jq-numeric-input-shadow": "#999999", "--jq-string-bg": "#4c1a57", "--jq-incorrect-color": "#c80202",
            "--jq-correct-color": "#0a6b1f", "--jq-text-color": "#fafafa", "--jq-link-color": "#9abafa"}


def _record(name: str) -> dict:
    if name not in GLUED:
        raise ValueError(f"name must be a value glued earlier in this kernel, got {name!r}")
    return GLUED[name]


def shown(name: str) -> str:
    """The glued value `name` as the page shows it ('96%', '2.438', 'behind')."""
    text = _record(name)["text"]
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def numbers(name: str) -> list:
    """The numbers the glued value `name` shows, in order ('80%–96%' -> [80.0, 96.0])."""
    return glued_numbers(_record(name)["text"])[1]


def number(name: str) -> float:
    """The one number the glued value `name` shows ('96%' -> 96.0): what a choice is picked from."""
    found = numbers(name)
    if len(found) != 1:
        if smoke_run():             # a few training steps may glue 'nan': no number, and no claim to make
            return float("nan")
        raise ValueError(f"name {name!r} shows {len(found)} numbers ({shown(name)}); use numbers(name)")
    return found[0]


def ask(question: str, choices: Optional[Sequence[str]] = None, *, numeric: bool = False, unit: str = "",
        within: float = 0.1, surprise: bool = False) -> Question:
    """Show a question before the cell that measures its answer; return it for that cell's `q.answer(...)`.

    Give `choices` (>= 2 distinct strings) or numeric=True (with `unit`, and `within`: how close, as a share of
    the measured value, a reader's number must come on top of the measurement's own tolerance; with unit="%" the
    range stays within 0 and 100). `surprise`
    marks a question a first-time reader would likely get wrong (the suite wants a third of them so).
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question must be a non-empty string, got {question!r}")
    if not isinstance(numeric, bool) or not isinstance(surprise, bool):
        raise ValueError(f"numeric and surprise must be True or False, got numeric={numeric!r}, surprise={surprise!r}")
    if numeric == (choices is not None):
        raise ValueError("give either choices=[...] or numeric=True, got "
                         f"choices={choices!r}, numeric={numeric!r}")
    if choices is not None:
        if (isinstance(choices, str) or len(choices) < 2 or not all(isinstance(c, str) and c for c in choices)
                or len(set(choices)) != len(choices)):
            raise ValueError(f"choices must list >= 2 distinct non-empty strings, got {choices!r}")
    if not isinstance(unit, str):
        raise ValueError(f"unit must be a string such as 'bits/char', got {unit!r}")
    if isinstance(within, bool) or not isinstance(within, (int, float)) or not 0 <= within < 1:
        raise ValueError(f"within must be a share in [0, 1) of the measured value, got {within!r}")
    q = Question(question, choices, numeric, unit, float(within), surprise)
    try:
        from IPython import get_ipython
    except ImportError:    # pragma: no cover
        return q
    if get_ipython() is not None:
        q._show()
    return q
