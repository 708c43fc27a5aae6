"""Actions as words: each action dimension cut into bins, each bin a token (OpenVLA).

    action [B,K,A] env units -> clip to [low, high] -> bin = floor((x - low) / width) [B,K,A]
        -> token = action_start + bin -> flattened step by step: [B, K*A] (x0 y0 x1 y1 ...)

The bins span the 1st to 99th percentile of the training actions per dimension (OpenVLA's
choice: a few extreme actions do not stretch every bin), `num_bins` equal bins between them;
a bin decodes to its centre. Values outside the span decode to the outermost centres.
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import Tensor, nn

from vla.errors import ConfigError


class ActionBins(nn.Module):
    """Per-dimension uniform bins between stored percentiles; no parameters, only buffers.

    Args:
        action_dim: A.
        num_bins: bins per dimension (tokens <act_0> .. <act_{num_bins-1}>).
    """

    def __init__(self, action_dim: int, num_bins: int):
        super().__init__()
        if num_bins < 2 or action_dim < 1:
            raise ConfigError(f"num_bins={num_bins} (>= 2), action_dim={action_dim} (>= 1)")
        self.action_dim, self.num_bins = action_dim, num_bins
        self.register_buffer("low", -torch.ones(action_dim))
        self.register_buffer("high", torch.ones(action_dim))

    def fit(self, actions: Tensor, quantile: float = 0.01) -> None:
        """Sets the span from training actions [N,A]: their `quantile` and 1 - `quantile`."""
        actions = actions.float().reshape(-1, self.action_dim)  # [N,A]
        low = torch.quantile(actions, quantile, dim=0)  # [A]
        high = torch.quantile(actions, 1 - quantile, dim=0)  # [A]
        self.low.copy_(low)
        self.high.copy_(torch.maximum(high, low + 1e-3))  # a constant dimension still has bins

    @property
    def width(self) -> Tensor:
        return (self.high - self.low) / self.num_bins  # [A]

    def to_bins(self, action: Tensor) -> Tensor:
        """Env-unit actions [..., A] -> bins int64 [..., A] in [0, num_bins)."""
        b = torch.floor((action - self.low) / self.width).long()
        return b.clamp(0, self.num_bins - 1)

    def from_bins(self, bins: Tensor) -> Tensor:
        """Bins [..., A] -> their centres in env units [..., A]."""
        return self.low + (bins.float() + 0.5) * self.width

    def to_tokens(self, action: Tensor, action_start: int) -> Tensor:
        """Chunks [B,K,A] -> token ids [B,K*A], dimension by dimension, step by step."""
        return rearrange(self.to_bins(action) + action_start, "b k a -> b (k a)")

    def from_tokens(self, tokens: Tensor, action_start: int) -> Tensor:
        """Token ids [B,K*A] -> chunks [B,K,A] in env units (ids outside the bins clamp)."""
        bins = (tokens - action_start).clamp(0, self.num_bins - 1)
        return self.from_bins(rearrange(bins, "b (k a) -> b k a", a=self.action_dim))
