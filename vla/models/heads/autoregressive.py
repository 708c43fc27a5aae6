"""Autoregressive head: action tokens generated one after another, as a language model would.

A chunk of K actions of A dimensions is one causal stream of K*A tokens, time-major:
(step 0, dim 0), (step 0, dim 1), ..., (step 1, dim 0), ...

    position:   0                  1              ...   K*A-1
    input:      start(features)    emb(bin t_0)   ...   emb(bin t_{K*A-2})     (+ position)
                      │ causal Transformer block(s): position i sees only inputs 0..i │
    predicts:   t_0                t_1            ...   t_{K*A-1}

Like RT-2 / OpenVLA decoding action tokens, each token is conditioned on the ones already
chosen, so correlated dimensions (e.g. "move diagonally") and consistent steps within a chunk
can be represented. Training feeds the true previous bins (teacher forcing); inference decodes
greedily. Padded steps sit at the end of the stream, so real tokens never attend to them.
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.heads.base import BinnedActionHead, flatten_readouts
from vla.models.transformer import EncoderBlock


class AutoregressiveHead(BinnedActionHead):
    """Causal decoder over the K*A action bins of a chunk.

    Args:
        d_model, action_dim, num_readouts, chunk_size: see `ActionHead`.
        num_bins: N, uniform bins over [-1,1] per action dimension.
        n_heads, mlp_ratio, dropout, attn_impl: of the causal block(s).
        depth: number of causal blocks.
    """

    def __init__(
        self,
        d_model: int,
        action_dim: int,
        num_bins: int = 256,
        num_readouts: int = 1,
        n_heads: int = 4,
        mlp_ratio: float = 4,
        dropout: float = 0.0,
        attn_impl: str = "sdpa",
        depth: int = 1,
        chunk_size: int = 1,
    ):
        super().__init__(d_model, action_dim, num_bins, num_readouts, chunk_size)
        if depth < 1:
            raise ConfigError(f"depth={depth} must be >= 1")
        self.num_tokens = chunk_size * action_dim
        self.start_proj = nn.Linear(num_readouts * d_model, d_model)  # [B,R*D] -> [B,D]
        self.bin_embed = nn.Embedding(num_bins, d_model)
        self.dim_pos = nn.Parameter(torch.randn(self.num_tokens, d_model) * 0.02)  # [K*A,D]
        self.blocks = nn.ModuleList(
            EncoderBlock(d_model, n_heads, mlp_ratio, dropout, attn_impl) for _ in range(depth)
        )
        self.norm = nn.LayerNorm(d_model)
        self.to_logits = nn.Linear(d_model, num_bins)

    def forward(self, features: Tensor, prev_bins: Tensor) -> Tensor:
        """Logits for tokens 0..j given the bins of tokens 0..j-1 (time-major order).

        Args:
            features: readout features [B,R,D].
            prev_bins: int64 [B,j], 0 <= j < K*A: the bins already chosen (or the true ones).

        Returns:
            logits [B,j+1,N]; row i scores token i (step i // A, dimension i % A).
        """
        B, R, D = features.shape
        j = prev_bins.shape[1]
        if j >= self.num_tokens:
            raise ValueError(f"prev_bins has {j} tokens; at most K*A-1={self.num_tokens - 1}")
        start = self.start_proj(flatten_readouts(features))  # [B,R,D] -> [B,D]
        start = rearrange(start, "b d -> b 1 d")  # [B,D] -> [B,1,D]
        x = torch.cat([start, self.bin_embed(prev_bins)], dim=1)  # -> [B,j+1,D]
        x = x + self.dim_pos[: j + 1]  # [B,j+1,D] + [j+1,D]
        for block in self.blocks:
            x = block(x, causal=True)  # [B,j+1,D]
        return self.to_logits(self.norm(x))  # [B,j+1,D] -> [B,j+1,N]

    def loss(
        self, features: Tensor, target_norm: Tensor, is_pad: Tensor | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """Teacher forcing: one pass over the true stream (its bin accuracy is the
        teacher-forced one; greedy decoding is `predict`'s)."""
        self.check_target(target_norm, is_pad)
        bins = self.encode(target_norm)  # [B,K,A]
        stream = rearrange(bins, "b k a -> b (k a)")  # time-major token stream [B,K*A]
        logits = self(features, stream[:, :-1])  # teacher forcing -> [B,K*A,N]
        logits = rearrange(logits, "b (k a) n -> b k a n", a=self.action_dim)
        return self.token_loss(logits, bins, is_pad)

    def predict(self, features: Tensor) -> Tensor:
        B = features.shape[0]
        bins = torch.zeros(B, 0, dtype=torch.long, device=features.device)  # [B,0]
        for _ in range(self.num_tokens):
            next_bin = self(features, bins)[:, -1].argmax(dim=-1)  # [B,j+1,N] -> [B]
            bins = torch.cat([bins, next_bin[:, None]], dim=1)  # [B,j] -> [B,j+1]
        return self.decode(rearrange(bins, "b (k a) -> b k a", a=self.action_dim))  # [B,K,A]
