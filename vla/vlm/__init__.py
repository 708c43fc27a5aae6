"""RT-2 in miniature: a vision-language model first, then actions as its words.

    corpus.py      image + question -> answer, drawn from the task's own scenes, cached in data/
    questions.py   the question families of one scene (captions, attributes, relations, ...)
    vocab.py       one vocabulary: the grammar's words, answer words, location and action tokens
    actions.py     action values <-> bins (1st-99th percentile of the training actions, OpenVLA)
    prefix_lm.py   the prefix-LM mask and the blocks with a KV cache
    vision.py      the eyes: a full-resolution conv map FiLMed by the words, keypoints, glimpses
    model.py       VLMPolicy: one Transformer, one output layer, greedy decoding; the policy API
    scoring.py     answers scored per family (pointing within a radius)
    data.py        batches of corpus examples and of demonstrations as action tokens
    datamodule.py  both stages' data for `train()`: corpus, demonstrations, held-out answers
    module.py      the Lightning recipe (bc=vlm): next-token loss on the suffix, the keypoint loss
    ask.py         the same checkpoint answers: `scripts/eval.py ckpt_path=<run> eval.question=...`
    figure.py      where an action starts looking: the <bos> query's attention on the keypoints
    stages.py      where keypoint 0 looks at each stage of "the X then the Y", measured

Axis legend for shape comments: b batch, t tokens (p prefix, s suffix), d model dim, h heads,
e head dim, v vocabulary, k chunk steps, a action dims, n layers.
"""
