"""Continuous head: regress the normalised action chunk directly (MSE or smooth L1)."""

from __future__ import annotations

import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.heads.base import ActionHead, flatten_readouts, mean_over_real_steps

LOSSES = ("mse", "smooth_l1")


class ContinuousHead(ActionHead):
    """features [B,R,D] -> MLP -> action chunk [B,K,A] (K*A outputs, as ACT's chunk).

    The output is not squashed (a tanh would starve the gradient exactly at the +-1 targets the
    expert often outputs); predictions are clipped to [-1,1] instead.

    Args:
        d_model, action_dim, num_readouts, chunk_size: see `ActionHead`.
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
        chunk_size: int = 1,
    ):
        super().__init__(d_model, action_dim, num_readouts, chunk_size)
        if loss not in LOSSES:
            raise ConfigError(f"unknown loss {loss!r} (expected one of: {', '.join(LOSSES)})")
        self.loss_kind = loss
        self.hidden_dim = d_model if hidden_dim is None else hidden_dim
        self.action_head = nn.Sequential(
            nn.Linear(num_readouts * d_model, self.hidden_dim),  # [B,R*D] -> [B,Hd]
            nn.GELU(),
            nn.Linear(self.hidden_dim, chunk_size * action_dim),  # [B,Hd] -> [B,K*A]
        )

    def forward(self, features: Tensor) -> Tensor:
        """features [B,R,D] -> unclipped normalised action chunks [B,K,A]."""
        B, R, D = features.shape
        out = self.action_head(flatten_readouts(features))  # [B,R,D] -> [B,R*D] -> [B,K*A]
        return rearrange(out, "b (k a) -> b k a", k=self.chunk_size)  # -> [B,K,A]

    def loss(
        self, features: Tensor, target_norm: Tensor, is_pad: Tensor | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        self.check_target(target_norm, is_pad)
        pred = self(features)  # [B,K,A]
        if is_pad is None:  # the plain mean, exactly as a single-action head computed it
            mse = F.mse_loss(pred, target_norm)
            smooth = F.smooth_l1_loss(pred, target_norm) if self.loss_kind == "smooth_l1" else mse
        else:
            mse = mean_over_real_steps(F.mse_loss(pred, target_norm, reduction="none"), is_pad)
            smooth = mse
            if self.loss_kind == "smooth_l1":
                per_step = F.smooth_l1_loss(pred, target_norm, reduction="none")
                smooth = mean_over_real_steps(per_step, is_pad)
        loss = mse if self.loss_kind == "mse" else smooth
        return loss, {"mse_norm": mse.detach()}

    def predict(self, features: Tensor) -> Tensor:
        return self(features).clamp(-1.0, 1.0)
