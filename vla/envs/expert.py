"""The scripted expert: a proportional controller that reads the env's privileged state.

It knows where the named target is, which the policy never does: the policy must learn that
from the image and the instruction. With `noise_std > 0` the *executed* action is perturbed
(DART-style) while the recorded label stays the clean expert action, so demonstrations show
how to recover from states the clean expert would never visit.
"""

from __future__ import annotations

import numpy as np

from vla.envs.reach import ReachEnv
from vla.errors import ConfigError


def expert_action(env: ReachEnv, gain: float = 1.0) -> np.ndarray:
    """The clean expert action for the env's current state: float32 [2] in [-1,1]."""
    delta = env.target_position - env.effector_position
    # an action of 1 moves max_step, so delta / max_step lands on the target when it is in reach
    return np.clip(gain * delta / env.max_step, -1.0, 1.0).astype(np.float32)


class ScriptedExpert:
    """Expert with optional execution noise.

    Args:
        noise_std: std of the Gaussian noise added to the executed action (0 disables it).
        gain: proportional gain of the controller.
    """

    def __init__(self, noise_std: float = 0.0, gain: float = 1.0):
        if noise_std < 0:
            raise ConfigError(f"noise_std={noise_std} must be >= 0")
        if gain <= 0:
            raise ConfigError(f"gain={gain} must be > 0")
        self.noise_std = noise_std
        self.gain = gain

    def act(self, env: ReachEnv, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Returns (executed action, label action), both float32 [2]."""
        label = expert_action(env, self.gain)
        if self.noise_std == 0:
            return label, label
        noise = rng.normal(0.0, self.noise_std, size=label.shape)
        return np.clip(label + noise, -1.0, 1.0).astype(np.float32), label
