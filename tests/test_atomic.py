"""Every committed file is written atomically (book.files): a writer that fails midway leaves the old file byte for
byte as it was, with no temporary file beside it. The writers: book.files itself, the executor's notebooks, glue
records, runtimes.json and its tables, chapter 7's live export (moved into place only after the notebook was written),
book.export's .onnx + .json pair, the benchmarks' tables, and the corpus cache (book.data)."""
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import nbformat
import pytest

import book.files as files
from book import data
from book.files import atomic_write, write_together

ROOT = Path(__file__).resolve().parent.parent


def load_executor():
    spec = importlib.util.spec_from_file_location("execute_atomic", ROOT / "tools" / "execute.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _snapshot(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


class _Boom(OSError):
    """What a write that fails midway raises: a full disk (ENOSPC), a file size limit (EFBIG)."""


class _Os:
    """book.files' view of `os`, with some functions replaced (the rest of the process keeps the real os)."""

    def __init__(self, **replaced):
        self.__dict__.update(replaced)

    def __getattr__(self, name):
        return getattr(os, name)


def _fail_midway(monkeypatch, after_bytes: int = 10):
    """Make book.files write `after_bytes` bytes of a file's content and then fail (a full disk, a size limit)."""
    real_fdopen = os.fdopen

    class Half:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            self.f.write(data[:after_bytes])
            self.f.flush()
            raise _Boom("disk full midway")

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.f.__exit__(*exc)

    monkeypatch.setattr(files, "os", _Os(fdopen=lambda fd, mode: Half(real_fdopen(fd, mode))))


def _fail_rename(monkeypatch, on_call: int = 1):
    """Make the `on_call`-th os.replace in book.files fail (1: the first)."""
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == on_call:
            raise _Boom(f"rename of {dst} failed")
        return real(src, dst)

    monkeypatch.setattr(files, "os", _Os(replace=replace))


# ---- book.files ----------------------------------------------------------------------------------------------------
def test_atomic_write_writes_text_and_bytes_and_keeps_the_mode(tmp_path):
    target = tmp_path / "a.txt"
    assert atomic_write(target, "héllo\n") == target and target.read_bytes() == "héllo\n".encode()
    target.chmod(0o640)
    atomic_write(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01" and target.stat().st_mode & 0o777 == 0o640
    fresh = tmp_path / "new.txt"
    atomic_write(fresh, "x")
    umask = os.umask(0)
    os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask, "a new file gets open()'s mode, not mkstemp's 0o600"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "new.txt"]


def test_atomic_write_failing_midway_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "table.csv"
    target.write_bytes(b"old,table\n1,2\n")
    _fail_midway(monkeypatch)
    with pytest.raises(_Boom):
        atomic_write(target, "new,table\n" * 1000)
    assert target.read_bytes() == b"old,table\n1,2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"], "the temporary file is removed"


def test_atomic_write_failing_rename_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "x.json"
    target.write_text("{}\n")
    _fail_rename(monkeypatch)
    with pytest.raises(_Boom):
        atomic_write(target, '{"new": 1}\n')
    assert target.read_text() == "{}\n" and [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_write_together_is_all_or_nothing_while_writing(tmp_path, monkeypatch):
    a, b = tmp_path / "m.onnx", tmp_path / "m.json"
    a.write_bytes(b"old graph")
    b.write_text("old json")
    real_stage, calls = files._stage, []

    def stage(target, content):   # the second file fails while being written: the first must not be renamed yet
        calls.append(target)
        if len(calls) == 2:
            raise _Boom("second file failed")
        return real_stage(target, content)

    monkeypatch.setattr(files, "_stage", stage)
    with pytest.raises(_Boom):
        write_together({a: b"new graph", b: "new json"})
    assert a.read_bytes() == b"old graph" and b.read_text() == "old json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.onnx"]


@pytest.mark.parametrize("bad, error, message", [
    ({}, ValueError, "non-empty mapping"),
    ([("a", "b")], ValueError, "non-empty mapping"),
    ({1: "x"}, TypeError, "must be a path"),
    ({"a": 3}, TypeError, "must be str .* or bytes, got int"),
])
def test_write_together_names_a_bad_argument(tmp_path, bad, error, message):
    with pytest.raises(error, match=message):
        write_together(bad)


