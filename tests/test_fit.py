"""The one training loop (book.optim.fit, re-exported by book.train), its schedules, the one optimizer builder,
and the bugs it fixed: weight decay on norms in train_lm's default, train/eval mode left wrong after an error,
generate on a recurrent LM."""
import pytest
import torch
import torch.nn as nn

from book.gpt import GPT, GPTConfig
from book.rnn import CharRNN

V = 7


class TinyLM(nn.Module):
    """Embedding -> LayerNorm -> head, plus one 1-D parameter the loss never moves (its gradient is 0)."""

    def __init__(self, vocab: int = V, d: int = 8):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.idle = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.head(self.norm(self.emb(x))) + 0 * self.idle.sum()


def _stream(n: int = 400):
    return torch.arange(n) % V


def _fit_batches(model, seed: int = 0):
    from book.data import get_batch

    g = torch.Generator().manual_seed(seed)
    return lambda: get_batch(_stream(), 4, 6, g)


def _lrs(schedule, steps=10, **kw):
    """The rate of the optimizer's one group at every step of a fit run (peak 1.0)."""
    from book.train import fit

    model = TinyLM()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    seen = []

    def loss_fn(m, batch):
        seen.append(opt.param_groups[0]["lr"])
        return m(batch[0]).logsumexp(-1).mean()

    fit(model, _fit_batches(model), loss_fn=loss_fn, optimizer=opt, steps=steps, schedule=schedule,
        progress=False, **kw)
    return seen


# ---- schedules ----

def test_named_schedules_give_the_lesson_functions_values():
    from book.train import warmup_cosine, warmup_stable_decay

    cos = _lrs("warmup_cosine", warmup=2)
    assert cos[0] == pytest.approx(1 / 3) and cos[1] == pytest.approx(2 / 3) and cos[2] == pytest.approx(1.0)
    assert cos == pytest.approx([warmup_cosine(s, 10, 2, 1.0, 0.1) for s in range(10)])
    assert cos[6] == pytest.approx(0.1 + 0.45 * (1 + torch.cos(torch.tensor(torch.pi / 2)).item()))
    wsd = _lrs("wsd", warmup=2, decay_frac=0.5)
    assert wsd == pytest.approx([warmup_stable_decay(s, 10, 2, 1.0, 0.1, 0.5) for s in range(10)])
    assert wsd[2:6] == [1.0] * 4 and wsd[9] == pytest.approx(1.0 - 4 / 5 * 0.9)
    assert _lrs("constant") == [1.0] * 10
    assert _lrs("constant", warmup=3)[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert _lrs(lambda step: 0.5 ** step, steps=3) == [1.0, 0.5, 0.25]
    assert _lrs("warmup_cosine", min_lr_ratio=0.0)[0] == 1.0


def test_warmup_arithmetic_is_shared_by_both_schedules():
    from book.train import warmup_cosine, warmup_stable_decay

    for step in range(5):
        assert warmup_cosine(step, 50, 5, 2.0, 0.2) == warmup_stable_decay(step, 50, 5, 2.0, 0.2)
    assert warmup_cosine(60, 50, 5, 2.0, 0.2) == warmup_stable_decay(60, 50, 5, 2.0, 0.2) == 0.2


def test_schedule_by_bad_name_or_without_a_length_is_refused():
    from book.train import fit

    model = TinyLM()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="schedule must be one of"):
        fit(model, _fit_batches(model), optimizer=opt, steps=3, schedule="cosine", progress=False)
    with pytest.raises(ValueError, match="give steps, or use 'constant'"):
        fit(model, _fit_batches(model), optimizer=opt, time_budget=1.0, progress=False)
    with pytest.raises(ValueError, match="needs steps, a time_budget"):
        fit(model, _fit_batches(model), optimizer=opt, schedule="constant", progress=False)
    with pytest.raises(ValueError, match="steps must be a positive int"):
        fit(model, _fit_batches(model), optimizer=opt, steps=0, progress=False)


# ---- the loop ----

def test_fit_with_an_eval_hook_and_a_history():
    from book.train import History, fit

    model = TinyLM()
    modes = []

    def eval_fn(m):
        modes.append(m.training)
        return float(len(modes))

    hist = fit(model, _fit_batches(model), optimizer=torch.optim.Adam(model.parameters(), lr=0.05), steps=10,
               eval_fn=eval_fn, eval_every=3, progress=False)
    assert isinstance(hist, History) and hist.steps == len(hist.train_loss) == 10 and hist.train_seconds > 0
    assert hist.val == [(3, 1.0), (6, 2.0), (9, 3.0), (10, 4.0)] and hist.final_val == 4.0
    assert modes == [False] * 4 and model.training          # evaluated in eval mode, back to train mode after
    assert hist.train_loss[-1] < hist.train_loss[0]
    pairs = fit(model, _fit_batches(model), optimizer=torch.optim.Adam(model.parameters(), lr=0.05), steps=2,
                eval_fn=lambda m: (1.0, 2.0), progress=True)          # any value, shown in the progress bar
    assert pairs.val == [(2, (1.0, 2.0))]


