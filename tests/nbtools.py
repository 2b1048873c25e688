"""Helpers for tests that read chapter notebooks."""
from __future__ import annotations

import math
import re
import sys
from typing import Optional
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from render import is_solution  # noqa: E402, F401  (a solution code cell, as tools/render.py knows it; re-exported)
from book.utils import glued_numbers, glued_spans  # noqa: E402  (the numbers a glued text holds, as book.glue reads)
CHAPTERS = ROOT / "chapters"


def chapter_paths():
    return sorted(CHAPTERS.glob("[0-9][0-9]_*.ipynb"))


def cells_tagged(path, tag: str):
    nb = nbformat.read(str(path), as_version=4)
    return [c for c in nb.cells if c.cell_type == "code" and tag in c.metadata.get("tags", [])]


def scratch_namespace(path) -> dict:
    """Exec the notebook's cells tagged `scratch` (the from-scratch definitions) in a fresh namespace."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    path = Path(path)
    if not path.is_absolute():
        path = CHAPTERS / path
    cells = cells_tagged(path, "scratch")
    if not cells:
        raise AssertionError(f"{path.name} has no cells tagged 'scratch'")
    ns = {"torch": torch, "nn": nn, "F": F, "math": math}
    for cell in cells:
        exec(compile(cell.source, f"{path.name}:scratch", "exec"), ns)
    return ns


def repository_url() -> str:
    """The repository URL, from its one home: _config.yml."""
    import yaml

    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def colab_setup_source(url: str) -> str:
    """The exact first cell every chapter must start with (hidden on the site, a no-op outside Colab)."""
    return ("# Colab setup: installs the course package from the repository (does nothing elsewhere).\n"
            "import sys\n"
            "if \"google.colab\" in sys.modules:\n"
            "    import subprocess\n"
            "    subprocess.run([sys.executable, \"-m\", \"pip\", \"install\", \"-q\", "
            f"\"git+{url}@main\"], check=True)")


def prose_template(cell) -> str:
    """The markdown an author wrote for a cell: its MyST template (glue roles; tools/render.py) if stored."""
    return cell.metadata.get("book", {}).get("template", cell.source)


def text_outputs(nb) -> list:
    """Every text output of a notebook (streams and text/* data), in order: what nbval compares."""
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                out.append(o["text"])
            for mime, value in o.get("data", {}).items():
                if mime.startswith("text/"):
                    out.append(value)
    return out


# ---- glued numbers: committed vs freshly executed ------------------------------------------
def glued(outputs) -> dict:
    """{name: (text value, tolerance spec or None)} of the myst-nb glue outputs in a cell's outputs."""
    found = {}
    for out in outputs:
        meta = out.get("metadata", {}) or {}
        scrap = meta.get("scrapbook")
        if not scrap:
            continue
        data = out.get("data", {})
        text = next((v for k, v in data.items() if k.endswith("text/plain")), None)
        found[scrap["name"]] = (text, meta.get("book_tolerance"))
    return found


def glue_drift(name: str, committed: str, fresh: str, spec) -> Optional[str]:
    """None when `fresh` is within the declared tolerance of `committed`, else what differs."""
    if spec is None:
        return "glued without a declared tolerance (use book.glue)"
    if spec.get("timing"):
        return None   # seconds on this machine: an illustration, never compared (CONTRIBUTING.md, "Timings")
    if spec.get("any") or committed == fresh:
        return None
    if committed is None or fresh is None:
        return f"committed {committed!r}, fresh {fresh!r}"
    shape_c, spans_c = glued_spans(committed)      # a range and a lone number (both ends alike) compare
    shape_f, spans_f = glued_spans(fresh)
    nums_c = [end for span in spans_c for end in span]
    nums_f = [end for span in spans_f for end in span]
    if not spec or shape_c != shape_f or len(nums_c) != len(nums_f):
        kind = "exact value expected" if not spec else "text around the numbers differs"
        return f"{kind}: committed {committed}, fresh {fresh}"
    for c, f in zip(nums_c, nums_f):
        ok = abs(f - c) <= spec.get("tol", 0.0) + spec.get("rel", 0.0) * abs(c)
        if "factor" in spec and c > 0 and f > 0:
            ok = ok or max(f / c, c / f) <= spec["factor"]
        if not ok:
            return f"committed {committed}, fresh {fresh}: outside {spec}"
    return None


def glue_drift_report(chapter: str, committed_outputs, fresh_outputs) -> list:
    """One line per glued value of a cell that is missing from, or drifted in, a fresh run."""
    old, new = glued(committed_outputs), glued(fresh_outputs)
    problems = []
    for name, (text, _) in old.items():
        if name not in new:
            problems.append(f"{chapter}: glue {name!r} (committed {text}) was not glued by the fresh run")
            continue
        spec = new[name][1]                  # the code's declaration today decides, except that a tolerance
        if spec and "spread" in spec and "spread" in (old[name][1] or {}):   # from a spread counts the committed
            spec = {**spec, "tol": old[name][1]["tol"]}   # run as a seed, never the fresh one it is to judge
        why = glue_drift(name, text, new[name][0], spec)
        if why:
            problems.append(f"{chapter}: glue {name!r}: {why}")
    problems += [f"{chapter}: glue {n!r} is new in the fresh run: re-execute the notebook" for n in new if n not in old]
    return problems


# ---- no law on seconds (CONTRIBUTING.md, "Timings") -------------------------------------------
# names of measured time: loop_s, t["s"], tf_ms, step_time, speedup, train_seconds, tokens per second (tps) ...
_TIMING_NAME = re.compile(r"(?:^|_)(?:s|ms|us|µs|secs?|seconds|times?|timings?|timed|speed|speedups?|faster|slower|"
                          r"tps|elapsed|duration|perf_counter)(?:$|_)")
# ... and the words a message uses for it
_TIMING_WORD = re.compile(r"\b(?:time|times|timings?|seconds|secs|ms|µs|speed|speed-?ups?|faster|slower)\b", re.I)
# counted quantities, the same on every machine
_COUNTED_NAME = re.compile(r"flops|positions|steps|calls|ops\b|count|matmuls", re.I)
ANY_MACHINE = "holds on any machine"   # a comment saying why a bound on seconds cannot fail (e.g. a part < its whole)


def _names(node) -> list:
    """Identifiers, attribute names and constant string subscripts (t["s"]) read by an expression."""
    import ast

    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id != "s":     # a bare `s` is any loop variable; t["s"], loop_s count
            out.append(n.id)
        elif isinstance(n, ast.Attribute):
            out.append(n.attr)
        elif isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
            out.append(n.slice.value)
    return out


def _text(node) -> str:
    import ast

    return " ".join(n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def timing_checks(source: str) -> list:
    """The `claim(...)`s, `assert`s and tolerant `glue(...)`s of a code cell that bound a measured time.

    A check is flagged when its condition reads a timing name (loop_s, t["s"], speedup), or when its message speaks
    of time and its condition reads no counted quantity (flops, positions, steps, calls). A glue is flagged when
    its value reads a timing name and it declares tol/rel/factor instead of timing=True. A check whose lines carry
    the comment "holds on any machine" (with the reason) is allowed.
    """
    import ast

    lines = source.splitlines()
    clean = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in lines)
    found = []
    for node in ast.walk(ast.parse(clean)):
        if isinstance(node, ast.Assert):
            cond, msg = node.test, node.msg
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("claim", "glue"):
            if node.func.id == "glue":
                kw = {k.arg for k in node.keywords}
                value = node.args[1] if len(node.args) > 1 else None
                if value is not None and kw & {"tol", "rel", "factor"} and "timing" not in kw \
                        and any(_TIMING_NAME.search(n) for n in _names(value)):
                    found.append(lines[node.lineno - 1].strip())
                continue
            cond = node.args[0] if node.args else None
            msg = node.args[1] if len(node.args) > 1 else None
        else:
            continue
        if cond is None:
            continue
        stmt = "\n".join(lines[node.lineno - 1:node.end_lineno])
        if ANY_MACHINE in stmt:
            continue
        names = _names(cond)
        timed = any(_TIMING_NAME.search(n) for n in names)
        worded = msg is not None and _TIMING_WORD.search(_text(msg)) and not any(_COUNTED_NAME.search(n) for n in names)
        if timed or worded:
            found.append(lines[node.lineno - 1].strip())
    return found


def quick_benchmark(script: str, *args: str):
    """Run benchmarks/<script> --quick (a smoke run that writes nothing); return (stdout, the last line's key=value
    fields as a dict)."""
    import subprocess

    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick", *args],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1]
    return out.stdout, dict(kv.split("=", 1) for kv in last.split() if "=" in kv)


# ---- where a trained number's tolerance comes from (book.glue's spread=; CONTRIBUTING.md, "Notebook checks") ------
TOLERANT = ("tol", "rel", "factor")


def spread_problems(chapter: str, outputs, recorded: dict, compared_exactly: bool = False) -> list:
    """One line per glue in `outputs` whose tolerance does not come from a declared spread across seeds.

    `recorded`: {glue name: [texts glued in the recorded runs with other seeds]} (book/results/glue_spread.csv).
    A glue with a tolerance (tol, rel, factor) must declare its spread (>= 3 seeds, margin >= 1), and its
    tolerance at the committed value must cover margin x the spread recomputed from the source today; an exact glue
    must not move between the recorded seeds unless nbval compares its cell exactly (`compared_exactly`: then every
    machine prints the same for the same seed, which the suite checks on every run).
    """
    problems = []
    for name, (text, spec) in glued(outputs).items():
        where = f"{chapter}: glue {name!r}"
        spec = spec or {}
        if spec.get("timing") or spec.get("any") or text is None:
            continue
        if not any(k in spec for k in TOLERANT):
            seeds = recorded.get(name, [])
            if len({text, *seeds}) > 1 and not compared_exactly:
                problems.append(f"{where} is compared exactly but moves between seeds ({[text, *seeds]}): "
                                "declare spread='glue_spread', margin=..., or glue it timing=True / tol='any'")
            continue
        info = spec.get("spread")
        if not info:
            problems.append(f"{where} has a tolerance {spec} but declares no spread across seeds")
            continue
        if info.get("error"):
            problems.append(f"{where}: {info['error']}")
            continue
        if info.get("seeds", 0) < 3 or not info.get("margin", 0) >= 1:
            problems.append(f"{where}: spread over {info.get('seeds')} seeds with margin {info.get('margin')}: "
                            "at least 3 seeds and a margin >= 1")
            continue
        if "values" in info:        # measured in the chapter: the values are in the record
            width = max(info["values"]) - min(info["values"])
        else:
            texts = recorded.get(name, []) + [text]
            columns = list(zip(*([end for span in glued_spans(t)[1] for end in span] for t in texts)))
            if len({glued_spans(t)[0] for t in texts}) != 1 or len(texts) < 3:
                problems.append(f"{where}: the recorded seeds {texts} do not give a spread: record it again")
                continue
            width = max((max(c) - min(c) for c in columns), default=0.0)
        need = info["margin"] * width
        for c in glued_numbers(text)[1]:
            allowed = spec.get("tol", 0.0) + spec.get("rel", 0.0) * abs(c)
            if allowed + 1e-9 < need:
                problems.append(f"{where}: tolerance {allowed:g} at {c:g} is narrower than margin "
                                f"{info['margin']:g} x spread {width:g} = {need:g}: re-execute the chapter")
                break
    return problems


# ---- figures and slider frames, with their alt text ------------------------------------------------------------
FRAME_RE = re.compile(r'^<img alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=]+)" width="(\d+)"')


def frame_parts(value: str):
    """(png bytes, width, alt) of a slider frame's HTML (book.widgets.frame_html), or None for any other HTML."""
    import base64
    import html
    m = FRAME_RE.match(value or "")
    return (base64.b64decode(m.group(2)), int(m.group(3)), html.unescape(m.group(1))) if m else None


def notebook_images(nb) -> list:
    """(where, png bytes, shown width, alt or None) of every inline figure and every slider frame of a notebook:
    figures from their PNG outputs and output metadata, frames from the widget state (HTML frames with their alt;
    Image widgets, which have none, as None)."""
    import base64
    found = []
    for k, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            if "image/png" in out.get("data", {}):
                meta = (out.get("metadata") or {}).get("image/png", {})
                found.append((f"cell {k}", base64.b64decode(out["data"]["image/png"]), int(meta.get("width", 0)),
                              meta.get("alt")))
    state = nb["metadata"].get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    for mid, model in state.items():
        if model.get("model_name") == "ImageModel":
            png = base64.b64decode(next(b["data"] for b in model.get("buffers", []) if b["path"] == ["value"]))
            found.append((f"widget {mid}", png, int(model["state"]["width"]), None))
        elif model.get("model_name") == "HTMLModel" and frame_parts(model["state"].get("value", "")):
            png, width, alt = frame_parts(model["state"]["value"])
            found.append((f"widget {mid}", png, width, alt))
    return found
