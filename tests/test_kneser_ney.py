"""book.ngram's interpolated Kneser-Ney model: a hand-computed example, normalisation, and what it buys over add-k
without back-off on a slice of the corpus."""
import math

import pytest
import torch

from book import ngram
from book.chapters import ch01
from book.data import load_shakespeare, shakespeare_split
from book.tokenizers import CharTokenizer

# "abab a" with the ids ' ' = 0, 'a' = 1, 'b' = 2 (V = 3), discount D = 0.5
ABAB = torch.tensor([1, 2, 1, 2, 0, 1])


def test_bigram_by_hand():
    """Bigram counts: ab 2, ba 1, 'b ' 1, ' a' 1.
    Unigram (continuation counts, distinct left neighbours): a 2 (after b and ' '), b 1, ' ' 1; total 4, 3 types:
        P1(a) = (2 - .5)/4 + .5 * 3/4 * 1/3 = .375 + .125 = .5,   P1(b) = P1(' ') = .5/4 + .125 = .25.
    Context a: c = 2 (ab twice), 1 type:  P(b|a) = 1.5/2 + .5 * 1/2 * .25 = .8125,  P(a|a) = .25 * .5 = .125,
        P(' '|a) = .25 * .25 = .0625.
    Context b: c = 2 (ba, 'b '), 2 types: P(a|b) = .5/2 + .5 * 2/2 * .5 = .5,  P(' '|b) = .25 + .5 * .25 = .375,
        P(b|b) = .5 * .25 = .125.
    Context ' ': c = 1, 1 type:           P(a|' ') = .5/1 + .5 * .5 = .75,  P(b|' ') = P(' '|' ') = .5 * .25 = .125.
    """
    m = ngram.kneser_ney(ABAB, 3, 2, discount=0.5)
    want = torch.tensor([[.0625, .125, .8125], [.375, .5, .125], [.125, .75, .125]], dtype=torch.float64)
    torch.testing.assert_close(m.log_probs(torch.tensor([[1], [2], [0]])).exp(), want)


def test_trigram_by_hand_with_an_unseen_context():
    """Trigrams: aba, bab, 'ab ', 'b a', one each. Order 2 then counts distinct left neighbours of each bigram:
    ab 1 (b, at position 2; position 0 has none), ba 1, 'b ' 1, ' a' 1; order 1 is the bigram test's unigram.
    P(a | 'b ') = (1 - .5)/1 + .5 * 1/1 * P2(a | ' '),  P2(a | ' ') = .5/1 + .5 * P1(a) = .75,  so .875.
    P(b | aa): 'aa' never seen, so order 2 alone: P2(b | a) = .5/1 + .5 * 1/1 * P1(b) = .5 + .125 = .625."""
    m = ngram.kneser_ney(ABAB, 3, 3, discount=0.5)
    got = m(torch.tensor([[2, 0], [1, 1]]), torch.tensor([1, 2])).exp()
    torch.testing.assert_close(got, torch.tensor([.875, .625], dtype=torch.float64))


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_every_context_sums_to_one_seen_or_not(n):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 6, (300,), generator=g) % 5           # token 5 never occurs: still gets probability
    m = ngram.kneser_ney(ids, 6, n, discount=0.75)
    contexts = torch.cat([ids[:10 * (n - 1)].view(10, n - 1),                    # seen
                          torch.randint(0, 6, (10, n - 1), generator=g),        # mostly unseen
                          torch.full((1, n - 1), 5)])                           # surely unseen
    p = m.log_probs(contexts).exp()
    assert p.shape == (21, 6) and (p > 0).all()
    torch.testing.assert_close(p.sum(1), torch.ones(21, dtype=torch.float64))


def test_bits_match_a_loop_over_positions():
    m = ngram.kneser_ney(ABAB, 3, 3, discount=0.5)
    val = torch.tensor([1, 2, 0, 1, 1, 2])
    by_hand = -sum(float(m(val[i - 2:i][None], val[i:i + 1])) for i in range(2, 6)) / 4 / math.log(2)
    assert ngram.kneser_ney_bits(m, val, batch=3) == pytest.approx(by_hand)


