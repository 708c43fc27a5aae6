"""Action heads: readout features [B,R,D] -> normalised actions [B,A] in [-1,1].

    continuous      regression (MSE / smooth L1)
    discrete        per-dimension bins, cross-entropy (RT-2 / OpenVLA action tokens)
    autoregressive  the same bins, decoded one dimension after another by a causal block

All share `loss(features, target_norm) -> (loss, logs)` and `predict(features) -> [B,A]`.
"""

from __future__ import annotations

from vla.models.heads.autoregressive import AutoregressiveHead
from vla.models.heads.base import ActionHead, actions_to_bins, bins_to_actions
from vla.models.heads.continuous import ContinuousHead
from vla.models.heads.discrete import DiscreteHead

HEADS = ("continuous", "discrete", "autoregressive")


def make_head(
    kind: str,
    d_model: int,
    action_dim: int,
    num_bins: int = 256,
    num_readouts: int = 1,
    hidden_dim: int | None = None,
    n_heads: int = 4,
    mlp_ratio: float = 4,
    dropout: float = 0.0,
    attn_impl: str = "sdpa",
    loss: str = "mse",
) -> ActionHead:
    """Build the head named `kind`; arguments a kind does not use are ignored.

    Args:
        kind: "continuous" | "discrete" | "autoregressive".
        d_model, action_dim, num_readouts: see `ActionHead`.
        num_bins: bins per action dimension (discrete, autoregressive).
        hidden_dim: MLP width (continuous, discrete).
        n_heads, mlp_ratio, dropout, attn_impl: of the causal block (autoregressive).
        loss: "mse" | "smooth_l1" (continuous).
    """
    if kind == "continuous":
        return ContinuousHead(d_model, action_dim, num_readouts, hidden_dim, loss)
    if kind == "discrete":
        return DiscreteHead(d_model, action_dim, num_bins, num_readouts, hidden_dim)
    if kind == "autoregressive":
        return AutoregressiveHead(
            d_model, action_dim, num_bins, num_readouts, n_heads, mlp_ratio, dropout, attn_impl
        )
    raise ValueError(f"unknown head {kind!r} (expected one of: {', '.join(HEADS)})")


__all__ = [
    "HEADS",
    "ActionHead",
    "AutoregressiveHead",
    "ContinuousHead",
    "DiscreteHead",
    "actions_to_bins",
    "bins_to_actions",
    "make_head",
]
