"""Chapter 6's package additions: book.blocks.BlockLM (the ladder's language model, its residual stream) and
book.chapters.ch06.repeat_batch (a task that needs two attention layers)."""
import pytest
import torch

from book.blocks import BlockLM, TransformerBlock
from book.chapters.ch06 import repeat_batch

LADDER_FLAGS = [dict(n_heads=1, use_ffn=False, residual=False, use_norm=False),
                dict(n_heads=4, use_ffn=True, residual=True, use_norm=False),
                dict(n_heads=4, norm="pre"), dict(n_heads=4, norm="post")]


@pytest.mark.parametrize("flags", LADDER_FLAGS)
def test_block_lm_is_embeddings_blocks_and_head(flags):
    torch.manual_seed(0)
    flags = dict(flags)
    lm = BlockLM(11, 8, 16, 3, flags.pop("n_heads"), **flags)
    idx = torch.randint(0, 11, (2, 5))
    logits, stream = lm(idx, return_stream=True)
    assert logits.shape == (2, 5, 11) and len(stream) == 4 and all(h.shape == (2, 5, 16) for h in stream)
    x = lm.pos(lm.tok(idx))                                     # the same computation, spelled out
    torch.testing.assert_close(stream[0], x)
    for block, h in zip(lm.blocks, stream[1:]):
        x = block(x)
        torch.testing.assert_close(h, x)
    pre_norm = flags.get("use_norm", True) and flags.get("norm", "pre") == "pre"
    assert isinstance(lm.ln_f, torch.nn.Identity) != pre_norm  # only a Pre-Norm stack ends with a LayerNorm
    torch.testing.assert_close(lm(idx), lm.head(lm.ln_f(x)))
    assert all(isinstance(b, TransformerBlock) and b.causal for b in lm.blocks)


def test_block_lm_is_causal():
    torch.manual_seed(0)
    lm = BlockLM(7, 6, 8, 2, 2)
    idx = torch.randint(0, 7, (1, 6))
    changed = idx.clone()
    changed[0, 4] = (idx[0, 4] + 1) % 7
    torch.testing.assert_close(lm(idx)[:, :4], lm(changed)[:, :4])     # positions before 4 cannot see it


def test_block_lm_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_layers must be a positive int, got 0"):
        BlockLM(7, 6, 8, 0, 2)
    with pytest.raises(ValueError, match="d_model must be a positive int"):
        BlockLM(7, 6, -8, 2, 2)
    with pytest.raises(ValueError, match=r"idx \(B, T\) must be 2-D"):
        BlockLM(7, 6, 8, 1, 2)(torch.zeros(6, dtype=torch.long))