def test_fit_in_chunks_equals_one_run_and_accepts_an_iterable():
    from book.train import History, fit

    def run(chunks):
        torch.manual_seed(0)
        model = TinyLM()
        opt, hist = torch.optim.AdamW(model.parameters(), lr=0.05), History()
        batches = _fit_batches(model)
        for start, stop in chunks:
            fit(model, batches, optimizer=opt, steps=8, warmup=2, start=start, stop=stop, history=hist,
                progress=False)
        return hist

    whole, parts = run([(0, 8)]), run([(0, 3), (3, 5), (5, 20)])
    assert parts.steps == 8 and parts.train_loss == whole.train_loss
    model = TinyLM()
    batch = _fit_batches(model)()
    hist = fit(model, [batch] * 4, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), steps=10,
               progress=False)
    assert hist.steps == 4                                      # an iterable ends the run when it runs out


def test_fit_with_a_time_budget():
    from book.train import fit

    model = TinyLM()
    hist = fit(model, _fit_batches(model), optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
               time_budget=0.3, schedule="constant", eval_fn=lambda m: 0.0, progress=False)
    per_step = hist.train_seconds / hist.steps
    assert hist.steps > 1 and 0.3 <= hist.train_seconds < 0.3 + 20 * per_step + 0.05
    assert [s for s, _ in hist.val] == [hist.steps]              # evaluated once, at the end
    capped = fit(model, _fit_batches(model), optimizer=torch.optim.SGD(model.parameters(), lr=0.1), steps=3,
                 time_budget=60.0, progress=False)
    assert capped.steps == 3                                     # whichever ends first


def test_fit_honours_step_budget(monkeypatch):
    from book.train import fit

    monkeypatch.setenv("BOOK_MAX_STEPS", "3")
    model = TinyLM()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    assert fit(model, _fit_batches(model), optimizer=opt, steps=50, progress=False).steps == 3
    assert fit(model, _fit_batches(model), optimizer=opt, time_budget=60.0, schedule="constant",
               progress=False).steps == 3


def test_every_trainer_runs_through_fit(monkeypatch):
    """Each trainer of the package calls book.optim.fit (so one loop sets every rate)."""
    import book.optim
    from book import pretrain, rnn, seq2seq, train

    calls = []
    real = book.optim.fit

    def spy(*args, **kwargs):
        calls.append(kwargs.get("desc"))
        return real(*args, **kwargs)

    for module in (train, rnn, seq2seq, pretrain):
        monkeypatch.setattr(module, "fit", spy)
    data = _stream()
    train.train_lm(TinyLM(), data, data, steps=2, batch_size=2, context_len=4, progress=False)
    rnn.train_recall(CharRNN(5, 4, 8), steps=2, seq_len=4, n_values=4, batch_size=4, progress=False)
    run = train.RecipeRun(train.GPTRecipe("r", n_layers=1, n_heads=2, d_model=8, context_len=6, batch_size=2,
                                          steps=3, warmup=1), V, data, seed=0)
    run.advance(2)
    assert run.step == 2 and len(calls) == 3


# ---- the optimizer builder and its one decay split ----

def _gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig(V, context_len=8, d_model=16, n_heads=2, n_layers=1, bias=True))


def _decay_of(opt):
    groups = opt.param_groups
    return {id(p): g["weight_decay"] for g in groups for p in g["params"]}


def test_build_optimizer_decays_matrices_only():
    from book.optim import Muon, build_optimizer

    model = _gpt()
    for name in ("adamw", "muon"):
        opt = build_optimizer(model, name, lr=1e-3, weight_decay=0.1)
        decay = _decay_of(opt)
        assert set(decay) == {id(p) for p in model.parameters()}          # every parameter once (tied: once)
        for pname, p in model.named_parameters():
            assert decay[id(p)] == (0.1 if p.dim() >= 2 else 0.0), (name, pname)
    muon = build_optimizer(model, "muon", lr=1e-3, muon_lr=0.05)
    assert isinstance(muon.optimizers[0], Muon) and muon.optimizers[0].param_groups[0]["lr"] == 0.05
    assert model.optimizer(1e-3).param_groups[1]["weight_decay"] == 0.0     # GPT.optimizer: the same split
    adam = build_optimizer(model, "adam", lr=1e-3)
    assert type(adam) is torch.optim.Adam and adam.defaults["betas"] == (0.9, 0.999)
    with pytest.raises(ValueError, match="'adam' takes no weight decay"):
        build_optimizer(model, "adam", lr=1e-3, weight_decay=0.1)
    with pytest.raises(ValueError, match="name must be one of"):
        build_optimizer(model, "sgd", lr=1e-3)
    with pytest.raises(ValueError, match="lr must be a number > 0"):
        build_optimizer(model, lr=0)


