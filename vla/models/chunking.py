"""How a policy's action chunks may be executed: one check, shared by training (before any
data is made) and evaluation (before any rollout), so both refuse the same settings."""

from __future__ import annotations

import numpy as np

from vla.errors import ConfigError
from vla.models.policy import VLAPolicy


def check_chunking(
    policy: VLAPolicy, n_action_steps: int | None, temporal_ensemble_coeff: float | None
) -> int:
    """The n_action_steps a runner executes; refuses settings that cannot mean anything."""
    K = policy.chunk_size
    if temporal_ensemble_coeff is not None:
        if K == 1:
            raise ConfigError(
                f"eval.temporal_ensemble_coeff={temporal_ensemble_coeff} blends overlapping "
                "chunks, but this policy predicts one action per query (model.chunk_size=1)"
            )
        if n_action_steps not in (None, 1):
            raise ConfigError(
                f"eval.temporal_ensemble_coeff={temporal_ensemble_coeff} queries the policy "
                f"every step, so eval.n_action_steps={n_action_steps} must be 1 or unset"
            )
        if not np.isfinite(temporal_ensemble_coeff):
            raise ConfigError(
                f"eval.temporal_ensemble_coeff={temporal_ensemble_coeff} must be a finite number"
            )
        return 1
    n = policy.n_action_steps if n_action_steps is None else n_action_steps
    if not 1 <= n <= K:
        raise ConfigError(f"eval.n_action_steps={n} must be between 1 and model.chunk_size={K}")
    return n
