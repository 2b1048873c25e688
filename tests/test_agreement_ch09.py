"""Chapter 9's from-scratch cells (tagged `scratch`) agree with book.objectives."""
import pytest
import torch

from book.objectives import IGNORE, PretrainVocab, mask_tokens, span_corrupt
from nbtools import scratch_namespace

VOCAB = PretrainVocab(23, n_sentinels=8)


@pytest.fixture(scope="module")
def ns():
    ns = scratch_namespace("09_bert_gpt_t5.ipynb")
    ns["IGNORE"] = IGNORE          # the notebook imports it from book.objectives
    return ns


def test_scratch_masking_equals_package(ns):
    ids = torch.randint(0, VOCAB.n_chars, (3, 50), generator=torch.Generator().manual_seed(0))
    inputs, labels = ns["mlm_mask"](ids, VOCAB, generator=torch.Generator().manual_seed(5))
    ref = mask_tokens(ids, VOCAB, generator=torch.Generator().manual_seed(5))
    assert inputs.shape == labels.shape == (3, 50)
    assert torch.equal(inputs, ref.inputs) and torch.equal(labels, ref.labels)


@pytest.mark.parametrize("seed", range(5))
def test_scratch_spans_equal_package(ns, seed):
    ids = torch.randint(0, VOCAB.n_chars, (4, 37), generator=torch.Generator().manual_seed(seed))
    batch = span_corrupt(ids, VOCAB, generator=torch.Generator().manual_seed(seed))
    for row in range(4):
        enc, target = ns["spans_to_example"](ids[row], batch.noise[row], VOCAB)
        assert enc == batch.enc_in[row].tolist()
        assert target == batch.dec_out[row].tolist()