def test_atomic_write_into_a_missing_folder_fails_cleanly(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "no" / "x.txt", "x")
    assert list(tmp_path.iterdir()) == []


# ---- tools/execute.py ----------------------------------------------------------------------------------------------
@pytest.fixture
def executor(tmp_path, monkeypatch):
    """tools/execute.py with every committed path under tmp_path, and `execute` replaced by a fake run that returns
    a small notebook (no kernel): {name: (fail?, export?)} says what each notebook's run does."""
    ex = load_executor()
    chapters, results = tmp_path / "chapters", tmp_path / "results"
    (chapters / "_generated").mkdir(parents=True)
    (results / "glue").mkdir(parents=True)
    (results / "live").mkdir()
    monkeypatch.setattr(ex, "CHAPTERS", chapters)
    monkeypatch.setattr(ex, "GENERATED", chapters / "_generated")
    monkeypatch.setattr(ex, "RUNTIMES", chapters / "_generated" / "runtimes.json")
    monkeypatch.setattr(ex, "GLUE_RECORDS", results / "glue")
    monkeypatch.setattr(ex, "LIVE_RECORDS", results / "live")
    monkeypatch.delenv("BOOK_LIVE_DIR", raising=False)
    for k in ("BOOK_MAX_STEPS", "BOOK_SCALE", "BOOK_THREADS", "ATEN_CPU_CAPABILITY"):
        monkeypatch.delenv(k, raising=False)
    plan = {}

    def fake_execute(path, timeout=900):
        fail, export = plan.get(path.stem, (False, False))
        if export:   # what chapter 7's export cell does: write the pair into live_dir()
            live = Path(os.environ["BOOK_LIVE_DIR"])
            (live / "ch07_gpt.onnx").write_bytes(b"new graph from " + path.stem.encode())
            (live / "ch07_gpt.json").write_text('{"new": true}\n')
        if fail:
            raise RuntimeError(f"a cell of {path.stem} failed")
        nb = nbformat.read(path, as_version=4)
        nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"ran {path.stem}\n")]
        return nb, 1.5

    monkeypatch.setattr(ex, "execute", fake_execute)
    for name in ("01_a", "02_b", "07_c"):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('x')")])
        nbformat.write(nb, chapters / f"{name}.ipynb")
    (results / "live" / "ch07_gpt.onnx").write_bytes(b"the committed graph")
    (results / "live" / "ch07_gpt.json").write_text('{"committed": true}\n')
    return ex, chapters, results, plan


def test_executor_writes_the_notebook_atomically(executor, monkeypatch):
    ex, chapters, results, _ = executor
    path = chapters / "01_a.ipynb"
    before = path.read_bytes()
    _fail_midway(monkeypatch, after_bytes=20)
    with pytest.raises(_Boom):
        ex.main([str(path)])
    assert path.read_bytes() == before, "a notebook write that fails midway leaves the committed notebook"
    assert sorted(p.name for p in chapters.iterdir()) == ["01_a.ipynb", "02_b.ipynb", "07_c.ipynb", "_generated"]


def test_executor_writes_what_nbformat_writes(executor, tmp_path):
    ex, chapters, _, _ = executor
    path = chapters / "01_a.ipynb"
    assert ex.main([str(path)]) == 0
    nb = nbformat.read(path, as_version=4)
    nbformat.write(nb, tmp_path / "reference.ipynb")
    assert path.read_bytes() == (tmp_path / "reference.ipynb").read_bytes() and "ran 01_a" in path.read_text()


def test_runtimes_are_written_after_each_notebook(executor):
    """`execute.py a.ipynb failing.ipynb`: a's notebook, glue, runtimes.json and tables are all written."""
    ex, chapters, results, plan = executor
    plan["02_b"] = (True, False)
    with pytest.raises(RuntimeError, match="02_b failed"):
        ex.main([str(chapters / "01_a.ipynb"), str(chapters / "02_b.ipynb")])
    runtimes = json.loads((chapters / "_generated" / "runtimes.json").read_text())
    assert set(runtimes) == {"01_a"} and 1.5 in (runtimes["01_a"].get("cpu_s"), runtimes["01_a"].get("cuda_s"))
    assert "| 01_a |" in (chapters / "_generated" / "runtimes.md").read_text()
    assert (chapters / "_generated" / "leaderboard.md").is_file()
    assert (results / "glue" / "01_a.json").is_file() and not (results / "glue" / "02_b.json").exists()


