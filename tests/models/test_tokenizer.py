import io

import pytest
import torch

from vla.envs import grammar
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.models.language import PAD_ID, UNK_ID, Tokenizer


def _small():
    return Tokenizer(vocab=["<pad>", "<unk>", "reach", "the", "red", "circle"], max_len=6)


def test_known_ids_padding_and_unknown_words():
    tok = _small()
    ids = tok.encode(["Reach the RED circle!", "reach the purple circle", "the"])
    assert ids.dtype == torch.int64 and ids.shape == (3, 4)  # padded to the longest of the batch
    assert ids.tolist() == [[2, 3, 4, 5], [2, 3, 1, 5], [3, 0, 0, 0]]
    assert PAD_ID == 0 and UNK_ID == 1
    assert tok.encode("the").tolist() == [[3]]
    assert tok.encode("").tolist() == [[0]]
    assert tok.decode(ids) == ["reach the red circle", "reach the <unk> circle", "the"]


def test_default_vocabulary_covers_the_grammar():
    tok = Tokenizer()
    assert tok.vocab[:2] == ["<pad>", "<unk>"]
    assert tok.vocab[2:] == grammar.vocabulary()
    assert tok.max_len == grammar.max_words() == 14
    texts = []
    for split in ("train", "novel_pairs", "novel_verbs"):
        env = ReachEnv(families=grammar_families(split), split=split, chain_length=3)
        texts += [env.reset(seed=s)[0]["instruction"] for s in range(300)]
    ids = tok.encode(texts)
    assert not (ids == UNK_ID).any()
    assert tok.decode(ids) == texts
    assert ids.shape[1] == max(len(t.split()) for t in texts) <= tok.max_len


def grammar_families(split: str) -> list[str]:
    return ["name", "attribute", "sequence"] + (["relation"] if split != "novel_verbs" else [])


def test_unknown_words_are_read_as_unk():
    tok = Tokenizer()
    read = {"approach": "<unk>", "head to": "<unk> to", "walk to": "<unk> to"}  # "to" is known
    assert set(read) == set(grammar.UNKNOWN_VERBS)
    for verb, words in read.items():
        ids = tok.encode(f"{verb} the red circle")[0]
        assert (ids == UNK_ID).sum() == 1
        assert tok.decode(ids[None]) == [f"{words} the red circle"]


def test_truncation_warns_instead_of_failing():
    tok = Tokenizer(max_len=3)
    with pytest.warns(UserWarning, match="truncated"):
        ids = tok.encode("navigate to the yellow triangle")
    assert ids.shape == (1, 3)
    assert tok.decode(ids) == ["navigate to the"]


def test_vocabulary_travels_in_the_state_dict():
    tok = _small()
    assert tok.state_dict()["_extra_state"] == {"vocab": tok.vocab, "max_len": 6}
    buffer = io.BytesIO()
    torch.save(tok.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    restored = Tokenizer()  # the grammar's vocabulary, replaced by the checkpoint's
    assert restored.vocab != tok.vocab
    restored.load_state_dict(state)
    assert restored.vocab == tok.vocab and restored.max_len == 6
    text = "reach the red square"
    assert torch.equal(restored.encode(text), tok.encode(text))


def test_invalid_vocab():
    with pytest.raises(ConfigError, match="must start with"):
        Tokenizer(vocab=["red", "<pad>", "<unk>"])
    with pytest.raises(ConfigError, match="duplicate words: \\['red'\\]"):
        Tokenizer(vocab=["<pad>", "<unk>", "red", "red"])
    with pytest.raises(ConfigError, match="max_len=0"):
        Tokenizer(max_len=0)
