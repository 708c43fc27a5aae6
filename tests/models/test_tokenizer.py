import io

import pytest
import torch

from vla.envs import instructions
from vla.errors import ConfigError
from vla.models.tokenizer import PAD_ID, UNK_ID, Tokenizer


def _small():
    return Tokenizer(vocab=["<pad>", "<unk>", "reach", "the", "red", "circle"], max_len=6)


def test_known_ids_padding_and_unknown_words():
    tok = _small()
    ids = tok.encode(["Reach the RED circle!", "reach the purple circle"])
    assert ids.dtype == torch.int64 and ids.shape == (2, 6)
    assert ids.tolist() == [[2, 3, 4, 5, 0, 0], [2, 3, 1, 5, 0, 0]]
    assert PAD_ID == 0 and UNK_ID == 1
    assert tok.encode("the").tolist() == [[3, 0, 0, 0, 0, 0]]
    assert tok.decode(ids) == ["reach the red circle", "reach the <unk> circle"]


def test_default_vocabulary_covers_the_grammar():
    tok = Tokenizer.from_grammar()
    assert tok.vocab[:2] == ["<pad>", "<unk>"]
    assert tok.vocab[2:] == instructions.vocabulary()
    assert tok.max_len == instructions.max_words()
    texts = [
        instructions.instruction(c, s, t)
        for c, s in instructions.PAIRS
        for t in range(len(instructions.TEMPLATES))
    ]
    ids = tok.encode(texts)
    assert not (ids == UNK_ID).any()
    assert tok.decode(ids) == texts


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
