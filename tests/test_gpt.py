"""Tests for book.gpt: the GPT's shapes, parameter count, init, loss, causality, attention maps and optimizer."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from book.blocks import TransformerBlock
from book.gpt import GPT, Block, GPTConfig

B, T, C, H, L, V = 2, 5, 12, 3, 2, 7  # all distinct, T > 1


def _model(**kw) -> GPT:
    torch.manual_seed(0)
    cfg = dict(vocab_size=V, context_len=8, d_model=C, n_heads=H, n_layers=L)
    cfg.update(kw)
    return GPT(GPTConfig(**cfg))


def test_config_validation():
    with pytest.raises(ValueError, match="vocab_size must be a positive int"):
        GPTConfig(vocab_size=0)
    with pytest.raises(ValueError, match="divisible by n_heads"):
        GPTConfig(vocab_size=5, d_model=10, n_heads=3)
    assert GPTConfig(vocab_size=5, d_model=12, n_heads=3).d_head == 4


def test_forward_shapes_and_loss():
    model = _model()
    idx, targets = torch.randint(V, (B, T)), torch.randint(V, (B, T))
    logits = model(idx)
    assert logits.shape == (B, T, V)
    logits2, loss = model(idx, targets)
    assert_close(logits2, logits)
    assert_close(loss, F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1)))
    assert abs(loss.item() - math.log(V)) < 0.1  # small init: close to uniform guessing
    with pytest.raises(ValueError, match="longer than context_len"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        model(torch.zeros(9, dtype=torch.long))


def test_parameter_count_and_weight_tying():
    model = _model()
    per_block = 12 * C * C + 2 * C  # attention 4C^2 + FFN 8C^2 + two bias-free LayerNorm weights
    want = V * C + 8 * C + L * per_block + C  # tied embedding/head, positions, blocks, final norm
    assert sum(p.numel() for p in model.parameters()) == want
    assert model.lm_head.weight is model.tok_emb.weight
    untied = _model(tie_weights=False)
    assert sum(p.numel() for p in untied.parameters()) == want + V * C


def test_gqa_config_shrinks_kv_projections():
    model = _model(d_model=16, n_heads=4, n_kv_heads=2)
    attn = model.blocks[0].attn
    assert attn.k_proj.weight.shape == (8, 16) and attn.q_proj.weight.shape == (16, 16)
    assert model.new_cache(3, 6).k.shape == (L, 3, 2, 6, 4)


def test_nanogpt_style_init():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, d_model=128, n_heads=4, n_layers=4))
    assert abs(model.tok_emb.weight.std().item() - 0.02) < 0.002
    assert abs(model.blocks[0].attn.q_proj.weight.std().item() - 0.02) < 0.002
    resid_std = 0.02 / math.sqrt(2 * 4)
    assert abs(model.blocks[0].attn.out_proj.weight.std().item() - resid_std) < 0.001
    assert abs(model.blocks[0].ffn.down.weight.std().item() - resid_std) < 0.001
    biased = GPT(GPTConfig(vocab_size=50, d_model=8, n_heads=2, n_layers=1, bias=True))
    assert torch.all(biased.blocks[0].attn.q_proj.bias == 0)


def test_every_position_equals_its_own_prefix():
    """Teacher forcing: the logits at position t only depend on tokens 0..t."""
    model = _model().eval()
    idx = torch.randint(V, (B, 8))
    full = model(idx)
    for t in range(8):
        assert_close(model(idx[:, : t + 1])[:, -1], full[:, t], atol=1e-5, rtol=1e-5)


def test_block_matches_prenorm_formula():
    torch.manual_seed(0)
    block = Block(GPTConfig(vocab_size=V, d_model=C, n_heads=H)).eval()
    assert [name for name, _ in block.named_children()] == ["ln1", "attn", "ln2", "ffn", "resid_drop"]
    x = torch.randn(B, T, C)
    # the same function as Chapter 6's pre-norm causal TransformerBlock carrying the same weights
    ref = TransformerBlock(C, H, norm="pre", causal=True).eval()
    missing, unexpected = ref.load_state_dict(block.state_dict(), strict=False)
    assert not unexpected and sorted(missing) == ["ln1.bias", "ln2.bias"]   # the GPT's norms have no bias
    assert_close(block(x), ref(x), atol=1e-5, rtol=1e-5)


def test_attention_maps_with_and_without_a_cache():
    """need_weights=True appends each layer's weights (B, H, T, Tk); the usual returns stay as they were."""
    model = _model(n_kv_heads=1).eval()
    idx, targets = torch.randint(V, (B, 6)), torch.randint(V, (B, 6))
    logits, maps = model(idx, need_weights=True)
    assert_close(logits, model(idx))
    assert len(maps) == L and all(w.shape == (B, H, 6, 6) for w in maps)
    assert all((w.triu(1) == 0).all() and torch.allclose(w.sum(-1), torch.ones(B, H, 6)) for w in maps)
    logits2, loss, maps2 = model(idx, targets, need_weights=True)
    assert_close(loss, model(idx, targets)[1])
    assert_close(maps2[1], maps[1])
    cache = model.new_cache(B)
    _, first = model(idx[:, :4], cache=cache, need_weights=True)
    _, last = model(idx[:, 4:], cache=cache, need_weights=True)   # two new queries over all six keys
    for layer in range(L):
        assert last[layer].shape == (B, H, 2, 6)
        assert_close(torch.cat([F.pad(first[layer], (0, 2)), last[layer]], 2), maps[layer], atol=1e-5, rtol=1e-5)