def test_beats_add_k_on_the_corpus_and_keeps_improving_with_the_order():
    """First 200k training and 20k validation characters. Measured: KN 3.00, 2.90, 2.89 bits/char at n = 4, 5, 6;
    add-0.1 without back-off 3.20, 3.52, 4.10 (it gets worse from n = 5 on, as chapter 1's sweep shows)."""
    text = load_shakespeare()
    tok = CharTokenizer.from_text(text)
    train, val = (torch.tensor(tok.encode(t)) for t in shakespeare_split(text))
    train, val = train[:200_000], val[:20_000]
    kn = {n: ngram.kneser_ney_bits(ngram.kneser_ney(train, tok.vocab_size, n), val) for n in (4, 5, 6)}
    add_k = {n: ngram.ngram_bits(train.tolist(), val.tolist(), n, tok.vocab_size, k=0.1) for n in (4, 5, 6)}
    assert all(kn[n] < add_k[n] - 0.15 for n in (4, 5, 6)), (kn, add_k)
    assert add_k[6] > add_k[5] > add_k[4]                      # add-k alone: the "wall"
    assert kn[5] < kn[4] - 0.05 and kn[6] < kn[5] + 0.01, kn   # interpolation: better, then level


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="discount must lie in"):
        ngram.kneser_ney(ABAB, 3, 2, discount=1.0)
    with pytest.raises(ValueError, match="discount must be a number > 0"):
        ngram.kneser_ney(ABAB, 3, 2, discount=0)
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 2\)"):
        ngram.kneser_ney(ABAB, 2, 2)
    with pytest.raises(ValueError, match="at least n = 9 tokens"):
        ngram.kneser_ney(ABAB, 3, 9)
    with pytest.raises(ValueError, match="below 2\\*\\*62"):
        ngram.kneser_ney(ABAB.repeat(2), 1000, 7)
    m = ngram.kneser_ney(ABAB, 3, 3)
    with pytest.raises(ValueError, match=r"context should have shape \(2, 2\)"):
        m(torch.tensor([[1], [2]]), torch.tensor([0, 1]))
    with pytest.raises(TypeError, match="model must be a KneserNey"):
        ngram.kneser_ney_bits("model", ABAB)


def test_the_strongest_count_model_is_tuned_on_a_dev_split_never_on_validation():
    torch.manual_seed(0)
    train = torch.randint(0, 5, (3000,))
    val_a, val_b = torch.randint(0, 5, (400,)), torch.zeros(400, dtype=torch.long)
    a = ngram.strongest_count_model(train, val_a, 5, orders=(1, 2, 3), discounts=(0.5, 0.9))
    b = ngram.strongest_count_model(train, val_b, 5, orders=(1, 2, 3), discounts=(0.5, 0.9))
    assert (a["n"], a["discount"]) == (b["n"], b["discount"])          # the choice ignores the validation text
    cut = 2700
    dev = {(n, d): ngram.kneser_ney_bits(ngram.kneser_ney(train[:cut], 5, n, d), train[cut:])
           for n in (1, 2, 3) for d in (0.5, 0.9)}
    assert (a["n"], a["discount"]) == min(dev, key=dev.get)
    assert a["bits"] == pytest.approx(ngram.kneser_ney_bits(ngram.kneser_ney(train, 5, a["n"], a["discount"]), val_a))
    assert a["name"].startswith(f"Kneser-Ney {a['n']}-gram")
    with pytest.raises(ValueError, match="at least one"):
        ngram.strongest_count_model(train, val_a, 5, orders=())


def test_longest_seen_context_by_hand():
    """Train "abab a" (ids 1 2 1 2 0 1). Contexts followed by a token: length 1 a, b, ' '; length 2 ab, ba, 'b '
    (' a' ends the text, so nothing follows it). Validation "  aba" with max_len 2, positions 2, 3, 4:
    before 'a': '  ' unseen, ' ' seen -> 1; before 'b': ' a' unseen (never followed), 'a' seen -> 1;
    before 'a': ab -> 2."""
    got = ch01.longest_seen_context(ABAB, torch.tensor([0, 0, 1, 2, 1]), 3, 2)
    assert got.tolist() == [1, 1, 2]
    assert ch01.longest_seen_context(ABAB, torch.tensor([3, 3, 1]), 4, 1).tolist() == [0, 0]   # 3 never in train


