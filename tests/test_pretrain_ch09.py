"""Chapter 9's helpers in the package: who may look at whom (book.chapters.ch09.output_dependence), the instruction
pairs of the SFT section, and the copy test's rows and bits (book.pretrain)."""
import math

import pytest
import torch

from book.bert import BERT, EncoderConfig
from book.gpt import GPT, GPTConfig
from book.pretrain import passage_bits
from book.chapters.ch09 import instruction_pairs, repeated_passages
from book.chapters.ch09 import output_dependence

TINY = dict(context_len=5, d_model=16, n_heads=2, n_layers=1)


def test_output_dependence_reads_the_mask_off_the_module():
    torch.manual_seed(0)
    with torch.no_grad():
        gpt = output_dependence(GPT(GPTConfig(11, **TINY)).eval(), 5, 11)
        bert = output_dependence(BERT(EncoderConfig(11, **TINY)).eval(), 5, 11)
    assert gpt.shape == (5, 5) and torch.equal(gpt, torch.ones(5, 5, dtype=torch.bool).tril())
    assert bert.all()
    shifted = output_dependence(lambda ids: torch.roll(ids, 1, dims=1)[..., None].float(), 4, 7)
    assert torch.equal(shifted, torch.roll(torch.eye(4, dtype=torch.bool), 1, dims=0))   # out i reads in i - 1
    with pytest.raises(ValueError, match="T must be"):
        output_dependence(lambda ids: ids, 0, 7)


def test_instruction_pairs_ask_two_questions_per_line():
    pairs = instruction_pairs("Hello there, friend.\nshort\n  indented line here\nWhat say you to that\n")
    assert pairs == [("Q: first letter? Hello there, friend.\nA: ", "H\n"),
                     ("Q: first letter? What say you to that\nA: ", "W\n"),
                     ("Q: ends a sentence? Hello there, friend.\nA: ", "yes\n"),
                     ("Q: ends a sentence? What say you to that\nA: ", "no\n")]
    with pytest.raises(ValueError, match="min_len <= max_len"):
        instruction_pairs("x", min_len=5, max_len=4)


def test_repeated_passages_end_alike_and_differ_only_in_what_comes_first():
    data = torch.arange(100) % 50
    rows = repeated_passages(data, 6, 4, torch.tensor([98, 99]), torch.Generator().manual_seed(0))
    assert rows[True].shape == rows[False].shape == (4, 14)
    assert torch.equal(rows[True][:, -6:], rows[False][:, -6:])
    assert torch.equal(rows[True][:, :6], rows[True][:, -6:]) and not torch.equal(rows[False][:, :6], rows[True][:, :6])
    with pytest.raises(ValueError, match="more than 3 \\* length"):
        repeated_passages(data[:18], 6, 4, torch.tensor([98]), torch.Generator())


def test_passage_bits_is_the_mean_cost_of_the_passage_after_its_first_character():
    rows = torch.tensor([[1, 2, 3, 0, 1, 2, 3]])
    uniform = lambda x: torch.zeros(*x.shape, 4)
    assert passage_bits(uniform, rows, 3) == pytest.approx(2.0)                 # log2(4) per character
    sure = torch.full((1, 7, 4), -30.0)
    sure[0, torch.arange(6), rows[0, 1:]] = 30.0                                 # every next token certain
    assert passage_bits(None, rows, 3, logits=sure) == pytest.approx(0.0, abs=1e-6)
    assert math.isfinite(passage_bits(uniform, rows, 7))
    with pytest.raises(ValueError, match="2 <= length"):
        passage_bits(uniform, rows, 8)


def test_letter_copies_repeat_the_letters_after_the_colon_and_answer_scores_count_exact_matches():
    from book.chapters.ch09 import answer_scores, letter_copies
    s = letter_copies(torch.arange(3, 9), 4, 5, torch.Generator().manual_seed(0), colon=1, newline=2)
    assert s.shape == (5, 10) and torch.equal(s[:, :4], s[:, 5:9])
    assert (s[:, 4] == 1).all() and (s[:, 9] == 2).all() and ((s[:, :4] >= 3) & (s[:, :4] < 9)).all()

    def oracle(x, wrong_rows=()):                # position t predicts letter t - 4; rows in wrong_rows miss one
        logits = torch.full((*x.shape, 10), -20.0)
        for t in range(4, x.shape[1]):
            logits[torch.arange(len(x)), t, x[:, t - 4]] = 20.0
        logits[list(wrong_rows), 6] = 0.0
        return logits
    bits, char, whole = answer_scores(oracle, s, 4)
    assert bits == pytest.approx(0.0, abs=1e-6) and char == whole == 1.0
    _, char, whole = answer_scores(lambda x: oracle(x, wrong_rows=[0, 1]), s, 4)
    assert whole == pytest.approx(3 / 5) and char > whole                  # one wrong letter spoils a whole answer
    with pytest.raises(ValueError, match=r"\(B, 2n \+ 2\)"):
        answer_scores(oracle, s, 3)


