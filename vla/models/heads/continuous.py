"""Continuous head: regress the normalised action directly (MSE or smooth L1)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from vla.models.heads.base import ActionHead, flatten_readouts

LOSSES = ("mse", "smooth_l1")


class ContinuousHead(ActionHead):
    """features [B,R,D] -> MLP -> actions [B,A].

    The output is not squashed (a tanh would starve the gradient exactly at the +-1 targets the
    expert often outputs); predictions are clipped to [-1,1] instead.

    Args:
        d_model, action_dim, num_readouts: see `ActionHead`.
        hidden_dim: MLP width (None: d_model).
        loss: "mse" | "smooth_l1".
    """

    def __init__(
        self,
        d_model: int,
        action_dim: int,
        num_readouts: int = 1,
        hidden_dim: int | None = None,
        loss: str = "mse",
    ):
        super().__init__(d_model, action_dim, num_readouts)
        if loss not in LOSSES:
            raise ValueError(f"unknown loss {loss!r} (expected one of: {', '.join(LOSSES)})")
        self.loss_kind = loss
        self.hidden_dim = d_model if hidden_dim is None else hidden_dim
        self.action_head = nn.Sequential(
            nn.Linear(num_readouts * d_model, self.hidden_dim),  # [B,R*D] -> [B,Hd]
            nn.GELU(),
            nn.Linear(self.hidden_dim, action_dim),  # [B,Hd] -> [B,A]
        )

    def forward(self, features: Tensor) -> Tensor:
        """features [B,R,D] -> unclipped normalised actions [B,A]."""
        B, R, D = features.shape
        return self.action_head(flatten_readouts(features))  # [B,R,D] -> [B,R*D] -> [B,A]

    def loss_and_prediction(
        self, features: Tensor, target_norm: Tensor
    ) -> tuple[Tensor, dict[str, Tensor], Tensor]:
        pred = self(features)  # [B,A]
        mse = F.mse_loss(pred, target_norm)
        loss = mse if self.loss_kind == "mse" else F.smooth_l1_loss(pred, target_norm)
        logs = {"mse_norm": mse.detach()}
        return loss, logs, pred.detach().clamp(-1.0, 1.0)

    def predict(self, features: Tensor) -> Tensor:
        return self(features).clamp(-1.0, 1.0)

    def flops(self) -> int:
        return 2 * self.hidden_dim * (self.num_readouts * self.d_model + self.action_dim)
