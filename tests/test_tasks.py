"""Tests of book/tasks.py: the toy translation and recall at distance k."""
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from book.tasks import (BOS, EOS, PAD, ToyTranslation, evaluate_translation, position_accuracy, recall_batch,
                        recall_many_batch, sequence_accuracy)
from book.chapters.ch05 import bites_batch

TASK = ToyTranslation()


def test_worked_example_reorders_noun_first_and_verb_last():
    src = "big red cat sees old dog and fox eats ant".split()
    assert TASK.translate(src) == "CAT BIG RED DOG OLD SEES AND FOX ANT EATS".split()


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), length=st.integers(3, 40))
def test_sample_has_exact_length_and_translation_is_invertible(seed, length):
    src = TASK.sample(random.Random(seed), length)
    assert len(src) == length
    tgt = TASK.translate(src)
    assert len(tgt) == length and sorted(w.lower() for w in tgt) == sorted(src)
    assert TASK.detranslate(tgt) == src


def test_translation_really_reorders():
    rng = random.Random(0)
    moved = [TASK.translate(s) != [w.upper() for w in s] for s in (TASK.sample(rng, 12) for _ in range(50))]
    assert all(moved)  # every clause moves its verb, so no sentence is a copy


def test_same_generator_seed_gives_same_batches():
    a = TASK.train_batch(8, 3, 20, torch.Generator().manual_seed(5))
    b = TASK.train_batch(8, 3, 20, torch.Generator().manual_seed(5))
    c = TASK.train_batch(8, 3, 20, torch.Generator().manual_seed(6))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert [TASK.decode(r, "src") for r in a.src] != [TASK.decode(r, "src") for r in c.src]


def test_test_sets_are_fixed_distinct_and_never_in_training():
    buckets = [(3, 6), (10, 12)]
    sets1, sets2 = TASK.test_sets(buckets, 30), TASK.test_sets(buckets, 30)
    test_sentences = set()
    for (lo, hi), batch in sets1.items():
        assert torch.equal(batch.src, sets2[(lo, hi)].src)
        sents = [" ".join(TASK.decode(row, "src")) for row in batch.src]
        assert len(set(sents)) == len(sents) == 30
        assert all(lo <= int(n) <= hi for n in batch.src_lengths)
        test_sentences |= set(sents)
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        b = TASK.train_batch(64, 3, 12, g)
        train = {" ".join(TASK.decode(row, "src")) for row in b.src}
        assert not train & test_sentences
        assert not any(TASK.is_test(s.split()) for s in train)


def test_batch_layout_bos_eos_pad_and_masks():
    sents = [TASK.sample(random.Random(1), 3), TASK.sample(random.Random(2), 7)]
    b = TASK.make_batch(sents)
    assert b.src.shape == (2, 7) and b.tgt_in.shape == (2, 8) and b.tgt_out.shape == (2, 8)
    assert b.src.dtype == torch.long
    assert b.src_lengths.tolist() == [3, 7] and b.tgt_lengths.tolist() == [4, 8]
    assert (b.tgt_in[:, 0] == BOS).all()
    assert b.tgt_out[0, 3] == EOS and (b.tgt_out[0, 4:] == PAD).all() and b.tgt_out[1, 7] == EOS
    torch.testing.assert_close(b.tgt_in[:, 1:4], b.tgt_out[:, :3])
    assert b.src_keep_mask.tolist()[0] == [True] * 3 + [False] * 4   # True = may attend
    assert TASK.decode(b.tgt_out[0], "tgt") == TASK.translate(sents[0])
    assert TASK.decode(b.src[1], "src") == sents[1]


def test_vocabularies_share_specials_and_are_disjoint_words():
    assert TASK.src_vocab[:3] == TASK.tgt_vocab[:3] == ["<pad>", "<bos>", "<eos>"]
    assert len(TASK.src_vocab) == len(TASK.tgt_vocab) == 23
    assert not set(TASK.src_vocab[3:]) & set(TASK.tgt_vocab[3:])


def test_sequence_accuracy_exact_and_token():
    target = torch.tensor([[5, 6, EOS, PAD], [7, 8, 9, EOS]])
    assert sequence_accuracy(target.clone(), target) == (1.0, 1.0)
    pred = torch.tensor([[5, 6, EOS, PAD], [7, 3, 9, EOS]])
    exact, token = sequence_accuracy(pred, target)
    assert exact == 0.5 and token == pytest.approx(6 / 7)
    short = torch.tensor([[5, 6], [7, 8]])            # stopped early: no EOS, so not exact
    assert sequence_accuracy(short, target) == (0.0, pytest.approx(4 / 7))
    with pytest.raises(ValueError, match="same batch size"):
        sequence_accuracy(pred[:1], target)


