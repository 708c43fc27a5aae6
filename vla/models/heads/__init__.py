"""Action heads: readout features [B,R,D] -> normalised action chunks [B,K,A] in [-1,1].

    continuous      regression (MSE / smooth L1), K*A outputs
    discrete        per-step, per-dimension bins, cross-entropy (RT-2 / OpenVLA action tokens)
    autoregressive  the same bins, decoded token after token (time-major) by a causal block
    flow            flow matching over the chunk (pi0 / SmolVLA), sampled from noise

All share `loss_and_prediction(features, target_norm, is_pad)` and `predict(features)`;
K = `chunk_size` (1: one action per observation). Besides the package's axis legend, shape
comments and einops patterns here use k for the steps of a chunk.
"""

from __future__ import annotations

from vla.errors import ConfigError
from vla.models.heads.autoregressive import AutoregressiveHead
from vla.models.heads.base import ActionHead
from vla.models.heads.continuous import ContinuousHead
from vla.models.heads.discrete import DiscreteHead
from vla.models.heads.flow import FlowHead

HEADS = ("continuous", "discrete", "autoregressive", "flow")


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
    chunk_size: int = 1,
    flow_steps: int = 10,
) -> ActionHead:
    """Build the head named `kind`; arguments a kind does not use are ignored.

    Args:
        kind: "continuous" | "discrete" | "autoregressive" | "flow".
        d_model, action_dim, num_readouts, chunk_size: see `ActionHead`.
        num_bins: bins per action dimension (discrete, autoregressive).
        hidden_dim: MLP width (continuous, discrete, flow's denoiser).
        n_heads, mlp_ratio, dropout, attn_impl: of the causal block (autoregressive).
        loss: "mse" | "smooth_l1" (continuous).
        flow_steps: Euler steps from noise to actions (flow).
    """
    if kind == "continuous":
        return ContinuousHead(d_model, action_dim, num_readouts, hidden_dim, loss, chunk_size)
    if kind == "discrete":
        return DiscreteHead(d_model, action_dim, num_bins, num_readouts, hidden_dim, chunk_size)
    if kind == "autoregressive":
        return AutoregressiveHead(
            d_model,
            action_dim,
            num_bins,
            num_readouts,
            n_heads,
            mlp_ratio,
            dropout,
            attn_impl,
            chunk_size=chunk_size,
        )
    if kind == "flow":
        return FlowHead(d_model, action_dim, num_readouts, chunk_size, flow_steps, hidden_dim)
    raise ConfigError(f"unknown head {kind!r} (expected one of: {', '.join(HEADS)})")


__all__ = [
    "HEADS",
    "ActionHead",
    "AutoregressiveHead",
    "ContinuousHead",
    "DiscreteHead",
    "FlowHead",
    "make_head",
]
