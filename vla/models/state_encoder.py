"""Proprioception as one token: the effector's (normalised) position and velocity."""

from __future__ import annotations

from einops import rearrange
from torch import Tensor, nn

from vla.errors import ConfigError


class StateEncoder(nn.Module):
    """State [B,S] -> one token [B,1,D].

    Args:
        state_dim: S, the length of the state vector.
        d_model: token width.
        hidden_dim: None for a single Linear; otherwise Linear -> GELU -> Linear with this width.
    """

    def __init__(self, state_dim: int, d_model: int, hidden_dim: int | None = None):
        super().__init__()
        if state_dim < 1:
            raise ConfigError(f"state_dim={state_dim} must be >= 1")
        self.state_dim = state_dim
        self.d_model = d_model
        self.hidden_dim = hidden_dim
        if hidden_dim is None:
            self.state_proj = nn.Linear(state_dim, d_model)
        else:
            self.state_proj = nn.Sequential(
                nn.Linear(state_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, d_model)
            )

    def forward(self, state: Tensor) -> Tensor:
        """state [B,S] (already normalised) -> token [B,1,D]."""
        B, S = state.shape
        if S != self.state_dim:
            raise ValueError(f"state has {S} dims, expected state_dim={self.state_dim}")
        x = self.state_proj(state)  # [B,S] -> [B,D]
        return rearrange(x, "b d -> b 1 d")  # [B,D] -> [B,1,D]
