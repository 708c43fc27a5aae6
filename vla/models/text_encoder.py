"""Instruction tokens: word embedding plus 1-D positions, optionally read in context by a few
Transformer blocks over the words alone, and the mask of PAD positions.

ids [B,L] ─ nn.Embedding (PAD row fixed at zero) ─ + pos ─ (depth x EncoderBlock) ─> words [B,L,D]
          └─ ids == PAD ──────────────────────────────────────────────────────> pad_mask [B,L]

Word embeddings plus positions, averaged (the pooled instruction that FiLM and the keypoint
detector are conditioned on), are a bag of words: "the red circle then the blue square" and
"the blue square then the red circle" pool to the same vector. Blocks over the words first
make each word's token depend on its neighbours, so the pooled vector can say which shape
comes first (as a language model's encoding of an instruction does in a VLA).

With `referent_positions`, a word's position counts from the start of its referent (the
instruction's start, or its "then") and a second embedding says which referent it is in:
"reach the red circle then the blue square then the green star" then uses the same positions
for each of its referents, so a three-step chain meets no position a two-step one never
trained. `referent_jitter` adds a random offset in [0, jitter] to every instruction's referent
numbers while training (randomised positions, Ruoss et al. 2023), so numbers past the longest
trained chain are trained too, and only their order carries meaning.
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.positions import PositionEmbedding1D, check_pos_emb
from vla.models.tokenizer import PAD_ID, Tokenizer
from vla.models.transformer import EncoderBlock


def masked_mean(x: Tensor, pad_mask: Tensor) -> Tensor:
    """Mean of x [B,L,D] over the positions where pad_mask [B,L] is False -> [B,D]: the
    pooled instruction that conditions vision."""
    keep = rearrange((~pad_mask).to(x.dtype), "b l -> b l 1")  # [B,L] -> [B,L,1]
    total = (x * keep).sum(dim=1)  # [B,L,D] -> [B,D]
    return total / keep.sum(dim=1).clamp(min=1.0)  # an all-PAD instruction pools to zero


class TextEncoder(nn.Module):
    """Token ids [B,L] -> word tokens [B,L,D] and their padding mask [B,L].

    Args:
        d_model: token width.
        vocab_size: embedding rows; None: the size of the grammar's default vocabulary.
        max_len: most words an instruction may have (L <= max_len); None: the grammar's longest.
        pos_emb: "learned" | "sinusoidal" | "none".
        depth: Transformer blocks over the words (0: none, the embeddings as they are).
        n_heads, mlp_ratio, dropout, attn_impl: of those blocks.
        referent_positions: positions count within each referent, plus a referent number.
        referent_jitter: while training, referent numbers start at a random value in
            [0, referent_jitter] (0: always at 0).
        then_id: the id of "then" in the tokenizer's vocabulary (it opens a referent; needed
            with `referent_positions`; the policy gives it).
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
        check_pos_emb(pos_emb)
        default = Tokenizer() if vocab_size is None or max_len is None else None
        self.vocab_size = default.vocab_size if vocab_size is None else vocab_size
        self.max_len = default.max_len if max_len is None else max_len
        if self.vocab_size < 2 or self.max_len < 1:
            raise ConfigError(
                f"vocab_size={self.vocab_size} must be >= 2 and max_len={self.max_len} >= 1"
            )
        self.d_model = d_model
        self.embed = nn.Embedding(self.vocab_size, d_model, padding_idx=PAD_ID)
        self.pos = PositionEmbedding1D(self.max_len, d_model, pos_emb)
        if depth < 0:
            raise ConfigError(f"text_encoder.depth={depth} must be >= 0")
        if referent_jitter < 0:
            raise ConfigError(f"text_encoder.referent_jitter={referent_jitter} must be >= 0")
        self.referent_positions, self.referent_jitter = referent_positions, referent_jitter
        if referent_positions:  # "then" opens a referent; a referent number per word
            if then_id is None:
                raise ConfigError(
                    "text_encoder.referent_positions=true counts words from each 'then', "
                    "but the vocabulary has no 'then'"
                )
            self.then_id = then_id
            self.referent_embed = nn.Embedding(self.max_len + referent_jitter, d_model)
            nn.init.normal_(self.referent_embed.weight, std=0.02)
        self.blocks = nn.ModuleList(
            EncoderBlock(d_model, n_heads, mlp_ratio, dropout, attn_impl) for _ in range(depth)
        )

    def forward(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """
        Args:
            tokens: int64 ids [B,L], PAD = 0.

        Returns:
            words [B,L,D] and pad_mask bool [B,L] (True = PAD).
        """
        B, L = tokens.shape
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
