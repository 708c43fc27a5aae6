"""State: the effector's position and velocity as one token, and the units a policy keeps.

    state  (env units) ─ (s - mean) / std ─ StateEncoder: Linear ─> one token [B,1,D]
    action (env units) ─ 2 (a - low) / (high - low) - 1 ─> [-1,1]      (training target)
    action [-1,1] ────── (a + 1) / 2 (high - low) + low ─> env units   (out of the policy)

The statistics are buffers, so a checkpoint carries the units it was trained in.
"""

from __future__ import annotations

import numpy as np
import torch
from einops import rearrange
from torch import Tensor, nn

from vla.errors import ConfigError


class StateEncoder(nn.Module):
    """Normalised state [B,S] -> one token [B,1,D].

    Args:
        state_dim: S, the length of the state vector.
        d_model: token width.
        hidden_dim: None for a single Linear; otherwise Linear -> GELU -> Linear this wide.
    """

    def __init__(self, state_dim: int, d_model: int, hidden_dim: int | None = None):
        super().__init__()
        if state_dim < 1:
            raise ConfigError(f"state_dim={state_dim} must be >= 1")
        self.state_dim = state_dim
        if hidden_dim is None:
            self.state_proj = nn.Linear(state_dim, d_model)
        else:
            self.state_proj = nn.Sequential(
                nn.Linear(state_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, d_model)
            )

    def forward(self, state: Tensor) -> Tensor:
        """state [B,S] -> token [B,1,D]."""
        B, S = state.shape
        if S != self.state_dim:
            raise ValueError(f"state has {S} dims, expected state_dim={self.state_dim}")
        return rearrange(self.state_proj(state), "b d -> b 1 d")  # [B,S] -> [B,D] -> [B,1,D]


def _as_vector(name: str, value, dim: int) -> Tensor:
    t = torch.as_tensor(np.asarray(value, dtype=np.float32)).reshape(-1)
    if t.numel() != dim:
        raise ValueError(f"{name} has {t.numel()} values, expected {dim}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name}={t.tolist()} contains NaN or inf")
    return t


class Normalizer(nn.Module):
    """State standardisation and action scaling to [-1,1].

    Starts as the identity for actions already in [-1,1] (mean 0, std 1, low -1, high 1) until
    `set_stats` is called with the training set's statistics.

    Args:
        state_dim: S.
        action_dim: A.
        eps: floor on std and on (high - low), so a constant dimension does not divide by zero.
    """

    def __init__(self, state_dim: int = 4, action_dim: int = 2, eps: float = 1e-6):
        super().__init__()
        if state_dim < 1 or action_dim < 1:
            raise ConfigError(f"state_dim={state_dim} and action_dim={action_dim} must be >= 1")
        if eps <= 0:
            raise ConfigError(f"eps={eps} must be > 0")
        self.state_dim = state_dim
        self.action_dim = action_dim
        self.eps = eps
        self.register_buffer("state_mean", torch.zeros(state_dim))
        self.register_buffer("state_std", torch.ones(state_dim))
        self.register_buffer("action_low", -torch.ones(action_dim))
        self.register_buffer("action_high", torch.ones(action_dim))

    def set_stats(self, state_mean, state_std, action_low, action_high) -> None:
        """Set the statistics (array-likes of length S, S, A, A) from the training data."""
        S, A = self.state_dim, self.action_dim
        state_std = _as_vector("state_std", state_std, S)
        low, high = (
            _as_vector("action_low", action_low, A),
            _as_vector("action_high", action_high, A),
        )
        if (state_std < 0).any():
            raise ValueError(f"state_std={state_std.tolist()} must be >= 0")
        if (high < low).any():
            raise ValueError(f"action_high={high.tolist()} is below action_low={low.tolist()}")
        self.state_mean.copy_(_as_vector("state_mean", state_mean, S))
        self.state_std.copy_(state_std)
        self.action_low.copy_(low)
        self.action_high.copy_(high)

    def normalize_state(self, state: Tensor) -> Tensor:
        """state [B,S] env units -> [B,S] standardised."""
        return (state - self.state_mean) / self.state_std.clamp(min=self.eps)

    def _action_range(self) -> Tensor:
        return (self.action_high - self.action_low).clamp(min=self.eps)  # [A]

    def normalize_action(self, action: Tensor) -> Tensor:
        """action [B,A] env units -> [B,A] in [-1,1] (for actions within [low, high])."""
        return 2 * (action - self.action_low) / self._action_range() - 1

    def unnormalize_action(self, action: Tensor) -> Tensor:
        """action [B,A] in [-1,1] -> [B,A] env units."""
        return (action + 1) / 2 * self._action_range() + self.action_low
