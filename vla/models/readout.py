"""Readout: learned action-query tokens that gather what the action head needs.

    "self":  [patches | words | state | queries] ─ encoder ─> take the last R positions ─> [B,R,D]
    "cross": [patches | words | state] ─ encoder ─> obs [B,T,D]
             queries [B,R,D] ─ norm ─ cross-attn(Q=queries, K,V=obs) ─(+)─ norm ─ MLP ─(+)─ norm ─> [B,R,D]

"self" lets every layer mix the queries with the observation (BERT's [CLS], Octo's readouts);
"cross" keeps the observation encoding free of the queries and reads it once at the end
(a Perceiver / DETR-style decoder layer), which also makes its attention easy to inspect.

With `instruction_query`, each query also gets a projection of the pooled instruction
(zero-initialised, so it starts as the plain learned query): the question the readout asks
the patches then names the target itself, instead of waiting for the words to reach the
readout through the layers.
"""

from __future__ import annotations

import torch
from einops import rearrange, repeat
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
        instruction_query: add a projection of the pooled instruction to every query.
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
        instruction_query: bool = False,
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
        self.instruction_query = instruction_query
        if instruction_query:
            self.query_from_text = nn.Linear(d_model, num_readouts * d_model)  # [B,D] -> [B,R*D]
            nn.init.zeros_(self.query_from_text.weight)
            nn.init.zeros_(self.query_from_text.bias)
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

    def query_tokens(self, batch_size: int, instruction: Tensor | None = None) -> Tensor:
        """The queries for a batch: [R,D] -> [B,R,D], plus the projected pooled instruction
        [B,D] when `instruction_query` is on (then `instruction` is required)."""
        q = repeat(self.queries, "r d -> b r d", b=batch_size)  # [R,D] -> [B,R,D]
        if not self.instruction_query:
            return q
        if instruction is None:
            raise ValueError("instruction_query=True needs the pooled instruction [B,D]")
        cond = self.query_from_text(instruction)  # [B,D] -> [B,R*D]
        return q + rearrange(cond, "b (r d) -> b r d", r=self.num_readouts)  # [B,R,D]

    def forward(
        self,
        tokens: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
        instruction: Tensor | None = None,
    ) -> Tensor | tuple[Tensor, Tensor | None]:
        """Readout features from the encoder's output.

        Args:
            tokens: encoder output [B,T,D]; for "self" its last R positions are the queries.
            key_padding_mask: bool [B,T], True = PAD ("cross" only; "self" masked in the encoder).
            need_weights: also return the cross-attention weights [B,H,R,T] (None for "self").
            instruction: pooled instruction [B,D] ("cross" with `instruction_query` only).

        Returns:
            features [B,R,D] (and the weights when asked).
        """
        B, T, D = tokens.shape
        R = self.num_readouts
        weights = None
        if self.mode == "self":
            out = tokens[:, T - R :]  # [B,T,D] -> [B,R,D]
        else:
            q = self.query_tokens(B, instruction)  # [B,R,D]
            attn = self.cross_attn(
                self.norm_q(q), tokens, key_padding_mask=key_padding_mask, need_weights=need_weights
            )  # Q [B,R,D], K,V [B,T,D] -> [B,R,D]
            if need_weights:
                attn, weights = attn
            x = q + attn
            x = x + self.mlp(self.norm_mlp(x))
            out = self.norm_out(x)
        return (out, weights) if need_weights else out

    def flops(self, t: int) -> int:
        """Forward FLOPs of the cross-attention layer reading `t` tokens (0 for "self")."""
        text = 2 * self.d_model * self.num_readouts * self.d_model if self.instruction_query else 0
        if self.mode == "self":
            return text
        return (
            text + self.cross_attn.flops(self.num_readouts, t) + self.mlp.flops(self.num_readouts)
        )
