import numpy as np
import pytest

from vla.envs.expert import ScriptedExpert, expert_action
from vla.envs.reach import ReachEnv


def run_expert(env, seed, noise_std):
    expert = ScriptedExpert(noise_std=noise_std)
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    while True:
        executed, _ = expert.act(env, rng)
        obs, _, terminated, truncated, info = env.step(executed)
        if terminated or truncated:
            return info


@pytest.mark.parametrize(
    "env_kwargs",
    [
        {},
        {"families": ["attribute"]},
        {"families": ["relation"]},
        {"families": ["sequence"]},
        {"families": ["sequence"], "chain_length": 3},
    ],
)
def test_expert_succeeds_on_almost_every_episode_with_noise(env_kwargs):
    env = ReachEnv(**env_kwargs)
    results = [run_expert(env, seed, noise_std=0.3)["is_success"] for seed in range(400)]
    assert np.mean(results) >= 0.99


def test_expert_reaches_the_named_target_not_another():
    env = ReachEnv(num_targets=4, shared_colours=True)
    for seed in range(200):
        info = run_expert(env, seed, noise_std=0.0)
        assert info["is_success"]
        distances = np.linalg.norm(env._centres - env.effector_position, axis=-1)
        assert int(np.argmin(distances)) == info["target_index"]


def test_labels_are_clean_while_execution_is_noisy():
    env = ReachEnv()
    env.reset(seed=0)
    env._pos = env.target_position + np.array([0.02, -0.01], np.float32)  # a label inside (-1, 1)
    executed, label = ScriptedExpert(noise_std=0.3).act(env, np.random.default_rng(0))
    np.testing.assert_array_equal(label, expert_action(env))
    assert not np.allclose(executed, label)
    assert np.all(np.abs(label) <= 1.0) and np.all(np.abs(executed) <= 1.0)
