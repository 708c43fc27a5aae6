"""Our reach task as lerobot-eval expects an env: `vla/LeRobotReach-v0`.

    ReachEnv obs {image, state, instruction}  ->  {pixels [H,W,3] uint8, agent_pos [4]}
    the instruction                            ->  env.task, env.task_description
    info["is_success"], _max_episode_steps, render() (rgb_array frames for its videos)

lerobot maps `pixels` to `observation.image` and `agent_pos` to `observation.state`, the
names an export (`vla.lerobot.export`) uses, so a policy trained on an export runs here.
Nothing here imports lerobot.
"""

from __future__ import annotations

import gymnasium as gym
from gymnasium import spaces

from vla.envs.reach import ReachEnv
from vla.keys import IMAGE, INSTRUCTION, STATE

ENV_ID = "vla/LeRobotReach-v0"
PIXELS = "pixels"
AGENT_POS = "agent_pos"


class LeRobotReachEnv(gym.Wrapper):
    """ReachEnv with lerobot's observation keys and attributes.

    Args:
        **env_kwargs: ReachEnv's arguments (render_mode defaults to "rgb_array").
    """

    metadata = ReachEnv.metadata

    def __init__(self, **env_kwargs):
        env_kwargs.setdefault("render_mode", "rgb_array")
        super().__init__(ReachEnv(**env_kwargs))
        inner = self.env.observation_space
        self.observation_space = spaces.Dict({PIXELS: inner[IMAGE], AGENT_POS: inner[STATE]})
        chain = self.env.split.chain_length if "sequence" in self.env.families else 1
        # the longest an episode can run: max_episode_steps per shape to reach
        self._max_episode_steps = self.env.max_episode_steps * chain
        self.task = self.task_description = ""

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.task = self.task_description = obs[INSTRUCTION]
        return self._convert(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._convert(obs), reward, terminated, truncated, info

    def render(self):
        return self.env.render()

    @staticmethod
    def _convert(obs: dict) -> dict:
        return {PIXELS: obs[IMAGE], AGENT_POS: obs[STATE]}


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="vla.lerobot.env:LeRobotReachEnv")
