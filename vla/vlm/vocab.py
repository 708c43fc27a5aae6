"""One vocabulary for questions, instructions, answers, locations and actions.

    ids  0..1          <pad> <unk>                     (the policies' tokenizer convention)
         2..           the grammar's words             (instructions: vla.envs.grammar)
                       question and answer words       ("what", "colour", "yes", "two", ...)
                       <bos> <eos>                      the suffix starts / ends
                       <loc_0> .. <loc_{L-1}>           a coordinate, L bins per axis (PaLI)
                       <act_0> .. <act_{N-1}>           an action bin, N bins per dim (OpenVLA)

The order never changes for given sizes, so ids are stable, and the list travels with the
weights (`vla.models.language.Tokenizer` stores it in the state_dict). Text is encoded word by
word by that tokenizer; the special tokens are only ever produced as ids.
"""

from __future__ import annotations

import numpy as np

from vla.envs import grammar
from vla.errors import ConfigError
from vla.models.language import PAD, UNK, Tokenizer

NUMBERS = ("zero", "one", "two", "three", "four", "five")
PLURALS = {"circle": "circles", "square": "squares", "triangle": "triangles", "shape": "shapes"}
QUESTION_WORDS = (
    "what", "which", "where", "how", "many", "is", "are", "there", "in", "scene", "colour",
    "of", "yes", "no", "and", *NUMBERS, *PLURALS.values(),
)  # fmt: skip
BOS, EOS = "<bos>", "<eos>"


def vlm_vocabulary(loc_bins: int, action_bins: int) -> list[str]:
    """Every token of the VLM, in id order."""
    if loc_bins < 2 or action_bins < 2:
        raise ConfigError(f"loc_bins={loc_bins} and action_bins={action_bins} must be >= 2")
    words = sorted(set(grammar.vocabulary()) | set(QUESTION_WORDS))
    locs = [f"<loc_{i}>" for i in range(loc_bins)]
    acts = [f"<act_{i}>" for i in range(action_bins)]
    return [PAD, UNK, *words, BOS, EOS, *locs, *acts]


class VLMTokenizer(Tokenizer):
    """The policies' word tokenizer over the VLM's vocabulary, plus the special ids.

    Args:
        loc_bins: location tokens per axis (a point is two: x then y).
        action_bins: action-bin tokens, shared by every action dimension.
        max_len: words in the longest question or instruction.
    """

    def __init__(self, loc_bins: int = 32, action_bins: int = 256, max_len: int = 16):
        super().__init__(vlm_vocabulary(loc_bins, action_bins), max_len)
        self.loc_bins, self.action_bins = loc_bins, action_bins

    def _set_vocab(self, vocab: list[str], max_len: int) -> None:
        super()._set_vocab(vocab, max_len)
        self.bos_id, self.eos_id = self.word_to_id[BOS], self.word_to_id[EOS]
        self.loc_start = self.word_to_id["<loc_0>"]
        self.action_start = self.word_to_id["<act_0>"]
        self.loc_bins = self.action_start - self.loc_start
        self.action_bins = len(vocab) - self.action_start

    def answer_ids(self, answer: str) -> list[int]:
        """Answer text (words and <loc_i> tokens, space-separated) -> ids, <eos> appended."""
        ids = [self.word_to_id.get(w, -1) for w in answer.split()]
        if -1 in ids:
            raise ValueError(f"answer {answer!r} has a token outside the VLM's vocabulary")
        return [*ids, self.eos_id]

    def answer_text(self, ids) -> str:
        """Decoded ids -> answer text, up to (not including) the first <eos>."""
        words = []
        for i in ids:
            if i == self.eos_id:
                break
            words.append(self.vocab[i] if 0 <= i < len(self.vocab) else UNK)
        return " ".join(words)

    # ---- locations: arena coordinates in [0,1] <-> loc tokens ----
    def point_text(self, xy) -> str:
        """(x, y) in arena units -> "<loc_i> <loc_j>" (bins of width 1 / loc_bins)."""
        bins = np.clip((np.asarray(xy, dtype=np.float64) * self.loc_bins).astype(int), 0, None)
        bins = np.minimum(bins, self.loc_bins - 1)
        return " ".join(f"<loc_{int(b)}>" for b in bins)

    def point_of(self, answer: str) -> np.ndarray | None:
        """ "<loc_i> <loc_j>" -> the bins' centres (x, y); None unless exactly two loc tokens."""
        words = answer.split()
        if len(words) != 2 or not all(w.startswith("<loc_") for w in words):
            return None
        return np.array([(int(w[5:-1]) + 0.5) / self.loc_bins for w in words])

    def get_extra_state(self) -> dict:
        return super().get_extra_state() | {"kind": "vlm"}