def _chapter_models():
    """One of each model the chapters train with plain Adam (chapters 1, 4, 5, 6), seeded the same."""
    from book.attention import OneLayerAttention
    from book.blocks import TransformerBlock
    from book.chapters.ch01 import BigramLM
    from book.positional import POSITION_SCHEMES, CopyBackModel

    def seq(x):
        return torch.nn.functional.embedding(x, torch.linspace(-1, 1, 8 * V).view(V, 8))

    yield "bigram", lambda: BigramLM(V), lambda m, x: m.logits.weight[x]
    yield "one-layer attention", lambda: OneLayerAttention(V, 16), lambda m, x: m(x)
    for scheme in POSITION_SCHEMES:
        yield f"copy-back {scheme}", lambda s=scheme: CopyBackModel(V, s, d_model=16, n_heads=2), lambda m, x: m(x)
    yield "mlp", lambda: nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, V)), lambda m, x: m(seq(x))
    yield "blocks", lambda: nn.Sequential(*(TransformerBlock(8, 2, causal=True, residual=True, use_norm=False)
                                           for _ in range(2)), nn.Linear(8, V)), lambda m, x: m(seq(x))


@pytest.mark.parametrize("with_fit", [False, True], ids=["hand loop", "fit"])
def test_build_optimizer_adam_is_the_chapters_torch_adam_bit_for_bit(with_fit):
    # chapters 1, 4, 5 and 6 once built torch.optim.Adam(model.parameters(), lr=lr) themselves; their cells now
    # call build_optimizer(model, "adam", lr=lr), which must train every parameter to the same bits
    from book.optim import build_optimizer
    from book.train import fit

    def train(make, forward, build, steps=6):
        torch.manual_seed(0)
        model = make()
        opt = build(model)
        g = torch.Generator().manual_seed(1)

        def loss_fn(m, x):
            return forward(m, x).logsumexp(-1).mean() - forward(m, x).select(-1, 0).mean()

        batch = lambda: torch.randint(0, V, (3, 5), generator=g)   # noqa: E731
        if with_fit:
            fit(model, batch, loss_fn=loss_fn, optimizer=opt, steps=steps, schedule="constant", progress=False)
        else:
            for _ in range(steps):
                loss = loss_fn(model, batch())
                opt.zero_grad()
                loss.backward()
                opt.step()
        return model, opt

    for name, make, forward in _chapter_models():
        old, old_opt = train(make, forward, lambda m: torch.optim.Adam(m.parameters(), lr=3e-3))
        new, new_opt = train(make, forward, lambda m: build_optimizer(m, "adam", lr=3e-3))
        assert type(new_opt) is type(old_opt)
        assert new_opt.defaults == old_opt.defaults, name     # lr, betas, eps, weight_decay, foreach, fused, ...
        assert [p.shape for g in new_opt.param_groups for p in g["params"]] == \
            [p.shape for g in old_opt.param_groups for p in g["params"]], name
        moved = False
        for (pname, a), b in zip(old.named_parameters(), new.parameters()):
            assert torch.equal(a, b), (name, pname)
            moved |= bool(old_opt.state[a])
        assert moved, name


def test_no_chapter_cell_builds_a_torch_optimizer_itself():
    # build_optimizer is the one place the book builds one (book/optim.py); Muon is built there, and ch10's
    # lesson cell that checks its own muon_step against book.optim.Muon constructs no torch.optim class
    import re

    import nbformat
    from nbtools import chapter_paths

    direct = re.compile(r"torch\.optim\.(?!Optimizer\b)[A-Z]\w*\(")
    found = [(path.name, i) for path in chapter_paths()
             for i, cell in enumerate(nbformat.read(path, as_version=4).cells)
             if cell.cell_type == "code" and direct.search(cell.source)]
    assert found == [], f"these cells build a torch.optim optimizer directly; use book.optim.build_optimizer: {found}"


