"""Recorded glue: tools/execute.py writes each chapter's glued values to book/results/glue/<chapter>.json, and
book.data.recorded_glue reads them back as Python values (chapter 8 reads chapter 3's results this way)."""
import json
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output
from nbtools import ROOT

from book import data
from book.tasks import LENGTH_BUCKETS

sys.path.insert(0, str(ROOT / "tools"))
import execute  # noqa: E402
import render  # noqa: E402

PREFIX = "application/papermill.record/"


def glued_notebook(values):
    outs = [new_output("display_data", data={PREFIX + "text/plain": text},
                       metadata={"scrapbook": {"name": name, "mime_prefix": PREFIX}, "book_tolerance": {}})
            for name, text in values.items()]
    return new_notebook(cells=[new_code_cell("glue(...)", outputs=outs, execution_count=1)])


def test_chapter_3s_results_come_back_as_values():
    ch3 = data.recorded_glue("03_bahdanau_attention")
    table = ch3["ch3_exact_by_length"]
    assert list(table) == list(LENGTH_BUCKETS)
    assert all(len(pair) == 2 and all(0 <= a <= 1 for a in pair) for pair in table.values())
    assert set(ch3["ch3_train_s"]) == {"no attention", "additive"}
    assert ch3["ch3_steps"] == 500 and ch3["ch3_plain_short"].endswith("%")


@pytest.mark.parametrize("record", sorted(data.GLUE_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_every_record_matches_its_notebooks_glue(record):
    nb = nbformat.read(ROOT / "chapters" / f"{record.stem}.ipynb", as_version=4)
    stored = {name: bundle["text/plain"] for name, bundle in render.glue_values(nb).items() if "text/plain" in bundle}
    assert json.loads(record.read_text())["values"] == stored, \
        f"re-record it: python tools/execute.py --record-only chapters/{record.stem}.ipynb"


def test_the_executor_writes_what_the_reader_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(execute, "GLUE_RECORDS", tmp_path)
    monkeypatch.setattr(data, "GLUE_DIR", tmp_path)
    nb = glued_notebook({"acc": "{(3, 7): (0.92, 1.0)}", "pct": "'94%'", "n": "500", "obj": "<Thing at 0x1>"})
    path = execute.record_glue(tmp_path / "99_test.ipynb", nb)
    assert path == tmp_path / "99_test.json"
    assert data.recorded_glue("99_test") == {"acc": {(3, 7): (0.92, 1.0)}, "pct": "94%", "n": 500,
                                             "obj": "<Thing at 0x1>"}      # not a literal: stays text


def test_record_only_records_without_running(tmp_path, monkeypatch):
    monkeypatch.setattr(execute, "GLUE_RECORDS", tmp_path)
    nb_path = tmp_path / "42_x.ipynb"
    nbformat.write(glued_notebook({"a": "1"}), nb_path)
    assert execute.main(["--record-only", str(nb_path)]) == 0
    assert json.loads((tmp_path / "42_x.json").read_text())["values"] == {"a": "1"}


def test_a_missing_record_says_how_to_make_it():
    with pytest.raises(FileNotFoundError, match=r"no recorded glue for chapter '77_nothing'.*--record-only"):
        data.recorded_glue("77_nothing")


@pytest.mark.parametrize("bad", ["", "chapters/03_bahdanau_attention", "03_bahdanau_attention.ipynb", 3, None])
def test_a_bad_chapter_name_is_refused(bad):
    with pytest.raises(ValueError, match="chapter must be a notebook's stem"):
        data.recorded_glue(bad)


def test_the_executor_and_the_package_agree():
    from book.train import LEADERBOARD_MIME
    assert execute.GLUE_RECORDS == data.GLUE_DIR
    assert execute.LEADERBOARD_MIME == LEADERBOARD_MIME       # defined in both: the executor imports no book module


def test_the_records_ship_with_the_package():
    lines = (ROOT / "pyproject.toml").read_text().splitlines()
    package_data = next(line for line in lines if line.startswith("book = ["))
    assert '"results/glue/*.json"' in package_data
