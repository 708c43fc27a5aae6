"""The reach task with lerobot's observation keys and attributes (no lerobot needed)."""

import gymnasium as gym
import numpy as np

from vla.envs.expert import expert_action
from vla.envs.reach import ReachEnv
from vla.lerobot.env import ENV_ID, LeRobotReachEnv

ENV = dict(num_targets=3, image_size=32)


def test_keys_and_attributes():
    env = LeRobotReachEnv(**ENV)
    obs, info = env.reset(seed=7)
    assert set(obs) == {"pixels", "agent_pos"}
    assert obs["pixels"].dtype == np.uint8 and obs["pixels"].shape == (32, 32, 3)
    assert obs["agent_pos"].dtype == np.float32 and obs["agent_pos"].shape == (4,)
    assert env.observation_space.contains(obs)
    reference, _ = ReachEnv(**ENV).reset(seed=7)
    np.testing.assert_array_equal(obs["pixels"], reference["image"])
    np.testing.assert_array_equal(obs["agent_pos"], reference["state"])
    assert env.task == env.task_description == reference["instruction"]
    assert "is_success" in info and info["is_success"] is False
    assert env._max_episode_steps == 50
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.shape == (256, 256, 3)
    env.reset(seed=8)
    assert env.task == ReachEnv(**ENV).reset(seed=8)[0]["instruction"] != reference["instruction"]
    chains = LeRobotReachEnv(**ENV, families=["sequence"], chain_length=3)
    assert chains._max_episode_steps == 150


def test_expert_episode_succeeds():
    env = gym.make(ENV_ID, **ENV)
    obs, info = env.reset(seed=11)
    reach = env.unwrapped
    steps = 0
    for _ in range(env.get_wrapper_attr("_max_episode_steps")):
        obs, reward, terminated, truncated, info = env.step(expert_action(reach))
        steps += 1
        assert set(obs) == {"pixels", "agent_pos"}
        if terminated or truncated:
            break
    assert terminated and not truncated and info["is_success"] is True
    assert steps > 1
    np.testing.assert_allclose(obs["agent_pos"][:2], reach.effector_position)
