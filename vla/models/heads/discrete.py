"""Discrete head: each action dimension is a classification over uniform bins (RT-2/OpenVLA).

    features [B,R,D] ─ MLP ─> logits [B,A*N] ─> [B,A,N] ─ cross-entropy vs bins(target) [B,A]
                                                        └ argmax ─> bin centres ─> actions [B,A]

Cross-entropy over bins can represent multimodal action distributions that a regression
would average; the price is a quantisation error of at most half a bin (1/N in [-1,1] units).
"""

from __future__ import annotations

import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from vla.models.heads.base import BinnedActionHead, flatten_readouts


class DiscreteHead(BinnedActionHead):
    """features [B,R,D] -> per-dimension bin logits [B,A,N].

    Args:
        d_model, action_dim, num_readouts: see `ActionHead`.
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
    ):
        super().__init__(d_model, action_dim, num_bins, num_readouts)
        self.hidden_dim = d_model if hidden_dim is None else hidden_dim
        self.action_head = nn.Sequential(
            nn.Linear(num_readouts * d_model, self.hidden_dim),  # [B,R*D] -> [B,Hd]
            nn.GELU(),
            nn.Linear(self.hidden_dim, action_dim * num_bins),  # [B,Hd] -> [B,A*N]
        )

    def forward(self, features: Tensor) -> Tensor:
        """features [B,R,D] -> logits [B,A,N]."""
        B, R, D = features.shape
        logits = self.action_head(flatten_readouts(features))  # [B,R,D] -> [B,A*N]
        return rearrange(logits, "b (a n) -> b a n", a=self.action_dim)  # -> [B,A,N]

    def loss_and_prediction(
        self, features: Tensor, target_norm: Tensor
    ) -> tuple[Tensor, dict[str, Tensor], Tensor]:
        logits = self(features)  # [B,A,N]
        bins = self.encode(target_norm)  # [B,A]
        ce = F.cross_entropy(rearrange(logits, "b a n -> (b a) n"), rearrange(bins, "b a -> (b a)"))
        logs = {"ce": ce.detach(), "bin_accuracy": self._accuracy(logits.detach(), bins)}
        return ce, logs, self.decode(logits.detach().argmax(dim=-1))

    def predict(self, features: Tensor) -> Tensor:
        return self.decode(self(features).argmax(dim=-1))  # [B,A,N] -> [B,A]

    def flops(self) -> int:
        R, D, A, N = self.num_readouts, self.d_model, self.action_dim, self.num_bins
        return 2 * self.hidden_dim * (R * D + A * N)