def test_runtimes_json_write_failing_keeps_the_old_one(executor, monkeypatch):
    ex, chapters, _, _ = executor
    runtimes = chapters / "_generated" / "runtimes.json"
    runtimes.write_text('{"00_old": {"cpu_s": 3.0}}\n')
    before = runtimes.read_bytes()
    real = ex.atomic_write

    def failing(path, content):
        if Path(path) == runtimes:
            _fail_midway(monkeypatch)
        return real(path, content)

    monkeypatch.setattr(ex, "atomic_write", failing)
    with pytest.raises(_Boom):
        ex.main([str(chapters / "01_a.ipynb")])
    assert runtimes.read_bytes() == before


def test_glue_record_write_failing_keeps_the_old_record(executor, monkeypatch):
    ex, chapters, results, _ = executor
    record = results / "glue" / "01_a.json"
    record.write_text('{"values": {"old": "1"}}\n')
    before = record.read_bytes()
    nb = nbformat.read(chapters / "01_a.ipynb", as_version=4)
    _fail_midway(monkeypatch)
    with pytest.raises(_Boom):
        ex.record_glue(chapters / "01_a.ipynb", nb)
    assert record.read_bytes() == before and [p.name for p in record.parent.iterdir()] == ["01_a.json"]


def test_a_chapter_failing_after_its_export_leaves_the_committed_pair(executor):
    """Chapter 7 exports in cell 44 of 70: a run failing later must not replace book/results/live/."""
    ex, chapters, results, plan = executor
    live = _snapshot(results / "live")
    nb_before = (chapters / "07_c.ipynb").read_bytes()
    plan["07_c"] = (True, True)
    with pytest.raises(RuntimeError, match="07_c failed"):
        ex.main([str(chapters / "07_c.ipynb")])
    assert _snapshot(results / "live") == live
    assert (chapters / "07_c.ipynb").read_bytes() == nb_before
    assert "BOOK_LIVE_DIR" not in os.environ, "the executor leaves the environment as it found it"


def test_a_chapter_that_runs_through_publishes_its_export(executor, capsys):
    ex, chapters, results, plan = executor
    plan["07_c"] = (False, True)
    assert ex.main([str(chapters / "07_c.ipynb")]) == 0
    assert _snapshot(results / "live") == {"ch07_gpt.onnx": b"new graph from 07_c", "ch07_gpt.json": b'{"new": true}\n'}
    assert "exported" in capsys.readouterr().out
    assert "BOOK_LIVE_DIR" not in os.environ


def test_a_notebook_write_failing_leaves_the_committed_pair(executor, monkeypatch):
    """The pair moves only after the notebook was written: a failing notebook write keeps both as they were."""
    ex, chapters, results, plan = executor
    live = _snapshot(results / "live")
    plan["07_c"] = (False, True)
    monkeypatch.setattr(ex, "write_notebook", lambda nb, path: (_ for _ in ()).throw(_Boom("notebook write failed")))
    with pytest.raises(_Boom):
        ex.main([str(chapters / "07_c.ipynb")])
    assert _snapshot(results / "live") == live


def test_publishing_the_pair_failing_midway_keeps_the_old_pair(executor, monkeypatch):
    ex, _, results, _ = executor
    live = _snapshot(results / "live")
    staged = results.parent / "staged"
    staged.mkdir()
    (staged / "ch07_gpt.onnx").write_bytes(b"new graph" * 100)
    (staged / "ch07_gpt.json").write_text('{"new": true}\n' * 10)
    _fail_midway(monkeypatch)
    with pytest.raises(_Boom):
        ex.publish_live(staged)
    assert _snapshot(results / "live") == live


