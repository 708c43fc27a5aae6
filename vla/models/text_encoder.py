"""Instruction tokens: word embedding plus 1-D positions, and the mask of PAD positions.

ids [B,L] ─ nn.Embedding (PAD row fixed at zero) ─ + pos ─> words [B,L,D]
          └─ ids == PAD ───────────────────────────────> pad_mask [B,L] (True = PAD)
"""

from __future__ import annotations

from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.positions import PositionEmbedding1D, check_pos_emb
from vla.models.tokenizer import PAD_ID, Tokenizer


class TextEncoder(nn.Module):
    """Token ids [B,L] -> word tokens [B,L,D] and their padding mask [B,L].

    Args:
        d_model: token width.
        vocab_size: embedding rows; None: the size of the grammar's default vocabulary.
        max_len: most words an instruction may have (L <= max_len); None: the grammar's longest.
        pos_emb: "learned" | "sinusoidal" | "none".
    """

    def __init__(
        self,
        d_model: int,
        vocab_size: int | None = None,
        max_len: int | None = None,
        pos_emb: str = "learned",
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

    def forward(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """
        Args:
            tokens: int64 ids [B,L], PAD = 0.

        Returns:
            words [B,L,D] and pad_mask bool [B,L] (True = PAD).
        """
        B, L = tokens.shape
        words = self.pos(self.embed(tokens))  # [B,L] -> [B,L,D]
        return words, tokens == PAD_ID
