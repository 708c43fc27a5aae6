"""Readout: learned action-query tokens that gather what the action head needs.

    "self":  [patches | words | state | queries] ─ encoder ─> take the last R positions ─> [B,R,D]
    "cross": [patches | words | state] ─ encoder ─> obs [B,T,D]
             queries [B,R,D] ─ norm ─ cross-attn(Q=queries, K,V=obs) ─(+)─ norm ─ MLP ─(+)─ norm ─> [B,R,D]

"self" lets every layer mix the queries with the observation (BERT's [CLS], Octo's readouts);
"cross" keeps the observation encoding free of the queries and reads it once at the end
(a Perceiver / DETR-style decoder layer), which also makes its attention easy to inspect.
"""

from __future__ import annotations

import torch
from einops import repeat
from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.attention import MultiHeadAttention
from vla.models.transformer import MLP

READOUTS = ("self", "cross")


class Readout(nn.Module):
    """Learned query tokens and, for "cross", the decoder layer that reads the encoded sequence.

    Args:
        d_model: token width.
        n_heads: heads of the cross-attention ("cross" only).
        num_readouts: R, number of query tokens.
        mode: "self" (queries go through the encoder) or "cross" (queries cross-attend to it).
        mlp_ratio, dropout, attn_impl: of the cross-attention layer ("cross" only).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int = 4,
        num_readouts: int = 1,
        mode: str = "self",
        mlp_ratio: float = 4,
        dropout: float = 0.0,
        attn_impl: str = "sdpa",
    ):
        super().__init__()
        if mode not in READOUTS:
            raise ConfigError(f"unknown readout {mode!r} (expected one of: {', '.join(READOUTS)})")
        if num_readouts < 1:
            raise ConfigError(f"num_readouts={num_readouts} must be >= 1")
        self.d_model = d_model
        self.num_readouts = num_readouts
        self.mode = mode
        self.queries = nn.Parameter(torch.randn(num_readouts, d_model) * 0.02)  # [R,D]
        if mode == "cross":
            self.norm_q = nn.LayerNorm(d_model)
            self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout, attn_impl)
            self.norm_mlp = nn.LayerNorm(d_model)
            self.mlp = MLP(d_model, mlp_ratio, dropout)
            self.norm_out = nn.LayerNorm(d_model)

    @property
    def in_sequence(self) -> bool:
        """Whether the queries are appended to the encoder's input ("self")."""
        return self.mode == "self"

    def query_tokens(self, batch_size: int) -> Tensor:
        """The queries for a batch: [R,D] -> [B,R,D]."""
        return repeat(self.queries, "r d -> b r d", b=batch_size)

    def forward(
        self,
        tokens: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor | None]:
        """Readout features from the encoder's output.

        Args:
            tokens: encoder output [B,T,D]; for "self" its last R positions are the queries.
            key_padding_mask: bool [B,T], True = PAD ("cross" only; "self" masked in the encoder).
            need_weights: also return the cross-attention weights [B,H,R,T] (None for "self").

        Returns:
            features [B,R,D] (and the weights when asked).
        """
        B, T, D = tokens.shape
        R = self.num_readouts
        weights = None
        if self.mode == "self":
            out = tokens[:, T - R :]  # [B,T,D] -> [B,R,D]
        else:
            q = self.query_tokens(B)  # [B,R,D]
            attn = self.cross_attn(
                self.norm_q(q), tokens, key_padding_mask=key_padding_mask, need_weights=need_weights
            )  # Q [B,R,D], K,V [B,T,D] -> [B,R,D]
            if need_weights:
                attn, weights = attn
            x = q + attn
            x = x + self.mlp(self.norm_mlp(x))
            out = self.norm_out(x)
        return (out, weights) if need_weights else out