def test_the_tables_write_failing_keeps_the_old_tables(executor, monkeypatch):
    ex, chapters, _, _ = executor
    generated = chapters / "_generated"
    for name in ("runtimes.md", "leaderboard.md", "budget_leaderboard.md"):
        (generated / name).write_text(f"old {name}\n")
    before = _snapshot(generated)
    _fail_midway(monkeypatch)
    with pytest.raises(_Boom):
        ex.write_tables({"01_a": {"cpu_s": 2.0, "leaderboard": []}})
    assert _snapshot(generated) == before


def test_the_staging_folder_is_removed_after_a_failed_run(executor, monkeypatch):
    ex, chapters, _, plan = executor
    plan["07_c"] = (True, True)
    made, real = [], ex.tempfile.mkdtemp

    def mkdtemp(**kw):
        made.append(Path(real(**kw)))
        return str(made[-1])

    monkeypatch.setattr(ex.tempfile, "mkdtemp", mkdtemp)
    with pytest.raises(RuntimeError):
        ex.main([str(chapters / "07_c.ipynb")])
    assert made and not any(p.exists() for p in made)


# ---- book.export: the .onnx + .json pair ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    pytest.importorskip("onnxscript", reason="the exporter needs onnx and onnxscript (requirements.txt)")
    from book.export import export_gpt
    from book.gpt import GPT, GPTConfig
    from book.tokenizers import CharTokenizer

    tok = CharTokenizer("abcdefgh \n")
    small = GPT(GPTConfig(tok.vocab_size, 8, 16, 2, 1))
    path = tmp_path_factory.mktemp("pair") / "x.onnx"
    meta = export_gpt(small, tok, path)
    return tok, path, meta


def test_an_export_over_max_bytes_keeps_the_previous_pair(exported):
    from book.export import export_gpt, load_exported
    from book.gpt import GPT, GPTConfig

    tok, path, meta = exported
    before = _snapshot(path.parent)
    bigger = GPT(GPTConfig(tok.vocab_size, 8, 64, 2, 2))
    with pytest.raises(ValueError, match="more than max_bytes.*a previous export stays"):
        export_gpt(bigger, tok, path, max_bytes=meta["onnx_bytes"] + 5000)
    assert _snapshot(path.parent) == before
    load_exported(path)   # still a consistent pair


def test_an_export_failing_while_writing_keeps_the_previous_pair(exported, monkeypatch):
    from book.export import export_gpt, load_exported
    from book.gpt import GPT, GPTConfig

    tok, path, _ = exported
    before = _snapshot(path.parent)
    other = GPT(GPTConfig(tok.vocab_size, 8, 16, 2, 1))
    for fail in ((lambda: _fail_midway(monkeypatch, after_bytes=20_000)), (lambda: _fail_rename(monkeypatch, 1))):
        fail()
        with pytest.raises(_Boom):
            export_gpt(other, tok, path)
        monkeypatch.undo()
        assert _snapshot(path.parent) == before
    load_exported(path)


def test_an_export_failing_in_the_exporter_keeps_the_previous_pair(exported, monkeypatch):
    import torch

    from book.export import export_gpt
    from book.gpt import GPT, GPTConfig

    tok, path, _ = exported
    before = _snapshot(path.parent)

    def half_export(model, args, f, **kwargs):   # the exporter dies after writing part of its file
        Path(f).write_bytes(b"\x08partial")
        raise _Boom("exporter died")

    monkeypatch.setattr(torch.onnx, "export", half_export)
    with pytest.raises(_Boom):
        export_gpt(GPT(GPTConfig(tok.vocab_size, 8, 16, 2, 1)), tok, path)
    assert _snapshot(path.parent) == before