def test_head_patterns_find_the_head_that_shows_each_pattern():
    from book.chapters.ch09 import head_patterns
    T = 5
    tokens = ["[CLS]", "cat", "sat", "it", "[SEP]"]
    prev = torch.zeros(T, T)
    prev[0, 0] = 1.0
    prev[torch.arange(1, T), torch.arange(T - 1)] = 1.0                 # every row on the token before
    cls = torch.zeros(T, T)
    cls[:, 0] = 1.0
    it_cat = torch.full((T, T), 1 / T)
    it_cat[3] = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0])                # "it" looks at "cat"
    maps = torch.stack([torch.stack([prev, cls]), torch.stack([it_cat, torch.full((T, T), 1 / T)])])   # (2, 2, T, T)
    score = head_patterns(maps, tokens)
    best = {name: divmod(int(s.argmax()), 2) for name, s in score.items()}
    assert best == {"previous token": (0, 0), "next token": (1, 1), "[CLS]": (0, 1), "'it' -> 'cat'": (1, 0),
                    "broadest": (1, 1)}
    assert score["previous token"][0, 0] == 1.0 and score["[CLS]"][0, 1] == 1.0
    assert score["'it' -> 'cat'"][1, 0] == pytest.approx(1 - 0.2)          # 1 from "it", 0.2 from the others
    with pytest.raises(ValueError, match="exactly one"):
        head_patterns(maps, tokens, pronoun="he")


def test_zero_heads_changes_the_output_only_while_active():
    from book.chapters.ch09 import zero_heads

    torch.manual_seed(0)
    gpt = GPT(GPTConfig(11, context_len=6, d_model=16, n_heads=4, n_layers=2)).eval()
    x = torch.randint(0, 11, (3, 6))
    with torch.no_grad():
        base = gpt(x)
        with zero_heads(gpt, 1, [2]):
            ablated = gpt(x)
        with zero_heads(gpt, 0, range(4)):                          # every head of block 1 silent: still runs
            silent = gpt(x)
        after = gpt(x)
    assert torch.equal(after, base)                                 # the hook is gone after the block
    assert not torch.allclose(ablated, base) and silent.shape == base.shape
    with pytest.raises(ValueError, match="heads must lie in"):
        zero_heads(gpt, 0, [4])


def test_zero_heads_matches_a_zeroed_slice_of_out_proj():
    from book.chapters.ch09 import zero_heads

    torch.manual_seed(1)
    gpt = GPT(GPTConfig(11, context_len=6, d_model=16, n_heads=4, n_layers=2)).eval()
    x = torch.randint(0, 11, (2, 6))
    with torch.no_grad():
        with zero_heads(gpt, 1, [1, 3]):
            hooked = gpt(x)
        D, w = gpt.blocks[1].attn.d_head, gpt.blocks[1].attn.out_proj.weight
        for h in (1, 3):
            w[:, h * D:(h + 1) * D] = 0                             # the same heads cut out of the projection
        assert torch.allclose(gpt(x), hooked, atol=1e-6)


def test_check_learned_plateau_accepts_a_plateau_and_refuses_a_drop(capsys):
    from book.chapters.ch09 import check_learned_plateau

    rope = [3.3 - 0.01 * i for i in range(100)]                     # leaves the plateau (3.3) at once
    assert check_learned_plateau(lambda p: [3.4] * 100 if p == "learned" else rope, plateau=3.3)
    assert check_learned_plateau(lambda p: [3.4] * 100, rope_losses=rope, plateau=3.3)
    with pytest.raises(AssertionError, match="still sit near"):
        check_learned_plateau(lambda p: rope, rope_losses=rope, plateau=3.3)     # RoPE's losses given as learned
    with pytest.raises(AssertionError, match="RoPE BERT should have left"):
        check_learned_plateau(lambda p: [3.4] * 100, rope_losses=[3.3] * 100, plateau=3.3)
    with pytest.raises(AssertionError, match="at least 50 steps"):
        check_learned_plateau(lambda p: [3.4] * 10, rope_losses=rope, plateau=3.3)
    with pytest.raises(AssertionError, match="finite training losses"):
        check_learned_plateau(lambda p: [float("nan")] * 100, rope_losses=rope, plateau=3.3)
