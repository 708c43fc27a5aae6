"""RT-2 in miniature: a vision-language model first, then actions as its words.

    corpus.py      image + question -> answer, drawn from the task's own scenes, cached in data/
    questions.py   the question families of one scene (captions, attributes, relations, ...)
    vocab.py       one vocabulary: the grammar's words, answer words, location and action tokens
    actions.py     action values <-> bins (1st-99th percentile of the training actions, OpenVLA)
    prefix_lm.py   the prefix-LM mask and the blocks with a KV cache
    model.py       VLMPolicy: one Transformer, one output layer, greedy decoding; the policy API
    scoring.py     answers scored per family (pointing within a radius)
    data.py        batches of corpus examples and of demonstrations as action tokens
    module.py      the Lightning recipe: next-token loss on the suffix, accuracy per family
    train.py       `experiment=vlm` (stage 1) and `experiment=rt2` (stage 2)
    ask.py         the same checkpoint answers: `python -m vla.vlm.ask ckpt_path=<run> question=...`
    compare.py     stage-2 starts paired on the same test episodes (exact McNemar)

Axis legend for shape comments: b batch, t tokens (p prefix, s suffix), d model dim, h heads,
e head dim, v vocabulary, k chunk steps, a action dims, n layers.
"""