def test_window_is_a_config_choice_and_changes_no_parameter():
    full = _model(positions="rope")
    windowed = GPT(GPTConfig(vocab_size=V, context_len=8, d_model=C, n_heads=H, n_layers=L, positions="rope",
                             window=2))
    windowed.load_state_dict(full.state_dict())
    idx = torch.randint(V, (B, 8))
    _, maps = windowed.eval()(idx, need_weights=True)
    assert all((w.tril(-2) == 0).all() for w in maps)   # each query sees itself and one key before it
    assert_close(windowed(idx)[:, :2], full.eval()(idx)[:, :2])   # within the window: the same


def test_optimizer_groups_and_training_step():
    model = _model()
    opt = model.optimizer(lr=1e-2, weight_decay=0.1)
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"]) and all(p.dim() < 2 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))
    idx = torch.randint(V, (B, 8))
    first = None
    for _ in range(30):  # memorise one batch
        _, loss = model(idx[:, :-1], idx[:, 1:])
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < first - 0.5


def test_dropout_active_only_in_training():
    model = _model(dropout=0.5)
    idx = torch.randint(V, (B, T))
    model.train()
    assert not torch.equal(model(idx), model(idx))
    model.eval()
    assert torch.equal(model(idx), model(idx))


def test_recipe_schedule_matches_nanogpt():
    from book.train import NANOGPT_CPU as r

    # nanoGPT's "I only have a MacBook" shakespeare_char run
    assert (r.n_layers, r.n_heads, r.d_model, r.context_len, r.batch_size, r.steps) == (4, 4, 128, 64, 12, 2000)
    assert (r.lr, r.min_lr, r.warmup, r.weight_decay, r.beta2, r.grad_clip, r.dropout) == (
        1e-3, 1e-4, 100, 0.1, 0.99, 1.0, 0.0)
    assert r.lr_at(0) == pytest.approx(1e-3 / 101)  # nanoGPT: lr * (it + 1) / (warmup + 1)
    assert r.lr_at(99) == pytest.approx(1e-3 * 100 / 101)
    assert r.lr_at(100) == pytest.approx(1e-3)
    assert r.lr_at(1050) == pytest.approx(1e-4 + 0.5 * 0.9e-3)  # half-way down the cosine
    assert r.lr_at(2000) == pytest.approx(1e-4) and r.lr_at(5000) == pytest.approx(1e-4)
    assert r.tokens == 2000 * 12 * 64
    cfg = r.config(65)
    assert (cfg.vocab_size, cfg.n_layers, cfg.bias, cfg.n_kv_heads) == (65, 4, False, None)


def _tiny_recipe(name, **kw):
    from book.train import GPTRecipe

    base = dict(n_layers=1, n_heads=2, d_model=8, context_len=6, batch_size=3, steps=6, lr=1e-2, warmup=2)
    base.update(kw)
    return GPTRecipe(name, **base)


def test_recipe_run_advances_and_stops_at_the_end():
    from book.train import RecipeRun

    data = torch.randint(V, (500,))
    run = RecipeRun(_tiny_recipe("tiny"), V, data, seed=0)
    run.advance(4)
    assert run.step == 4 and len(run.losses) == 4 and run.train_s > 0 and not run.done
    run.advance(10)  # never past the recipe's steps
    assert run.step == 6 and run.done
    assert run.opt.param_groups[0]["lr"] == pytest.approx(run.recipe.lr_at(5))
    same = RecipeRun(_tiny_recipe("tiny"), V, data, seed=0)
    same.advance(6)
    assert same.losses == run.losses  # seeded: the same batches and the same weights


def test_race_interleaves_and_stops_at_target():
    from book.train import race, time_to

    data = torch.randint(V, (500,))
    a, b = _tiny_recipe("a"), _tiny_recipe("b", steps=4)
    lines = []
    runs, curves = race([a, b], V, data, data, target=100.0, every=[2, 1], eval_windows=64,
                        stop_at_target=["b"], seed=0, log=lines.append)
    assert runs[0].step == 6 and runs[1].step == 1  # b stops at its first evaluation, a runs to its end
    assert [s for s, _, _ in curves[0]] == [2, 4, 6] and len(curves[1]) == 1
    assert len(lines) == 4 and "step" in lines[0]
    secs, step = time_to(curves[0], 100.0)
    assert step == 2 and secs == curves[0][0][1]
    assert time_to(curves[0], 0.0) is None