def test_evaluate_translation_with_an_oracle_and_a_fool():
    sets = TASK.test_sets([(3, 5), (8, 9)], 10)
    lookup = {tuple(s.tolist()): t for b in sets.values() for s, t in zip(b.src, b.tgt_out)}
    oracle = lambda src, max_len: torch.stack([lookup[tuple(s.tolist())] for s in src])  # noqa: E731
    assert all(v == (1.0, 1.0) for v in evaluate_translation(oracle, sets).values())
    fool = lambda src, max_len: torch.full((src.shape[0], max_len), EOS)  # noqa: E731
    assert all(v[0] == 0.0 for v in evaluate_translation(fool, sets).values())


def test_recall_batch_puts_the_answer_after_the_marker():
    x, y, k = recall_batch(16, 10, n_values=4, generator=torch.Generator().manual_seed(0))
    assert x.shape == (16, 10) and y.shape == k.shape == (16,)
    for row, ans, dist in zip(x, y, k):
        assert (row == 4).sum() >= 1 and row[10 - dist - 1] == 4 and row[10 - dist] == ans
    assert 1 <= k.min() and k.max() <= 9
    x, y, k = recall_batch(4, 10, distance=9)
    assert (x[:, 0] == 8).all() and (k == 9).all() and torch.equal(y, x[:, 1])


def test_recall_batch_max_distance_limits_k_and_keeps_the_default_draws():
    x, y, k = recall_batch(256, 20, generator=torch.Generator().manual_seed(0), max_distance=3)
    assert set(k.tolist()) == {1, 2, 3}
    rows = torch.arange(256)
    assert (x[rows, 20 - k - 1] == 8).all() and torch.equal(y, x[rows, 20 - k])
    a = recall_batch(8, 20, generator=torch.Generator().manual_seed(1))
    b = recall_batch(8, 20, generator=torch.Generator().manual_seed(1), max_distance=19)   # the default, explicitly
    assert all(torch.equal(u, v) for u, v in zip(a, b))


def test_recall_many_batch_layout():
    x, y = recall_many_batch(5, 3, 4, n_values=6, generator=torch.Generator().manual_seed(0))
    assert x.shape == (5, 1 + 3 + 4 + 3) and y.shape == (5, 3)
    assert (x[:, 0] == 6).all() and torch.equal(x[:, 1:4], y) and (x[:, -3:] == 7).all()
    assert (x[:, 1:-3] < 6).all()                               # values and filler, no marker or query among them
    x0, _ = recall_many_batch(2, 1, 0)
    assert x0.shape == (2, 3)                                   # marker, the value, its query


@pytest.mark.parametrize("kwargs, match", [
    (dict(batch_size=2, n_digits=0, delay=3), "n_digits must be a positive int, got 0"),
    (dict(batch_size=2, n_digits=2, delay=-1), "delay must be an int >= 0, got -1"),
    (dict(batch_size=2, n_digits=2, delay=3, n_values=1), "n_values >= 2"),
])
def test_recall_many_batch_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        recall_many_batch(**kwargs)


def test_position_accuracy_counts_real_targets_and_skips_ids():
    target = torch.tensor([[5, 6, 7, EOS], [5, 9, EOS, PAD]])
    pred = torch.tensor([[5, 0, 7], [4, 9, EOS]])               # shorter than the target: padded
    acc, count = position_accuracy(pred, target)
    assert count.tolist() == [2, 2, 2, 1] and acc.tolist() == [0.5, 0.5, 1.0, 0.0]
    acc, count = position_accuracy(pred, target, skip=[9, 6])
    assert count.tolist() == [2, 0, 2, 1] and acc[0] == 0.5 and torch.isnan(acc[1]) and acc[2] == 1.0 and acc[3] == 0
    with pytest.raises(ValueError, match="same batch size"):
        position_accuracy(pred[:1], target)
    with pytest.raises(ValueError, match="pred must be 2-D"):
        position_accuracy(pred[0], target)


@pytest.mark.parametrize("kwargs, match", [
    (dict(batch_size=2, seq_len=5, max_distance=5), "max_distance must be in 1..4"),
    (dict(batch_size=2, seq_len=5, max_distance=2, distance=1), "not given with distance"),
    (dict(batch_size=2, seq_len=1), "seq_len >= 2"),
    (dict(batch_size=2, seq_len=5, distance=5), "distance must be in 1..4"),
    (dict(batch_size=0, seq_len=5), "batch_size must be a positive int, got 0"),
    (dict(batch_size=2, seq_len=5, distance=2.5), "distance must be a positive int or None, got 2.5"),
])
def test_recall_batch_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        recall_batch(**kwargs)


