"""Unit tests for book.utils, book.data and book.tokenizers."""
import os

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


def test_glue_outside_notebook_is_silent():
    assert glue("x", 1) is None


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
        def read(self):
            return self.payload
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
    with pytest.raises(ValueError, match=">= 1"):
        data.get_batch(torch.arange(10), 0, 2)


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
