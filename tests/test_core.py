"""Unit tests for book.utils, book.data and book.tokenizers."""

import pytest
import torch
from hypothesis import given, settings, strategies as st

from book import check_shape, count_params, get_device, seed_everything, timed, glue
from book import data
from book.tokenizers import BPETokenizer, CharTokenizer, merge_pair, pair_counts


# ---- utils -----------------------------------------------------------------
def test_get_device_default_and_override(monkeypatch):
    monkeypatch.delenv("BOOK_DEVICE", raising=False)
    assert get_device().type in {"cuda", "mps", "cpu"}
    assert get_device("cpu").type == "cpu"
    monkeypatch.setenv("BOOK_DEVICE", "cpu")
    assert get_device().type == "cpu"


def test_get_device_rejects_bad_names(monkeypatch):
    with pytest.raises(ValueError, match="one of"):
        get_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="cuda"):
            get_device("cuda")
    if not torch.backends.mps.is_available():
        with pytest.raises(RuntimeError, match="MPS"):
            get_device("mps")


def test_seed_everything_reproduces_draws():
    g1 = seed_everything(3)
    a = torch.randn(4), torch.randint(10, (3,), generator=g1)
    g2 = seed_everything(3)
    b = torch.randn(4), torch.randint(10, (3,), generator=g2)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    with pytest.raises(ValueError, match="non-negative int"):
        seed_everything(-1)


def test_check_shape():
    x = torch.zeros(2, 5, 8)
    assert check_shape(x, (None, 5, 8), "x") is x
    with pytest.raises(ValueError, match=r"x should have shape \(\*, 8, 5\), got \(2, 5, 8\)"):
        check_shape(x, (None, 8, 5), "x")
    with pytest.raises(ValueError, match="shape"):
        check_shape(x, (2, 5), "x")
    with pytest.raises(TypeError, match="torch.Tensor"):
        check_shape([1, 2], (2,))


def test_count_params_and_timed():
    m = torch.nn.Linear(3, 4)
    assert count_params(m) == 16
    m.bias.requires_grad_(False)
    assert count_params(m) == 12 and count_params(m, trainable_only=False) == 16
    with timed() as t:
        sum(range(1000))
    assert 0 <= t["s"] < 5


def test_glue_outside_ipython_displays_nothing(capsys):
    assert glue("x", 1, tol=0.1) is None
    assert capsys.readouterr().out == ""


def test_glue_inside_ipython_stores_value_and_tolerance():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()          # the shell get_ipython() returns, as in a notebook kernel
    with capture_output() as cap:
        glue("ch0_bpc", "2.574", rel=0.02)
        glue("ch0_n", 4)
    (first, second) = cap.outputs
    assert first.data == {"application/papermill.record/text/plain": "'2.574'"}
    assert first.metadata["scrapbook"]["name"] == "ch0_bpc"
    assert first.metadata["book_tolerance"] == {"rel": 0.02}
    assert second.metadata["book_tolerance"] == {}          # no tolerance: must come out identical


@pytest.mark.parametrize("kwargs, message", [
    (dict(name="has space", value=1), "identifier"),
    (dict(name="x", value=1, tol=-1), "tol must be"),
    (dict(name="x", value=1, tol="some"), "tol must be"),
    (dict(name="x", value=1, rel=True), "rel must be"),
    (dict(name="x", value=1, factor=0.5), "factor must be"),
])
def test_glue_rejects_bad_names_and_tolerances(kwargs, message):
    with pytest.raises(ValueError, match=message):
        glue(**kwargs)


def test_step_budget_smoke_run_and_claim(monkeypatch):
    from book import claim, smoke_run, step_budget

    monkeypatch.delenv("BOOK_MAX_STEPS", raising=False)
    assert step_budget(500) == 500 and not smoke_run()
    assert claim(2 < 3, "two is below three") is None
    with pytest.raises(AssertionError, match="claim failed: val 3.1 >= 2.5"):
        claim(3.1 < 2.5, "val 3.1 >= 2.5")
    with pytest.raises(AssertionError):
        claim(torch.tensor(False), "a tensor truth value")
    with pytest.raises(ValueError, match="one truth value"):
        claim(torch.tensor([True, True]), "two values")
    with pytest.raises(ValueError, match="message"):
        claim(True, "")
    monkeypatch.setenv("BOOK_MAX_STEPS", "7")
    assert step_budget(500) == 7 and step_budget(3) == 3 and smoke_run()
    assert claim(3.1 < 2.5, "not expected to hold after 7 steps") is None    # evaluated, not raised
    for bad in ("0", "-2", "many"):
        monkeypatch.setenv("BOOK_MAX_STEPS", bad)
        with pytest.raises(ValueError, match="BOOK_MAX_STEPS"):
            step_budget(10)
    monkeypatch.delenv("BOOK_MAX_STEPS")
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="positive int"):
            step_budget(bad)


def test_gpu_scale_and_set_threads(monkeypatch):
    from book import gpu_scale, set_threads

    monkeypatch.delenv("BOOK_SCALE", raising=False)
    assert gpu_scale(torch.device("cpu")) is False and gpu_scale("cuda") is True
    monkeypatch.setenv("BOOK_SCALE", "gpu")
    assert gpu_scale("cpu") is True
    monkeypatch.setenv("BOOK_SCALE", "cpu")
    assert gpu_scale("cuda") is False
    monkeypatch.setenv("BOOK_SCALE", "tpu")
    with pytest.raises(ValueError, match="BOOK_SCALE"):
        gpu_scale("cpu")
    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("BOOK_THREADS", raising=False)
        assert set_threads(1) == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("BOOK_THREADS", "2")
        assert set_threads(1) == 2 and torch.get_num_threads() == 2
        monkeypatch.setenv("BOOK_THREADS", "two")
        with pytest.raises(ValueError, match="BOOK_THREADS"):
            set_threads(1)
        monkeypatch.delenv("BOOK_THREADS")
        with pytest.raises(ValueError, match="positive int"):
            set_threads(0)
    finally:
        torch.set_num_threads(before)


