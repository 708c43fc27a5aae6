"""Words: instruction text -> ids -> word tokens, and the pooled instruction.

    ["Reach the red circle!", "go to the blue square"]
        ─ Tokenizer: lowercase, strip punctuation, ids, PAD-padded to the batch's longest
        ─> ids [B,L]  e.g. [[18, 24, 19, 7, 0], [9, 26, 24, 5, 23]]
        ─ TextEncoder: nn.Embedding (PAD row zero) + positions ─ (depth x EncoderBlock)
        ─> words [B,L,D], pad_mask [B,L] ─ masked_mean ─> instruction [B,D]

The task's grammar is closed, so the vocabulary is known before any data exists
(`vla.envs.grammar.vocabulary`). The tokenizer stores it with the weights (plain lists, which
`torch.load(weights_only=True)` accepts), so a checkpoint turns text into the ids it was
trained on even if the grammar grows.

A mean of word embeddings is a bag of words: "the red circle then the blue square" pools like
its reverse. `depth` blocks over the words make each word depend on its neighbours first. With
`referent_positions` (experiment=suite) a word's position counts from its referent's start (the
instruction's or a "then") and a referent number is added, so a three-step chain meets no
position a two-step one never trained; `referent_jitter` starts the numbers at a random
0..jitter in training (randomised positions, Ruoss et al. 2023), so only their order matters.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from einops import rearrange
from torch import Tensor, nn

from vla.envs import grammar
from vla.envs.grammar import split_words
from vla.errors import ConfigError
from vla.models.transformer import EncoderBlock, PositionEmbedding

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1


def default_vocabulary() -> list[str]:
    """["<pad>", "<unk>"] + every word of the task's grammar, in a fixed order."""
    return [PAD, UNK, *grammar.vocabulary()]


class Tokenizer(nn.Module):
    """Instruction text <-> ids [B,L] (PAD id 0, unknown words UNK id 1); a module without
    parameters, so its vocabulary is saved and loaded with the policy.

    Args:
        vocab: words by id, starting "<pad>", "<unk>" (None: the grammar's vocabulary).
        max_len: most words an instruction keeps; longer ones are truncated with a warning
            (None: the longest instruction the grammar produces).
    """

    def __init__(self, vocab: Sequence[str] | None = None, max_len: int | None = None):
        super().__init__()
        self._set_vocab(
            default_vocabulary() if vocab is None else list(vocab),
            grammar.max_words() if max_len is None else int(max_len),
        )

    def _set_vocab(self, vocab: list[str], max_len: int) -> None:
        if vocab[:2] != [PAD, UNK]:
            raise ConfigError(f"vocab must start with {[PAD, UNK]}, got {vocab[:2]}")
        if len(set(vocab)) != len(vocab):
            dupes = sorted({w for w in vocab if vocab.count(w) > 1})
            raise ConfigError(f"vocab has duplicate words: {dupes}")
        if max_len < 1:
            raise ConfigError(f"max_len={max_len} must be >= 1")
        self.vocab, self.max_len = [str(w) for w in vocab], max_len
        self.word_to_id = {w: i for i, w in enumerate(self.vocab)}

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str | Sequence[str]) -> Tensor:
        """One instruction or a batch of B -> ids int64 [B,L]: L is the longest one's words
        (1 <= L <= max_len), the others PAD-padded. PAD is masked everywhere, so a shorter L
        gives the same actions for less work."""
        texts = [text] if isinstance(text, str) else list(text)
        rows, too_long, memo = [], [], {}  # datasets repeat a few hundred phrasings many times
        for t in map(str, texts):
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
        rows = (ids[None] if ids.dim() == 1 else ids).tolist()  # [L] -> [1,L]
        v = self.vocab
        return [
            " ".join(v[i] if 0 <= i < len(v) else UNK for i in row if i != PAD_ID) for row in rows
        ]

    def get_extra_state(self) -> dict:
        return {"vocab": list(self.vocab), "max_len": int(self.max_len)}

    def set_extra_state(self, state: dict) -> None:
        # the checkpoint's vocabulary wins: its ids are the ones the weights were trained on
        self._set_vocab(list(state["vocab"]), int(state["max_len"]))

    def extra_repr(self) -> str:
        return f"vocab_size={self.vocab_size}, max_len={self.max_len}"