def test_bad_arguments_and_bad_sentences():
    with pytest.raises(ValueError, match="no sentence of length 2"):
        TASK.sample(random.Random(0), 2)
    with pytest.raises(ValueError, match="split must be"):
        TASK.sample_split(random.Random(0), 5, "val")
    with pytest.raises(ValueError, match="side must be"):
        TASK.encode(["cat"], "middle")
    with pytest.raises(ValueError, match="min_len <= max_len"):
        TASK.train_batch(4, 10, 5)
    with pytest.raises(ValueError, match="unknown source word"):
        TASK.translate(["cat", "sees", "zebra"])
    with pytest.raises(ValueError, match="not a sentence"):
        TASK.translate(["big", "cat"])
    with pytest.raises(ValueError, match="unknown target word"):
        TASK.detranslate(["ZEBRA"])
    with pytest.raises(ValueError, match="adjective must follow its noun"):
        TASK.detranslate(["BIG", "CAT"])
    with pytest.raises(ValueError, match="two noun phrases"):
        TASK.detranslate(["CAT", "SEES"])
    with pytest.raises(ValueError, match="disjoint"):
        ToyTranslation(nouns=("cat", "cat"))
    with pytest.raises(ValueError, match="test_percent"):
        ToyTranslation(test_percent=0)
    with pytest.raises(ValueError, match="at least one noun"):
        ToyTranslation(verbs=())
    with pytest.raises(ValueError, match="max_adjectives"):
        ToyTranslation(max_adjectives=7)


def test_alignment_is_the_permutation_behind_the_translation():
    src = "big cat sees dog and odd red fox eats ant".split()
    align = TASK.alignment(src)
    assert align == [1, 0, 3, 2, 4, 7, 5, 6, 9, 8]
    assert [src[i].upper() for i in align] == TASK.translate(src)
    assert sorted(align) == list(range(len(src)))


@pytest.mark.parametrize("bad", ["cat sees", "cat dog sees owl", "cat sees dog and", "and cat sees dog",
                                 "cat sees dog owl", "big big big cat sees dog"])
def test_alignment_rejects_non_sentences(bad):
    with pytest.raises(ValueError, match="not a sentence"):
        TASK.alignment(bad.split())


def test_needle_batch_puts_one_value_k_steps_before_the_end():
    from book.chapters.ch10 import needle_batch
    x, y, k = needle_batch(32, 10, n_values=4, generator=torch.Generator().manual_seed(0))
    assert x.shape == (32, 10) and y.shape == k.shape == (32,)
    assert ((x != 4).sum(1) == 1).all()                         # exactly one needle per row, the rest filler
    assert torch.equal(x[torch.arange(32), 10 - k], y) and ((k >= 1) & (k <= 10)).all()
    x, y, k = needle_batch(3, 6, distance=6)                     # k = T: the very first token
    assert torch.equal(x[:, 0], y) and (k == 6).all()


@pytest.mark.parametrize("kwargs, match", [(dict(batch_size=2, seq_len=5, distance=6), "distance must be in 1..5"),
                                           (dict(batch_size=2, seq_len=5, distance=0),
                                            "distance must be a positive int or None, got 0"),
                                           (dict(batch_size=0, seq_len=5), "batch_size must be a positive int"),
                                           (dict(batch_size=2, seq_len=5, n_values=1), "n_values >= 2")])
def test_needle_batch_bad_arguments(kwargs, match):
    from book.chapters.ch10 import needle_batch
    with pytest.raises(ValueError, match=match):
        needle_batch(**kwargs)


@pytest.mark.parametrize("call, match", [
    (lambda: TASK.train_batch(0, 5, 6), "batch_size must be a positive int, got 0"),
    (lambda: TASK.train_batch(4, 5, 6.5), "max_len must be a positive int, got 6.5"),
    (lambda: bites_batch(2, 8, distractor_p=1.5), r"distractor_p must lie in \[0, 1\], got 1.5"),
    (lambda: bites_batch(0, 8), "batch_size must be a positive int, got 0"),
    (lambda: ToyTranslation(test_percent=True), "test_percent must be a positive int, got True"),
])
def test_the_checks_name_the_bad_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_copy_back_batch_puts_the_answer_k_back():
    from book.tasks import copy_back_batch
    x, y, k = copy_back_batch(3, 8, torch.tensor([1, 2, 4]), n_letters=2, n_values=16,
                              generator=torch.Generator().manual_seed(0))
    assert x.shape == (3, 8) and torch.all(x[:, -1] == 17)                 # "?" at the end
    rows = torch.arange(3)
    assert torch.equal(x[rows, 7 - k], y)                                   # the answer sits k back
    assert torch.all(x[rows, 6 - k] < 16)                                   # the other letter just before it
    for r, kr in enumerate(k.tolist()):
        assert torch.all(x[r, 8 - kr:7] == 16)                              # k - 1 dots after the answer
        assert torch.all(x[r, :6 - kr] == 16)                               # dots pad the front
    x, y, k = copy_back_batch(5, 6, 2)
    assert torch.equal(k, torch.full((5,), 2)) and torch.equal(x[:, 3], y)
    with pytest.raises(ValueError, match=r"distances in 1..4"):
        copy_back_batch(2, 8, 5)
    with pytest.raises(ValueError, match=r"distances in 1..4"):
        copy_back_batch(2, 8, torch.tensor([0, 1]))