# ---- benchmarks/bench_common.py ------------------------------------------------------------------------------------
def test_a_benchmark_table_write_failing_keeps_the_old_table(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_common
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    table = tmp_path / "toy.csv"
    table.write_text("x,y\n1,2\n")
    before = table.read_bytes()
    _fail_midway(monkeypatch)
    with pytest.raises(_Boom):
        bench_common.write_rows(table, ["x", "y"], [dict(x=i, y=i * 2) for i in range(100)])
    assert table.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["toy.csv"]
    monkeypatch.undo()
    bench_common.write_rows(table, ["x", "y"], [dict(x=3, y=4)])
    assert table.read_bytes() == b"x,y\r\n3,4\r\n", "the CSV csv.writer writes to open(newline='')"


# ---- book.data: the corpus download --------------------------------------------------------------------------------
class _Response:
    """A fake urlopen response: `payload` in chunks, each after `delay` seconds."""

    def __init__(self, payload: bytes, delay: float = 0.0, chunk: int = 1 << 16):
        self.payload, self.delay, self.chunk = payload, delay, chunk

    def read1(self, n=-1):
        time.sleep(self.delay)
        out, self.payload = self.payload[:min(n, self.chunk)], self.payload[min(n, self.chunk):]
        return out

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    real = data.load_shakespeare().encode()
    monkeypatch.setenv("BOOK_DATA_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return real, tmp_path / "cache" / "transformers-gap-by-gap" / "tinyshakespeare.txt"


def test_a_slow_server_hits_the_overall_deadline(corpus, monkeypatch):
    real, cached = corpus
    monkeypatch.setattr(data, "DOWNLOAD_DEADLINE_S", 0.5)
    monkeypatch.setattr(data.urllib.request, "urlopen", lambda url, timeout: _Response(real, delay=0.1, chunk=1))
    start = time.monotonic()
    with pytest.raises(FileNotFoundError, match=r"TimeoutError: the download took longer than its deadline of 0.5 s"):
        data.load_shakespeare()
    assert time.monotonic() - start < 5 and not cached.exists()


def test_each_read_waits_at_most_the_socket_timeout(corpus, monkeypatch):
    seen = []
    monkeypatch.setattr(data.urllib.request, "urlopen", lambda url, timeout: seen.append(timeout) or _Response(b""))
    with pytest.raises(FileNotFoundError):
        data.load_shakespeare()
    assert seen and seen[0] <= data.DOWNLOAD_DEADLINE_S and seen[0] <= 15


def test_the_cache_is_written_atomically(corpus, monkeypatch):
    real, cached = corpus
    monkeypatch.setattr(data.urllib.request, "urlopen", lambda url, timeout: _Response(real))
    _fail_midway(monkeypatch, after_bytes=500_000)
    with pytest.warns(UserWarning, match="could not be cached"):
        assert data.load_shakespeare().encode() == real
    assert not cached.exists() and list(cached.parent.iterdir()) == [], "no truncated cache left behind"
    monkeypatch.setattr(files, "os", os)
    assert data.load_shakespeare().encode() == real and cached.read_bytes() == real


def test_a_read_only_cache_still_returns_the_verified_text(corpus, monkeypatch):
    real, cached = corpus

    def refuse(path, content):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(data.urllib.request, "urlopen", lambda url, timeout: _Response(real))
    monkeypatch.setattr(data, "atomic_write", refuse)
    with pytest.warns(UserWarning, match=r"downloaded and verified but could not be cached .*PermissionError"):
        text = data.load_shakespeare()
    assert text.encode() == real and not cached.exists()


def test_a_damaged_cache_is_downloaded_again(corpus, monkeypatch):
    real, cached = corpus
    cached.parent.mkdir(parents=True)
    cached.write_bytes(real[:500_000])   # what a non-atomic, interrupted write used to leave
    monkeypatch.setattr(data.urllib.request, "urlopen", lambda url, timeout: _Response(real))
    with pytest.warns(UserWarning, match="damaged"):
        assert data.load_shakespeare().encode() == real
    assert cached.read_bytes() == real
    cached.write_bytes(b"damaged")
    with pytest.raises(ValueError, match="sha256 mismatch"):   # without download, it still says what is wrong
        data.load_shakespeare(download=False)


def test_a_damaged_data_dir_file_is_still_refused(corpus, tmp_path, monkeypatch):
    real, _ = corpus
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "tinyshakespeare.txt").write_bytes(b"hello")
    monkeypatch.setattr(data.urllib.request, "urlopen", lambda url, timeout: _Response(real))
    with pytest.raises(ValueError, match="sha256 mismatch"):
        data.load_shakespeare(data_dir=str(tmp_path / "mine"))
