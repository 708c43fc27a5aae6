"""Word-level tokenizer whose vocabulary travels inside the model's state_dict.

The task's grammar is closed, so the vocabulary is known before any data exists
(`vla.envs.grammar.vocabulary`). Storing it with the weights (as plain lists and ints,
which `torch.load(weights_only=True)` accepts) means a checkpoint always turns text into the
same ids it was trained on, even if the grammar later grows.

    ["Reach the red circle!", "go to the blue square"]
        -> [["reach", "the", "red", "circle"], ["go", "to", "the", "blue", "square"]]
           lowercase, strip punctuation
        -> [[18, 24, 19, 7, 0], [9, 26, 24, 5, 23]]
           ids, PAD-padded to the longest instruction of the batch (at most max_len words)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from vla.envs import grammar
from vla.envs.grammar import split_words
from vla.errors import ConfigError

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1


def default_vocabulary() -> list[str]:
    """["<pad>", "<unk>"] + every word of the task's grammar, in a fixed order."""
    return [PAD, UNK, *grammar.vocabulary()]


class Tokenizer(nn.Module):
    """Instruction text <-> token ids [B,L] (L = max_len, PAD id 0, unknown words UNK id 1).

    It has no parameters; it is a module so its vocabulary is saved and loaded with the policy.

    Args:
        vocab: words by id; must start with "<pad>", "<unk>". None: the grammar's vocabulary.
        max_len: instruction length in words; longer ones are truncated with a warning.
            None: the longest instruction the grammar produces.
    """

    def __init__(self, vocab: Sequence[str] | None = None, max_len: int | None = None):
        super().__init__()
        self._set_vocab(
            default_vocabulary() if vocab is None else list(vocab),
            grammar.max_words() if max_len is None else int(max_len),
        )

    @classmethod
    def from_grammar(cls, max_len: int | None = None) -> Tokenizer:
        """The tokenizer for the task's grammar (the default)."""
        return cls(vocab=None, max_len=max_len)

    def _set_vocab(self, vocab: list[str], max_len: int) -> None:
        if vocab[:2] != [PAD, UNK]:
            raise ConfigError(f"vocab must start with {[PAD, UNK]}, got {vocab[:2]}")
        if len(set(vocab)) != len(vocab):
            dupes = sorted({w for w in vocab if vocab.count(w) > 1})
            raise ConfigError(f"vocab has duplicate words: {dupes}")
        if max_len < 1:
            raise ConfigError(f"max_len={max_len} must be >= 1")
        self.vocab = [str(w) for w in vocab]
        self.max_len = max_len
        self.word_to_id = {w: i for i, w in enumerate(self.vocab)}

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str | Sequence[str]) -> Tensor:
        """Token ids for one instruction or a batch.

        Args:
            text: a string, or a list/tuple of B strings.

        Returns:
            int64 [B,L] (B = 1 for a single string): L is the longest instruction's length in
            words (at most max_len; at least 1), the others PAD-padded. PAD words are masked
            everywhere, so a shorter L gives the same actions for less work.
        """
        texts = [text] if isinstance(text, str) else list(text)
        rows, too_long, memo = [], [], {}  # datasets repeat a few hundred phrasings many times
        for t in texts:
            t = str(t)
            if t not in memo:
                words = split_words(t)
                if len(words) > self.max_len:
                    too_long.append(t)
                    words = words[: self.max_len]
                memo[t] = [self.word_to_id.get(w, UNK_ID) for w in words]
            rows.append(memo[t])
        L = max([1, *(len(r) for r in rows)])
        rows = [r + [PAD_ID] * (L - len(r)) for r in rows]
        if too_long:
            warnings.warn(
                f"{len(too_long)} instruction(s) longer than max_len={self.max_len} words were "
                f"truncated, e.g. {too_long[0]!r}",
                stacklevel=2,
            )
        return torch.tensor(rows, dtype=torch.long).reshape(len(texts), L)  # [B,L]

    def decode(self, ids: Tensor | Sequence) -> list[str]:
        """Text for ids [B,L] (or one row [L]); PAD is dropped, unknown ids read as "<unk>"."""
        ids = torch.as_tensor(ids)
        if ids.dim() == 1:
            ids = ids[None]  # [L] -> [1,L]
        texts = []
        for row in ids.tolist():
            words = [self.vocab[i] if 0 <= i < len(self.vocab) else UNK for i in row if i != PAD_ID]
            texts.append(" ".join(words))
        return texts

    def get_extra_state(self) -> dict:
        return {"vocab": list(self.vocab), "max_len": int(self.max_len)}

    def set_extra_state(self, state: dict) -> None:
        # the checkpoint's vocabulary wins: its ids are the ones the weights were trained on
        self._set_vocab(list(state["vocab"]), int(state["max_len"]))

    def extra_repr(self) -> str:
        return f"vocab_size={self.vocab_size}, max_len={self.max_len}"