def test_repeat_batch_writes_one_segment_twice_in_a_row():
    x, y, copy = repeat_batch(64, 30, n_values=12, min_len=3, max_len=9, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == copy.shape == (64, 30) and copy.dtype == torch.bool
    assert torch.equal(x[:, 1:], y[:, :-1]) and 0 <= int(x.min()) and int(x.max()) < 12
    lengths = set()
    for b in range(64):
        where = copy[b].nonzero().flatten()
        L = len(where) + 1                                     # the second copy's first L - 1 positions
        start2 = int(where[0])                                 # x at start2 is the second copy's first token
        assert torch.equal(where, torch.arange(start2, start2 + L - 1)) and 3 <= L <= 9
        w = torch.cat([x[b], y[b, -1:]])
        assert torch.equal(w[start2:start2 + L], w[start2 - L:start2])       # the segment, twice in a row
        assert torch.equal(y[b, where], w[start2 - L + 1:start2])            # the answer: the first copy, one on
        lengths.add(L)
    assert len(lengths) > 3                                    # lengths (and places) vary by row


def test_repeat_batch_rejects_bad_arguments():
    with pytest.raises(ValueError, match="2 \\* max_len <= seq_len"):
        repeat_batch(2, 10, max_len=6)
    with pytest.raises(ValueError, match="2 <= min_len <= max_len"):
        repeat_batch(2, 10, min_len=5, max_len=4)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        repeat_batch(0, 10)


def test_the_residual_stream_keeps_each_positions_character_and_a_plain_stack_loses_it():
    from book.chapters.ch06 import token_in_stream

    torch.manual_seed(0)
    fit, test = torch.randint(0, 20, (64, 16)), torch.randint(0, 20, (64, 16))
    shares = {}
    for residual in (True, False):
        torch.manual_seed(0)
        lm = BlockLM(20, 16, 32, 3, 4, use_ffn=True, residual=residual, use_norm=False)
        shares[residual] = token_in_stream(lm, fit, test)
    assert len(shares[True]) == 4 and shares[True][0] > 0.95 and shares[False][0] > 0.95   # the embeddings: all there
    assert shares[True][-1] > 0.9 and shares[False][-1] < 0.6    # three blocks later, only the residual stack keeps it
    with pytest.raises(ValueError, match="windows"):
        token_in_stream(lm, fit[:0], test)


def test_head_stats_reads_a_uniform_and_a_previous_token_head():
    from book.chapters.ch06 import head_stats
    T = 12
    uniform = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]        # every past key alike
    prev = torch.diag(torch.ones(T - 1), -1)
    prev[0, 0] = 1.0                                                                   # all weight one step back
    maps = torch.stack([uniform, prev])[None, None].expand(2, 1, 2, T, T)             # (B, L, H, T, T)
    idx = torch.tensor([[0, 1, 2] * 4, [2, 1, 0] * 4])
    s = head_stats(maps, idx, {" ": 1, "\n": 2})
    assert s["look-back"].shape == (1, 2)
    assert torch.allclose(s["look-back"][0, 0], torch.tensor([q / 2 for q in range(8, T)]).mean())
    assert s["look-back"][0, 1] == 1 and s["previous"][0, 1] == 1 and s["entropy"][0, 1] == 0
    assert torch.allclose(s["newline"][0, 0], s["space"][0, 0], atol=0.02)           # a third of keys each, nearly


def test_identity_fit_and_copy_run_train_and_reject_bad_arguments():
    from book.chapters.ch06 import copy_run, identity_fit
    h = identity_fit(True, steps=3)
    assert len(h.train_loss) == 3 and h.train_loss[0] < 1.0     # residual: starts near the identity
    secs = {}
    acc = copy_run(1, 0, steps=2, lr=1e-3, warmup=1, device="cpu", train_seconds=secs)
    assert 0 <= acc <= 1 and list(secs) == ["copy, 1 layer(s), seed 0"]
    with pytest.raises(ValueError, match="steps"):
        identity_fit(True, steps=0)
    with pytest.raises(ValueError, match="n_layers"):
        copy_run(0, 0, steps=2, lr=1e-3, warmup=1, device="cpu", train_seconds={})


def test_the_newline_heads_sentence_reads_its_weights_on_the_line():
    from book.chapters.ch06 import check_and_glue_newline_head
    line = "AB:\nCD"
    T = len(line)
    maps = torch.zeros(2, 2, T, T)
    maps[..., 0] = 1.0                                   # every head looks at the first key...
    maps[1, 1, 4:, :] = 0.0
    maps[1, 1, 4:, 3] = 0.75                             # ...but layer 2, head 2 gives the newline 3/4 after it
    maps[1, 1, 4:, 2] = 0.25
    stats = {"newline": torch.tensor([[0.1, 0.1], [0.1, 0.9]]), "look-back": torch.tensor([[1.0, 1.0], [2.0, 2.0]])}
    names = ["layer 1, head 1", "layer 1, head 2", "layer 2, head 1", "layer 2, head 2"]
    assert check_and_glue_newline_head(stats, maps, line, names) == "layer 2, head 2"
    stats["newline"] = torch.tensor([[0.9, 0.1], [0.1, 0.1]])          # a newline head in layer 1: the claim fails
    with pytest.raises(AssertionError, match="not in layer 1"):
        check_and_glue_newline_head(stats, maps, line, names)
