"""Golden tests of every decoding loop: generate (GPT with and without a KV cache, RoPE, CharRNN), greedy_translate,
Seq2Seq.greedy, StreamTranslator.greedy, pretrain.write (gpt, bert, t5) and answer, and the live widget's write.

Tiny random models, fixed seeds. Each case returns the tokens decoded and, for samplers, the generator's next draw
afterwards (so the number and order of random draws is pinned too). EXPECTED was produced by the pre-refactor loops
at commit 6068a5c (six separate loops) and must never change: the one loop, book.decoding.decode_loop, decodes
exactly what they did.
"""
import pytest
import torch

from book.bert import BERT, EncoderConfig
from book.generate import generate, greedy_translate
from book.gpt import GPT, GPTConfig
from book.objectives import PretrainVocab
from book.pretrain import StreamTranslator, answer, write
from book.rnn import CharRNN
from book.seq2seq import Seq2SeqConfig, build_seq2seq
from book.transformer import Transformer, TransformerConfig

VOCAB = PretrainVocab(11, n_sentinels=6)


def _shake(model, seed, scale=0.5):
    """Random weights big enough that a random model's choices vary."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return model


def _next_draw(gen):
    return int(torch.randint(10 ** 9, (1,), generator=gen))


def _gpt(ctx=8, vocab=13, positions="learned", seed=0):
    torch.manual_seed(seed)
    return _shake(GPT(GPTConfig(vocab, context_len=ctx, d_model=16, n_heads=2, n_layers=2, positions=positions)),
                  seed, 0.12).eval()


def _prompt(B=2, T=3, vocab=13, seed=1):
    return torch.randint(0, vocab, (B, T), generator=torch.Generator().manual_seed(seed))


def gpt_generate():
    model, idx = _gpt(), _prompt()
    out = {}
    for name, kw in {"greedy": dict(temperature=0), "greedy_cache": dict(temperature=0, use_cache=True),
                     "sample": dict(), "sample_cache": dict(use_cache=True),
                     "top_k": dict(temperature=0.7, top_k=4), "top_p": dict(temperature=1.3, top_p=0.8),
                     "top_k_p_cache": dict(temperature=0.9, top_k=5, top_p=0.9, use_cache=True)}.items():
        gen = torch.Generator().manual_seed(7)
        ids = generate(model, idx, 5, generator=gen, **kw)
        out[name] = [ids.tolist(), _next_draw(gen)]
    gen = torch.Generator().manual_seed(3)                 # beyond the context: the window slides
    out["slide"] = [generate(model, idx, 12, generator=gen).tolist(), _next_draw(gen)]
    out["slide_greedy"] = generate(model, idx, 12, temperature=0).tolist()
    model.train()
    out["train_mode_kept"] = [generate(model, idx, 2, temperature=0).tolist(), model.training]
    return out


def rope_gpt_generate():
    model, idx = _gpt(ctx=10, positions="rope", seed=2), _prompt(B=3, T=2, seed=4)
    gen = torch.Generator().manual_seed(11)
    return {"cache": [generate(model, idx, 8, temperature=0.8, generator=gen, use_cache=True).tolist(),
                      _next_draw(gen)],
            "no_cache": generate(model, idx, 8, temperature=0).tolist()}


def charrnn_generate():
    torch.manual_seed(5)
    model = _shake(CharRNN(9, d_emb=8, d_hidden=16, cell="gru"), 5).eval()
    idx = _prompt(B=2, T=4, vocab=9, seed=6)
    gen = torch.Generator().manual_seed(2)
    return {"sample": [generate(model, idx, 10, top_k=3, generator=gen).tolist(), _next_draw(gen)],
            "greedy": generate(model, idx, 10, temperature=0).tolist()}


def _transformer(seed=0, ctx=12):
    torch.manual_seed(seed)
    cfg = TransformerConfig(9, 5, context_len=ctx, d_model=16, n_heads=2, n_layers=2, norm="pre")
    model = Transformer(cfg)
    with torch.no_grad():   # Transformer.__init__ draws its two embeddings in set order (by id): redraw them in order
        for emb in (model.src_emb, model.tgt_emb):
            emb.weight.copy_(torch.randn(emb.weight.shape) * cfg.d_model ** -0.5)
    return _shake(model, seed, 0.15).eval()


def _src(B=6, S=5, vocab=9, seed=3):
    src = torch.randint(3, vocab, (B, S), generator=torch.Generator().manual_seed(seed))
    src[1, 3:] = 0                                          # padded rows
    src[-1, 2:] = 0
    return src


def transformer_greedy_translate():
    out = {}
    for seed in (0, 1, 2):
        model, src = _transformer(seed), _src(seed=seed + 3)
        for name, kw in {"cache": {}, "no_cache": dict(use_cache=False), "reencode": dict(reencode=True)}.items():
            out[f"{seed}_{name}"] = greedy_translate(model, src, 9, **kw).tolist()
        ids, w = greedy_translate(model, src, 9, need_weights=True)
        out[f"{seed}_weights"] = [ids.tolist(), list(w.shape), round(float(w.double().sum()), 4)]
    return out


def transformer_max_len_beyond_context_that_ends_in_time():
    """max_len > context_len is fine while every row writes EOS within context_len steps."""
    for seed in range(40):
        model, src = _transformer(seed, ctx=6), _src(B=2, seed=seed)
        ids = greedy_translate(model, src, 6)
        if (ids == 2).any(1).all():
            return {"seed": seed, "ids": greedy_translate(model, src, 30).tolist(),
                    "no_cache": greedy_translate(model, src, 30, use_cache=False).tolist()}
    raise AssertionError("no seed ends in time")


def seq2seq_greedy():
    out = {}
    for attention in ("none", "additive", "multiplicative"):
        torch.manual_seed(4)
        model = _shake(build_seq2seq(Seq2SeqConfig(9, 5, d_emb=8, d_enc=8, d_dec=12, d_att=8, attention=attention)),
                       4, 0.6)
        ids, w = model.greedy(_src(seed=8), 9)
        out[attention] = [ids.tolist(), None if w is None else [list(w.shape), round(float(w.double().sum()), 4)],
                          model.training]
    return out


def stream_translator_greedy():
    torch.manual_seed(6)
    gpt = _shake(GPT(GPTConfig(9 + 5, 24, d_model=16, n_heads=2, n_layers=1, positions="rope")), 6, 0.2)
    model = StreamTranslator(gpt, 9, 5)
    ids = model.greedy(_src(seed=9), 9)
    return {"ids": ids.tolist(), "training_kept": model.training}


def _family_models(T=12):
    torch.manual_seed(0)
    kw = dict(context_len=T, d_model=16, n_heads=2, n_layers=1, positions="rope")
    models = {"bert": BERT(EncoderConfig(VOCAB.size, **kw)), "gpt": GPT(GPTConfig(VOCAB.size, **kw)),
              "t5": Transformer(TransformerConfig(VOCAB.size, VOCAB.size, **kw, norm="pre", share_embeddings=True,
                                                  tie_output=True, pad_id=None))}
    return {k: _shake(m, i, 0.15).eval() for i, (k, m) in enumerate(models.items())}


def pretrain_write():
    out = {}
    prompt = torch.randint(0, VOCAB.n_chars, (1, 5), generator=torch.Generator().manual_seed(12))
    for family, model in _family_models().items():
        for n_new, temp, max_span in ((4, 0.8, 8), (20, 1.0, 3)):          # 20: beyond the context
            gen = torch.Generator().manual_seed(13)
            ids = write(model, family, prompt, n_new, VOCAB, temperature=temp, generator=gen, max_span=max_span)
            out[f"{family}_{n_new}"] = [ids.tolist(), _next_draw(gen)]
    return out


def pretrain_answer():
    model = _family_models(T=8)["gpt"]
    enc = lambda s: [int(c, 16) for c in s]
    dec = lambda ids: "".join(format(i, "x") for i in ids)
    prompts = ["12", "0123456789a", "5", "a9"]                # the second is longer than the context
    return {"stop_4": answer(model, prompts, enc, dec, n_chars=11, max_new=12, stop="4"),
            "stop_a": answer(model, prompts, enc, dec, n_chars=11, max_new=6, stop="a"),
            "stop_nl": answer(model, prompts, enc, dec, n_chars=7, max_new=5)}


def live_widget_write():
    from book.live import live_gpt
    from book.tokenizers import CharTokenizer

    text = "ROMEO:\nBut soft, what light through yonder window breaks?"
    torch.manual_seed(0)
    tok = CharTokenizer.from_text(text)
    model = _shake(GPT(GPTConfig(vocab_size=tok.vocab_size, context_len=16, d_model=24, n_heads=3, n_layers=2)),
                   0, 0.1).eval()
    w = live_gpt(model, tok, "ROMEO:", n_chars=20, seed=3)
    out = [w.write()]
    w.temperature.value, w.top_k.value = 1.2, 5
    out.append(w.write())
    w.temperature.value = 0.0
    out.append(w.write())
    return out


CASES = {f.__name__: f for f in (gpt_generate, rope_gpt_generate, charrnn_generate, transformer_greedy_translate,
                                 transformer_max_len_beyond_context_that_ends_in_time, seq2seq_greedy,
                                 stream_translator_greedy, pretrain_write, pretrain_answer, live_widget_write)}


# The outputs of the pre-refactor decoding loops at commit 6068a5c, measured on CPU (one thread).
EXPECTED = {
    'gpt_generate': {'greedy': [[[6, 9, 3, 3, 3, 3, 3, 3], [1, 6, 1, 2, 6, 6, 6, 6]], 939636932],
                     'greedy_cache': [[[6, 9, 3, 3, 3, 3, 3, 3], [1, 6, 1, 2, 6, 6, 6, 6]], 939636932],
                     'sample': [[[6, 9, 3, 10, 5, 0, 6, 1], [1, 6, 1, 3, 11, 6, 3, 6]], 432423310],
                     'sample_cache': [[[6, 9, 3, 10, 5, 0, 6, 1], [1, 6, 1, 3, 11, 6, 3, 6]], 432423310],
                     'slide': [[[6, 9, 3, 3, 6, 10, 0, 5, 5, 1, 9, 9, 12, 5, 12],
                                [1, 6, 1, 9, 10, 1, 3, 1, 5, 8, 4, 3, 3, 5, 11]],
                               834491811],
                     'slide_greedy': [[6, 9, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3],
                                      [1, 6, 1, 2, 6, 6, 6, 6, 6, 3, 3, 3, 3, 3, 3]],
                     'top_k': [[[6, 9, 3, 10, 5, 3, 6, 4], [1, 6, 1, 1, 1, 6, 3, 6]], 432423310],
                     'top_k_p_cache': [[[6, 9, 3, 10, 5, 3, 6, 4], [1, 6, 1, 0, 3, 3, 3, 6]], 432423310],
                     'top_p': [[[6, 9, 3, 10, 5, 0, 6, 1], [1, 6, 1, 3, 11, 11, 8, 6]], 432423310],
                     'train_mode_kept': [[[6, 9, 3, 3, 3], [1, 6, 1, 2, 6]], True]},
    'rope_gpt_generate': {'cache': [[[6, 3, 7, 4, 9, 9, 9, 5, 9, 0], [11, 1, 1, 11, 7, 9, 12, 2, 2, 10],
                                     [2, 4, 7, 7, 12, 7, 6, 0, 1, 6]],
                                    535856844],
                          'no_cache': [[6, 3, 3, 3, 3, 3, 3, 3, 3, 3], [11, 1, 1, 1, 1, 1, 1, 1, 1, 1],
                                       [2, 4, 4, 4, 4, 4, 4, 4, 4, 4]]},
    'charrnn_generate': {'greedy': [[8, 6, 6, 2, 1, 1, 5, 1, 8, 1, 1, 8, 1, 1],
                                    [7, 0, 2, 3, 3, 0, 1, 8, 1, 1, 8, 1, 1, 8]],
                         'sample': [[[8, 6, 6, 2, 1, 1, 5, 1, 8, 8, 1, 5, 1, 5],
                                     [7, 0, 2, 3, 1, 1, 1, 1, 1, 8, 8, 1, 8, 0]],
                                    307978785]},
    'transformer_greedy_translate': {'0_cache': [[1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1],
                                                 [1, 1, 1, 1, 1, 1, 1, 1, 1], [0, 1, 0, 1, 0, 1, 0, 1, 0],
                                                 [1, 1, 1, 1, 1, 1, 1, 1, 1], [2, 0, 0, 0, 0, 0, 0, 0, 0]],
                                     '0_no_cache': [[1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1],
                                                    [1, 1, 1, 1, 1, 1, 1, 1, 1], [0, 1, 0, 1, 0, 1, 0, 1, 0],
                                                    [1, 1, 1, 1, 1, 1, 1, 1, 1], [2, 0, 0, 0, 0, 0, 0, 0, 0]],
                                     '0_reencode': [[1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1],
                                                    [1, 1, 1, 1, 1, 1, 1, 1, 1], [0, 1, 0, 1, 0, 1, 0, 1, 0],
                                                    [1, 1, 1, 1, 1, 1, 1, 1, 1], [2, 0, 0, 0, 0, 0, 0, 0, 0]],
                                     '0_weights': [[[1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1],
                                                    [1, 1, 1, 1, 1, 1, 1, 1, 1], [0, 1, 0, 1, 0, 1, 0, 1, 0],
                                                    [1, 1, 1, 1, 1, 1, 1, 1, 1], [2, 0, 0, 0, 0, 0, 0, 0, 0]],
                                                   [2, 6, 2, 9, 5], 216.0],
                                     '1_cache': [[4, 0, 2], [2, 0, 0], [2, 0, 0], [2, 0, 0], [2, 0, 0],
                                                 [2, 0, 0]],
                                     '1_no_cache': [[4, 0, 2], [2, 0, 0], [2, 0, 0], [2, 0, 0], [2, 0, 0],
                                                    [2, 0, 0]],
                                     '1_reencode': [[4, 0, 2], [2, 0, 0], [2, 0, 0], [2, 0, 0], [2, 0, 0],
                                                    [2, 0, 0]],
                                     '1_weights': [[[4, 0, 2], [2, 0, 0], [2, 0, 0], [2, 0, 0], [2, 0, 0],
                                                    [2, 0, 0]],
                                                   [2, 6, 2, 3, 5], 72.0],
                                     '2_cache': [[1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1],
                                                 [1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1],
                                                 [1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 0]],
                                     '2_no_cache': [[1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1],
                                                    [1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1],
                                                    [1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 0]],
                                     '2_reencode': [[1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1],
                                                    [1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1],
                                                    [1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 0]],
                                     '2_weights': [[[1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1],
                                                    [1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1],
                                                    [1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 0]],
                                                   [2, 6, 2, 9, 5], 216.0]},
    'transformer_max_len_beyond_context_that_ends_in_time': {'ids': [[2], [2]],
                                                             'no_cache': [[2], [2]],
                                                             'seed': 1},
    'seq2seq_greedy': {'additive': [[[4, 1, 4, 4, 4, 1, 4, 4, 1], [4, 3, 3, 3, 3, 3, 3, 3, 3],
                                     [4, 4, 4, 4, 4, 4, 4, 4, 4], [4, 4, 4, 1, 4, 4, 4, 1, 4],
                                     [4, 4, 4, 4, 4, 4, 4, 1, 4], [4, 3, 3, 3, 3, 3, 3, 3, 3]],
                                    [[6, 9, 5], 54.0], True],
                       'multiplicative': [[[3, 3, 3, 1, 3, 1, 3, 1, 3], [3, 3, 3, 3, 3, 3, 3, 3, 3],
                                           [4, 4, 4, 4, 4, 4, 4, 4, 4], [4, 4, 4, 4, 4, 4, 4, 4, 4],
                                           [3, 4, 1, 4, 4, 1, 1, 4, 4], [3, 4, 4, 4, 4, 4, 4, 4, 4]],
                                          [[6, 9, 5], 54.0], True],
                       'none': [[[3, 3, 1, 1, 1, 1, 1, 1, 1], [3, 3, 3, 3, 3, 3, 3, 3, 3],
                                 [4, 4, 4, 4, 4, 4, 4, 4, 4], [2, 0, 0, 0, 0, 0, 0, 0, 0],
                                 [3, 1, 1, 1, 1, 1, 1, 1, 1], [3, 3, 3, 3, 3, 3, 3, 3, 3]],
                                None, True]},
    'stream_translator_greedy': {'ids': [[2, 0, 0, 0, 0, 0, 0, 0, 0], [3, 3, 3, 3, 3, 3, 3, 3, 3],
                                         [2, 0, 0, 0, 0, 0, 0, 0, 0], [2, 0, 0, 0, 0, 0, 0, 0, 0],
                                         [2, 0, 0, 0, 0, 0, 0, 0, 0], [2, 0, 0, 0, 0, 0, 0, 0, 0]],
                                 'training_kept': True},
    'pretrain_write': {'bert_20': [[[10, 1, 7, 9, 0, 8, 0, 0, 3, 0, 10, 8, 0, 8, 8, 6, 3, 5, 6, 8, 8, 1, 4, 8,
                                     8]],
                                   343592141],
                       'bert_4': [[[10, 1, 7, 9, 0, 8, 0, 0, 3]], 865198377],
                       'gpt_20': [[[10, 1, 7, 9, 0, 8, 2, 2, 2, 3, 10, 4, 5, 5, 6, 6, 3, 5, 6, 3, 6, 1, 4, 6,
                                    10]],
                                  343592141],
                       'gpt_4': [[[10, 1, 7, 9, 0, 8, 2, 2, 2]], 865198377],
                       't5_20': [[[10, 1, 7, 9, 0, 8, 9, 9, 9, 3, 10, 8, 9, 9, 6, 6, 6, 10, 6, 6, 6, 6, 6, 6,
                                   10]],
                                 512551305],
                       't5_4': [[[10, 1, 7, 9, 0, 8, 9, 9, 9]], 812792109]},
    'pretrain_answer': {'stop_4': ['22', 'aaaaaaaaaaaa', '66aaaaaaaaaa', '222'],
                        'stop_a': ['224444', '', '66', '222444'],
                        'stop_nl': ['22444', '22222', '66666', '22244']},
    'live_widget_write': ['e,ybo:\n:hnEfbr,OrdB ', ',?rro,,,rd:,gerr,,O,', ',,,,,,,,,,,,,,,,,,,,'],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_decoding_is_unchanged(name):
    assert CASES[name]() == EXPECTED[name]


# ---- the one loop itself, and what it now handles: context_len None, max_len past a context that cannot slide ----
def test_decode_loop_appends_crops_and_stops():
    from book.decoding import decode_loop

    seen = []

    def step(x):                                   # the next token's logits: a one-hot of (last id + 1) % 5
        seen.append(x.shape[1])
        return torch.nn.functional.one_hot((x[:, -1] + 1) % 5, 5).float()

    argmax = lambda logits: logits.argmax(-1)
    start = torch.tensor([[0], [2]])
    assert decode_loop(step, start, 4, argmax).tolist() == [[0, 1, 2, 3, 4], [2, 3, 4, 0, 1]]
    assert seen == [1, 2, 3, 4]
    seen.clear()
    decode_loop(step, start, 4, argmax, context_len=2)
    assert seen == [1, 2, 2, 2]                     # the window slides
    seen.clear()
    decode_loop(step, start, 4, argmax, incremental=True)
    assert seen == [1, 1, 1, 1]                     # only the new token after the first step
    assert decode_loop(step, start, 6, argmax, eos=4, pad=9).tolist() == [[0, 1, 2, 3, 4], [2, 3, 4, 9, 9]]
    assert decode_loop(step, start, 6, argmax, eos=3, pad=9).tolist() == [[0, 1, 2, 3], [2, 3, 9, 9]]
    assert decode_loop(step, start, 6, argmax, stop_after=lambda nxt: bool((nxt == 3).any())).tolist() == [[0, 1],
                                                                                                          [2, 3]]
    assert decode_loop(step, start, 6, argmax, stop_before=lambda logits, ids: ids.shape[1] == 3).tolist() == \
        [[0, 1, 2], [2, 3, 4]]
    assert decode_loop(step, start, 0, argmax).tolist() == [[0], [2]]
    pair = lambda logits: torch.stack([logits.argmax(-1)] * 2, 1)      # two tokens a step; the last step is cut
    assert decode_loop(step, start, 3, pair).tolist() == [[0, 1, 1, 2], [2, 3, 3, 4]]


def test_decode_loop_says_what_is_wrong_and_restores_the_mode():
    from book.decoding import decode_loop

    step = lambda x: torch.zeros(x.shape[0], 5)
    with pytest.raises(ValueError, match=r"max_len=5 runs past the model's context_len=3.*give max_len <= 3"):
        decode_loop(step, torch.zeros(2, 1, dtype=torch.long), 5, lambda logits: logits.argmax(-1), context_len=3,
                    slide=False, name="max_len")
    with pytest.raises(ValueError, match=r"choose must give the next token\(s\).*got \(2, 0\)"):
        decode_loop(step, torch.zeros(2, 1, dtype=torch.long), 5, lambda logits: logits[:, :0])
    with pytest.raises(ValueError, match="max_new"):
        decode_loop(step, torch.zeros(2, 1, dtype=torch.long), -1, lambda logits: logits.argmax(-1))
    model = torch.nn.Linear(2, 2).train()

    def boom(x):
        assert not model.training
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        decode_loop(boom, torch.zeros(2, 1, dtype=torch.long), 3, lambda logits: logits, model=model)
    assert model.training


def _never_ends(seed=0):
    """An encoder-decoder whose greedy translation never writes EOS (id 2): its output layer never picks it."""
    model = _transformer(seed, ctx=6)
    decode = model.decode
    model.decode = lambda *a, **kw: decode(*a, **kw).index_fill(-1, torch.tensor([2]), -1e4)
    return model


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_translate_past_the_context_names_max_len(use_cache):
    model, src = _never_ends(), _src(B=2)
    assert greedy_translate(model, src, 6, use_cache=use_cache).shape == (2, 6)        # max_len = context_len
    with pytest.raises(ValueError, match=r"max_len=10 runs past the model's context_len=6.*give max_len <= 6"):
        greedy_translate(model, src, 10, use_cache=use_cache)
    assert not model.training


def test_stream_translator_past_the_context_names_max_len():
    torch.manual_seed(6)
    model = StreamTranslator(GPT(GPTConfig(9 + 5, 8, d_model=16, n_heads=2, n_layers=1)), 9, 5)
    forward = model.forward
    model.forward = lambda *a: forward(*a).index_fill(-1, torch.tensor([2]), -1e4)   # the target's EOS never wins
    src = torch.tensor([[3, 4, 5], [3, 4, 0]])
    assert model.greedy(src, 5).shape == (2, 5)                                          # 3 + 5 = 8 positions
    with pytest.raises(ValueError, match=r"max_len=7 runs past the model's context_len=5.*give max_len <= 5"):
        model.greedy(src, 7)
    with pytest.raises(ValueError, match="no room"):
        model.greedy(torch.tensor([[3, 4, 5, 6, 7, 8, 3, 4]]), 2)


def test_write_and_answer_read_a_model_without_a_context_length():
    """context_len None (a CharRNN): every step reads the whole text; before, ids[:, -None:] raised TypeError."""
    torch.manual_seed(0)
    rnn = CharRNN(VOCAB.size, d_emb=8, d_hidden=16).eval()
    prompt = torch.tensor([[1, 2, 3]])
    out = write(rnn, "gpt", prompt, 6, VOCAB, generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 9) and out[0, :3].tolist() == [1, 2, 3] and int(out.max()) < VOCAB.n_chars
    gen = torch.Generator().manual_seed(0)
    assert torch.equal(out, generate_chars(rnn, prompt, 6, gen))
    enc = lambda s: [int(c) for c in s]
    dec = lambda ids: "".join(str(i) for i in ids)
    got = answer(rnn, ["123"], enc, dec, n_chars=10, max_new=4)
    want = rnn(torch.tensor([enc("123")]))[0, -1, :10].argmax()
    assert len(got[0]) == 4 and got[0][0] == str(int(want))


def generate_chars(model, prompt, n, gen):
    """write's gpt family by hand: sample among the characters only, reading everything."""
    from book.generate import sample_next

    ids = prompt
    with torch.no_grad():
        for _ in range(n):
            nxt = sample_next(model(ids)[:, -1, :VOCAB.n_chars], 0.8, generator=gen)
            ids = torch.cat([ids, nxt[:, None]], 1)
    return ids