def test_longest_seen_context_matches_a_loop_over_strings():
    text = load_shakespeare()[:30_000]
    tok = CharTokenizer.from_text(text)
    train, val = text[:25_000], text[25_000:26_000]
    got = ch01.longest_seen_context(torch.tensor(tok.encode(train)), torch.tensor(tok.encode(val)), tok.vocab_size, 5)
    body = train[:-1]                           # a context must be followed by a token
    want = [max(L for L in range(6) if L == 0 or val[t - L:t] in body) for t in range(5, len(val))]
    assert got.tolist() == want


def test_jelinek_mercer_by_hand():
    """"abab", V = 3, lam = .5. Unigram: a 2, b 2 of 4: P1(a) = .5 * 2/4 + .5 * 1/3 = .41667.
    Bigram: ab 2, ba 1; contexts a 2, b 1: P2(b | a) = .5 * 2/2 + .5 * P1(b) = .5 + .20833 = .70833.
    Context ' ' never seen: P2(a | ' ') = P1(a) = .41667.
    The unseen token ' ' after a: .5 * 0 + .5 * (.5 * 0 + .5/3)."""
    tables = {k: ngram.ngram_counts("abab", k) for k in (1, 2)}
    assert ch01.jelinek_mercer_prob(tables, "a", "b", 3, 0.5) == pytest.approx(0.5 + 0.5 * (0.25 + 1 / 6))
    assert ch01.jelinek_mercer_prob(tables, " ", "a", 3, 0.5) == pytest.approx(0.25 + 1 / 6)
    assert ch01.jelinek_mercer_prob(tables, "a", " ", 3, 0.5) == pytest.approx(0.25 / 3)
    probs = [ch01.jelinek_mercer_prob(tables, "b", w, 3, 0.7) for w in "ab "]
    assert sum(probs) == pytest.approx(1.0)


def test_jelinek_mercer_checker_accepts_the_reference_and_refuses_a_wrong_answer(capsys):
    assert ch01.check_jelinek_mercer(ch01.jelinek_mercer_prob)
    assert "Correct" in capsys.readouterr().out
    no_skip = lambda tables, context, token, V, lam: lam * 0 + (1 - lam) / V      # noqa: E731
    with pytest.raises(AssertionError, match="Hint: start from 1/V"):
        ch01.check_jelinek_mercer(no_skip)


def test_new_functions_refuse_bad_arguments():
    with pytest.raises(ValueError, match="more than max_len = 5"):
        ch01.longest_seen_context(ABAB, torch.tensor([1, 2]), 3, 5)
    with pytest.raises(ValueError, match=r"val_ids must lie in \[0, 3\)"):
        ch01.longest_seen_context(ABAB, torch.tensor([1, 2, 7]), 3, 1)
    tables = {k: ngram.ngram_counts("abab", k) for k in (1, 2)}
    with pytest.raises(ValueError, match=r"lam must lie in \[0, 1\]"):
        ch01.jelinek_mercer_prob(tables, "a", "b", 3, 1.5)
    with pytest.raises(ValueError, match="orders 1..n"):
        ch01.jelinek_mercer_prob({2: tables[2]}, "a", "b", 3, 0.5)


def test_add_k_scores_accept_counts_counted_once():
    text, val = "abracadabra abracadabra", "cadabra abr"
    for n in (1, 2, 3):
        counted = ngram.ngram_counts(text, n)
        assert ngram.ngram_bits(text, val, n, 6, counts=counted) == ngram.ngram_bits(text, val, n, 6)
        assert ch01.ngram_stats(text, val, n, counts=counted) == ch01.ngram_stats(text, val, n)
    with pytest.raises(ValueError, match=r"counts must be ngram_counts\(train, 3\)"):
        ngram.ngram_bits(text, val, 3, 6, counts=ngram.ngram_counts(text, 2))
