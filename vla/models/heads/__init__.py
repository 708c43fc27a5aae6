"""Action heads: readout features [B,R,D] -> normalised action chunks [B,K,A] in [-1,1].

    continuous      regression (MSE / smooth L1), K*A outputs
    discrete        per-step, per-dimension bins, cross-entropy (RT-2 / OpenVLA action tokens)
    autoregressive  the same bins, decoded token after token (time-major) by a causal block
    flow            flow matching over the chunk (pi0 / SmolVLA), sampled from noise

All share `loss(features, target_norm, is_pad)` for training and `predict(features)` for
queries; K = `chunk_size` (1: one action per observation). A config chooses one with
`model/head=<name>` (conf/model/head/<name>.yaml targets the class with every argument).
Besides the package's axis legend, shape comments and einops patterns here use k for the
steps of a chunk.
"""

from __future__ import annotations

from vla.models.heads.autoregressive import AutoregressiveHead
from vla.models.heads.base import ActionHead
from vla.models.heads.continuous import ContinuousHead
from vla.models.heads.discrete import DiscreteHead
from vla.models.heads.flow import FlowHead

__all__ = [
    "ActionHead",
    "AutoregressiveHead",
    "ContinuousHead",
    "DiscreteHead",
    "FlowHead",
]
