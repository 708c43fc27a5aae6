"""Discrete head: each action dimension is a classification over uniform bins (RT-2/OpenVLA).

    features [B,R,D] ─ MLP ─> logits [B,K*A*N] ─> [B,K,A,N] ─ cross-entropy vs bins(target)
                                                           └ argmax ─> bin centres ─> [B,K,A]

Cross-entropy over bins can represent multimodal action distributions that a regression
would average; the price is a quantisation error of at most half a bin (1/N in [-1,1] units).
Every step of a chunk and every dimension is classified independently of the others.
"""

from __future__ import annotations

from einops import rearrange
from torch import Tensor, nn

from vla.models.heads.base import BinnedActionHead, flatten_readouts


class DiscreteHead(BinnedActionHead):
    """features [B,R,D] -> per-step, per-dimension bin logits [B,K,A,N].

    Args:
        d_model, action_dim, num_readouts, chunk_size: see `ActionHead`.
        num_bins: N, uniform bins over [-1,1] per action dimension.
        hidden_dim: MLP width (None: d_model).
    """

    def __init__(
        self,
        d_model: int,
        action_dim: int,
        num_bins: int = 256,
        num_readouts: int = 1,
        hidden_dim: int | None = None,
        chunk_size: int = 1,
    ):
        super().__init__(d_model, action_dim, num_bins, num_readouts, chunk_size)
        self.hidden_dim = d_model if hidden_dim is None else hidden_dim
        self.action_head = nn.Sequential(
            nn.Linear(num_readouts * d_model, self.hidden_dim),  # [B,R*D] -> [B,Hd]
            nn.GELU(),
            nn.Linear(self.hidden_dim, chunk_size * action_dim * num_bins),  # -> [B,K*A*N]
        )

    def forward(self, features: Tensor) -> Tensor:
        """features [B,R,D] -> logits [B,K,A,N]."""
        B, R, D = features.shape
        logits = self.action_head(flatten_readouts(features))  # [B,R,D] -> [B,K*A*N]
        return rearrange(
            logits, "b (k a n) -> b k a n", k=self.chunk_size, a=self.action_dim
        )  # -> [B,K,A,N]

    def loss(
        self, features: Tensor, target_norm: Tensor, is_pad: Tensor | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        self.check_target(target_norm, is_pad)
        logits = self(features)  # [B,K,A,N]
        return self.token_loss(logits, self.encode(target_norm), is_pad)

    def predict(self, features: Tensor) -> Tensor:
        return self.decode(self(features).argmax(dim=-1))  # [B,K,A,N] -> [B,K,A]