# ---- data ------------------------------------------------------------------
def test_load_shakespeare_from_env():
    text = data.load_shakespeare()
    assert len(text) == 1_115_394 and len(set(text)) == 65


def test_split_is_first_90_percent():
    text = "abcdefghij" * 10
    train, val = data.shakespeare_split(text)
    assert train + val == text and len(train) == 90
    with pytest.raises(ValueError, match="between 0 and 1"):
        data.shakespeare_split(text, 1.0)


def test_missing_corpus_error_says_where(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError) as e:
        data.load_shakespeare(download=False)
    msg = str(e.value)
    assert data.SHAKESPEARE_URL in msg and "BOOK_DATA_DIR" in msg and str(tmp_path / "cache") in msg


def test_download_is_verified_and_cached(tmp_path, monkeypatch):
    real = data.load_shakespeare().encode()
    monkeypatch.setenv("BOOK_DATA_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    class Response:
        def __init__(self, payload):
            self.payload = payload
        def read(self, n=-1):   # the loader reads in chunks until b""
            out, self.payload = self.payload, b""
            return out
        def __enter__(self):
            return self
        def __exit__(self, *a):
            return False

    monkeypatch.setattr(data.urllib.request, "urlopen", lambda url, timeout: Response(b"not shakespeare"))
    with pytest.raises(FileNotFoundError, match="wrong sha256"):
        data.load_shakespeare()
    monkeypatch.setattr(data.urllib.request, "urlopen", lambda url, timeout: Response(real))
    assert len(data.load_shakespeare()) == 1_115_394
    cached = tmp_path / "cache" / "transformers-gap-by-gap" / "tinyshakespeare.txt"
    assert cached.read_bytes() == real


def test_corrupt_local_file_is_rejected(tmp_path):
    (tmp_path / "tinyshakespeare.txt").write_text("hello")
    with pytest.raises(ValueError, match="sha256"):
        data.load_shakespeare(data_dir=str(tmp_path))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(1, 9), st.integers(0, 1000))
def test_get_batch_targets_are_shifted(batch_size, context_len, seed):
    stream = torch.arange(50)
    x, y = data.get_batch(stream, batch_size, context_len, torch.Generator().manual_seed(seed))
    assert x.shape == y.shape == (batch_size, context_len)
    assert torch.equal(y, x + 1)                      # the next token of arange is +1
    assert int(y.max()) <= 49


def test_get_batch_errors():
    with pytest.raises(ValueError, match="1-D"):
        data.get_batch(torch.zeros(2, 3, dtype=torch.long), 1, 1)
    with pytest.raises(ValueError, match="more than context_len"):
        data.get_batch(torch.arange(4), 1, 4)
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        data.get_batch(torch.arange(10), 0, 2)
    with pytest.raises(TypeError, match=r"data \(a 1-D tensor of token ids\) must be a torch.Tensor"):
        data.get_batch([1, 2, 3], 1, 1)


# ---- tokenizers --------------------------------------------------------------
def test_char_tokenizer_round_trip_and_errors():
    tok = CharTokenizer.from_text("hello world")
    assert tok.vocab_size == 8 and tok.decode(tok.encode("low hole")) == "low hole"
    with pytest.raises(ValueError, match=r"not in the vocabulary: \['z'\]"):
        tok.encode("lowz")
    with pytest.raises(ValueError, match=r"ids must be in \[0, 8\)"):
        tok.decode([99])
    with pytest.raises(ValueError, match="at least one"):
        CharTokenizer("")
    with pytest.raises(ValueError, match="single character"):
        CharTokenizer(["ab"])


def test_merge_pair_and_counts():
    assert merge_pair([1, 2, 1, 2, 3], (1, 2), 9) == [9, 9, 3]
    assert merge_pair([1, 1, 1], (1, 1), 7) == [7, 1]      # non-overlapping, left to right
    assert pair_counts([1, 2, 1, 2]) == {(1, 2): 2, (2, 1): 1}


def test_bpe_merges_most_frequent_pair_first_and_in_order():
    bpe = BPETokenizer.train("aaabdaaabac", vocab_size=259)
    # 'aa' is the most frequent pair, then ('aa', 'a') -> 'aaa', then ('aaa', 'b')
    assert [bpe.vocab[i] for i in range(256, 259)] == [b"aa", b"aaa", b"aaab"]
    assert bpe.encode("aaab") == [258]
    # merges must be applied in the order learned: applying only the first gives aa + a + b
    assert BPETokenizer(bpe.merges[:1]).encode("aaab") == [256, ord("a"), ord("b")]


def test_bpe_errors():
    with pytest.raises(ValueError, match=">= 256"):
        BPETokenizer.train("abc", 10)
    with pytest.raises(ValueError, match="does not exist yet"):
        BPETokenizer([(300, 1)])
    with pytest.raises(ValueError, match="unknown token id 999"):
        BPETokenizer().decode([999])
    assert BPETokenizer.train("a", 300).vocab_size == 256   # nothing to merge in one byte


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=0, max_size=60))
def test_bpe_round_trip_property(text):
    bpe = BPETokenizer.train("the theory of the thing, the thesis, tea" + text[:10], vocab_size=280)
    assert bpe.decode(bpe.encode(text)) == text
    assert "".join(bpe.pieces("the thing")) == "the thing"
