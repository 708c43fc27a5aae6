"""Instruction tokens: word embedding plus 1-D positions, optionally read in context by a few
Transformer blocks over the words alone, and the mask of PAD positions.

ids [B,L] ─ nn.Embedding (PAD row fixed at zero) ─ + pos ─ (depth x EncoderBlock) ─> words [B,L,D]
          └─ ids == PAD ──────────────────────────────────────────────────────> pad_mask [B,L]

Word embeddings plus positions, averaged (the pooled instruction that FiLM and the keypoint
detector are conditioned on), are a bag of words: "the red circle then the blue square" and
"the blue square then the red circle" pool to the same vector. Blocks over the words first
make each word's token depend on its neighbours, so the pooled vector can say which shape
comes first (as a language model's encoding of an instruction does in a VLA).
"""

from __future__ import annotations

from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.positions import PositionEmbedding1D, check_pos_emb
from vla.models.tokenizer import PAD_ID, Tokenizer
from vla.models.transformer import EncoderBlock


class TextEncoder(nn.Module):
    """Token ids [B,L] -> word tokens [B,L,D] and their padding mask [B,L].

    Args:
        d_model: token width.
        vocab_size: embedding rows; None: the size of the grammar's default vocabulary.
        max_len: most words an instruction may have (L <= max_len); None: the grammar's longest.
        pos_emb: "learned" | "sinusoidal" | "none".
        depth: Transformer blocks over the words (0: none, the embeddings as they are).
        n_heads, mlp_ratio, dropout, attn_impl: of those blocks.
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
        words = self.pos(self.embed(tokens))  # [B,L] -> [B,L,D]
        pad_mask = tokens == PAD_ID
        for block in self.blocks:
            words = block(words, key_padding_mask=pad_mask)  # [B,L,D]
        return words, pad_mask

    def flops(self, num_words: int) -> int:
        """Forward FLOPs of the blocks over `num_words` words (the embedding is a lookup)."""
        return sum(block.flops(num_words) for block in self.blocks)