def masked_mean(x: Tensor, pad_mask: Tensor) -> Tensor:
    """Mean of x [B,L,D] over the positions where pad_mask [B,L] is False -> [B,D] (an
    all-PAD instruction pools to zero)."""
    keep = rearrange((~pad_mask).to(x.dtype), "b l -> b l 1")  # [B,L] -> [B,L,1]
    return (x * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)  # [B,L,D] -> [B,D]


class TextEncoder(nn.Module):
    """Ids [B,L] -> word tokens [B,L,D] and their padding mask [B,L] (True = PAD).

    Args:
        d_model: token width.
        vocab_size, max_len: embedding rows and most words (None: the grammar's; the policy
            gives its tokenizer's).
        pos_emb: "learned" | "sinusoidal" | "none".
        depth: Transformer blocks over the words (0: the embeddings as they are).
        n_heads, mlp_ratio, dropout, attn_impl: of those blocks.
        referent_positions: positions count within each referent, plus a referent number.
        referent_jitter: training referent numbers start at a random 0..jitter.
        then_id: the id of "then", which opens a referent (the policy gives it).
    """

    def __init__(
        self,
        d_model: int,
        vocab_size: int | None = None,
        max_len: int | None = None,
        pos_emb: str = "learned",
        depth: int = 0,
        n_heads: int = 4,
        mlp_ratio: float = 4,
        dropout: float = 0.0,
        attn_impl: str = "sdpa",
        referent_positions: bool = False,
        referent_jitter: int = 0,
        then_id: int | None = None,
    ):
        super().__init__()
        self.vocab_size = len(default_vocabulary()) if vocab_size is None else vocab_size
        self.max_len = grammar.max_words() if max_len is None else max_len
        if self.vocab_size < 2 or self.max_len < 1:
            raise ConfigError(
                f"vocab_size={self.vocab_size} must be >= 2 and max_len={self.max_len} >= 1"
            )
        if depth < 0 or referent_jitter < 0:
            raise ConfigError(
                f"text_encoder.depth={depth} and referent_jitter={referent_jitter} must be >= 0"
            )
        if referent_positions and then_id is None:
            raise ConfigError(
                "text_encoder.referent_positions=true counts words from each 'then', "
                "but the vocabulary has no 'then'"
            )
        self.embed = nn.Embedding(self.vocab_size, d_model, padding_idx=PAD_ID)
        self.pos = PositionEmbedding((self.max_len,), d_model, pos_emb)
        self.referent_positions, self.referent_jitter = referent_positions, referent_jitter
        if referent_positions:
            self.then_id = then_id
            self.referent_embed = nn.Embedding(self.max_len + referent_jitter, d_model)
            nn.init.normal_(self.referent_embed.weight, std=0.02)
        self.blocks = nn.ModuleList(
            EncoderBlock(d_model, n_heads, mlp_ratio, dropout, attn_impl) for _ in range(depth)
        )

    def forward(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """ids int64 [B,L] (PAD = 0) -> words [B,L,D], pad_mask bool [B,L]."""
        if self.referent_positions:
            words = self.embed(tokens) + self.referent_codes(tokens)  # [B,L] -> [B,L,D]
        else:
            words = self.pos(self.embed(tokens))  # [B,L] -> [B,L,D]
        pad_mask = tokens == PAD_ID
        for block in self.blocks:
            words = block(words, key_padding_mask=pad_mask)  # [B,L,D]
        return words, pad_mask

    def referent_codes(self, tokens: Tensor) -> Tensor:
        """Position within the referent plus referent number, for ids [B,L] -> [B,L,D]."""
        B, L = tokens.shape
        index = torch.arange(L, device=tokens.device).expand(B, L)  # [B,L]
        opens = tokens == self.then_id  # [B,L]
        number = opens.long().cumsum(-1)  # [B,L]: 0 before the first "then", 1 after, ...
        start = torch.where(opens, index, torch.zeros_like(index)).cummax(-1).values  # [B,L]
        if self.training and self.referent_jitter:
            number = number + torch.randint(
                0, self.referent_jitter + 1, (B, 1), device=tokens.device
            )
        codes = self.referent_embed(number)  # [B,L,D]
        if self.pos.table is not None:
            codes = codes + self.pos.table[index - start]  # [B,L,D]
        return codes