def test_muon_and_adamw_groups_follow_the_schedule_relative_to_their_own_peaks():
    from book.optim import build_optimizer
    from book.train import fit, warmup_cosine

    model = _gpt()
    opt = build_optimizer(model, "muon", lr=1e-3, muon_lr=0.05)
    from book.data import get_batch
    g = torch.Generator().manual_seed(0)
    fit(model, lambda: get_batch(_stream(), 2, 8, g), loss_fn=lambda m, b: m(*b)[1], optimizer=opt, steps=6,
        warmup=1, progress=False)
    factor = warmup_cosine(5, 6, 1, 1.0, 0.1)
    muon_group, adam_groups = opt.optimizers[0].param_groups[0], opt.optimizers[1].param_groups
    assert muon_group["lr"] == pytest.approx(0.05 * factor)
    assert all(grp["lr"] == pytest.approx(1e-3 * factor) for grp in adam_groups)


def test_train_lm_default_optimizer_does_not_decay_norms_or_biases():
    """The bug: train_lm's default AdamW decayed every parameter. A parameter whose gradient is 0 moves only by
    weight decay, so the LayerNorm's gain and bias and the idle 1-D parameter must stay exactly as they were."""
    from book.train import train_lm

    torch.manual_seed(0)
    model = TinyLM()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model.norm.weight.register_hook(torch.zeros_like)        # the gain's gradient is 0: only decay could move it
    model.norm.bias.register_hook(torch.zeros_like)
    train_lm(model, _stream(), _stream(), steps=20, batch_size=4, context_len=6, lr=0.1, progress=False)
    for name in ("idle", "norm.weight", "norm.bias"):
        assert torch.equal(model.get_parameter(name), before[name]), f"{name} was decayed"
    assert not torch.equal(model.head.weight, before["head.weight"])


# ---- train/eval mode after an error, and generate on every LM ----

class Exploding(nn.Module):
    """A model whose every forward raises."""

    context_len = 8
    config = GPTConfig(V, context_len=8)

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1))

    def forward(self, *args, **kwargs):
        raise RuntimeError("boom")

    def src_keep_mask(self, src):
        return src != 0

    def encode(self, src, keep=None):
        raise RuntimeError("boom")


@pytest.mark.parametrize("call", ["generate", "greedy_translate", "evaluate_lm"])
def test_the_model_keeps_its_mode_when_a_call_raises(call):
    from book.generate import generate, greedy_translate
    from book.train import evaluate_lm

    model = Exploding().train()
    ids = torch.ones(2, 3, dtype=torch.long)
    fn = {"generate": lambda: generate(model, ids, 2),
          "greedy_translate": lambda: greedy_translate(model, ids, 4),
          "evaluate_lm": lambda: evaluate_lm(model, _stream(), 2, 4, 1)}[call]
    with pytest.raises(RuntimeError, match="boom"):
        fn()
    assert model.training, f"{call} left the model in eval mode"


def test_generate_works_on_the_char_rnn():
    """The bug: generate read model.config.context_len, which CharRNN (chapter 2's LM) does not have."""
    from book.generate import generate

    torch.manual_seed(0)
    rnn = CharRNN(V, 4, 8).train()
    prompt = torch.zeros(2, 3, dtype=torch.long)
    out = generate(rnn, prompt, 12, temperature=0)            # longer than any window: a recurrence reads it all
    assert out.shape == (2, 15) and torch.equal(out[:, :3], prompt) and rnn.training
    again = generate(rnn, prompt, 12, top_k=3, generator=torch.Generator().manual_seed(0))
    assert again.shape == (2, 15) and int(again.max()) < V


def test_generate_works_on_every_lm_of_the_book():
    from book.generate import context_len_of, generate
    from book.pretrain import build, family_configs

    rnn, prompt = CharRNN(V, 4, 8), torch.zeros(2, 3, dtype=torch.long)
    assert context_len_of(rnn) is None and context_len_of(_gpt()) == 8
    with pytest.raises(ValueError, match="needs a model with new_cache"):
        generate(rnn, prompt, 2, use_cache=True)
    gpt9 = build("GPT", family_configs(V, context_len=8, width=12, n_heads=2, n_layers=1)["GPT"])
    for model in (_gpt(), gpt9):
        assert generate(model, prompt, 10, temperature=0).shape == (2, 13)
        assert torch.equal(generate(model, prompt, 5, temperature=0),
                           generate(model, prompt, 5, temperature=0, use_cache=True))
    with pytest.raises(TypeError, match="tells no context length"):
        generate(nn.Linear(2, 2), prompt, 2)
