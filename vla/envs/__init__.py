"""The reach task and its scripted expert. Importing this registers `vla/Reach-v0`."""

import gymnasium as gym

from vla.envs.reach import ReachEnv

ENV_ID = "vla/Reach-v0"

if ENV_ID not in gym.registry:
    # truncation is the env's own (max_episode_steps), so no TimeLimit wrapper is added here
    gym.register(id=ENV_ID, entry_point="vla.envs.reach:ReachEnv")

__all__ = ["ENV_ID", "ReachEnv"]
