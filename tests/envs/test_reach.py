import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import vla  # noqa: F401  (registers the env)
from vla.envs import ENV_ID
from vla.envs.grammar import COLOURS, PAIRS, SHAPES, VERBS, vocabulary
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError


def test_registered_and_passes_gymnasium_checker():
    env = gym.make(ENV_ID)
    check_env(env.unwrapped, skip_render_check=False)
    assert isinstance(env.unwrapped, ReachEnv)


def test_grammar_has_enough_colours_shapes_and_phrasings():
    assert len(COLOURS) >= 4 and len(SHAPES) >= 3 and len(VERBS) >= 3
    assert len(PAIRS) == len(COLOURS) * len(SHAPES)
    assert {"reach", "red", "circle", "triangle"} <= set(vocabulary())


def test_same_seed_same_episode_different_seed_different():
    a, b = ReachEnv(), ReachEnv()
    oa, ia = a.reset(seed=7)
    ob, ib = b.reset(seed=7)
    assert np.array_equal(oa["image"], ob["image"]) and oa["instruction"] == ob["instruction"]
    for _ in range(5):
        act = np.array([0.3, -0.7], np.float32)
        sa, sb = a.step(act), b.step(act)
        assert np.array_equal(sa[0]["image"], sb[0]["image"])
        assert np.array_equal(sa[0]["state"], sb[0]["state"]) and sa[1] == sb[1]
    oc, _ = b.reset(seed=8)
    assert not np.array_equal(oa["image"], oc["image"])


def test_observation_contents():
    env = ReachEnv(image_size=32)
    obs, info = env.reset(seed=0)
    assert obs["image"].shape == (32, 32, 3) and obs["image"].dtype == np.uint8
    assert obs["state"].shape == (4,) and obs["state"].dtype == np.float32
    np.testing.assert_allclose(obs["state"][:2], env.effector_position)
    np.testing.assert_array_equal(obs["state"][2:], 0.0)  # no velocity before the first step
    colour, shape = PAIRS[info["target_pair"]]
    assert colour in obs["instruction"] and shape in obs["instruction"]
    # every target's colour is in the image
    for p in env._pairs:
        colour_rgb = np.array(COLOURS[PAIRS[p][0]], np.uint8)
        assert np.all(obs["image"] == colour_rgb, axis=-1).sum() > 0
    obs, *_ = env.step(np.array([1.0, 0.0], np.float32))
    np.testing.assert_allclose(obs["state"][2:], [1.0, 0.0], atol=1e-5)  # velocity in max_step


def test_state_never_contains_target_positions():
    env = ReachEnv(num_targets=4)
    for seed in range(50):
        obs, _ = env.reset(seed=seed)
        for centre in env._centres:
            assert not np.any(np.isclose(obs["state"][:, None], centre[None], atol=1e-6))


def test_instruction_names_exactly_one_target():
    env = ReachEnv(num_targets=3, shared_colours=True)
    for seed in range(300):
        obs, info = env.reset(seed=seed)
        words = obs["instruction"].split()
        named = [p for p in env._pairs if PAIRS[p][0] in words and PAIRS[p][1] in words]
        assert named == [env._pairs[info["target_index"]]]


def test_distinct_colours_by_default_and_shared_when_asked():
    default, shared = ReachEnv(num_targets=4), ReachEnv(num_targets=4, shared_colours=True)
    saw_shared = False
    for seed in range(100):
        default.reset(seed=seed)
        colours = [PAIRS[p][0] for p in default._pairs]
        assert len(set(colours)) == 4
        shared.reset(seed=seed)
        saw_shared |= len({PAIRS[p][0] for p in shared._pairs}) < 4
        assert len(set(shared._pairs)) == 4  # pairs stay distinct
    assert saw_shared


def test_targets_are_separated():
    env = ReachEnv(num_targets=4, min_separation=0.2)
    for seed in range(100):
        env.reset(seed=seed)
        d = np.linalg.norm(env._centres[:, None] - env._centres[None], axis=-1)
        assert d[np.triu_indices(4, 1)].min() >= 0.2


def test_success_terminates_with_bonus_and_truncation_at_limit():
    env = ReachEnv(max_episode_steps=5)
    env.reset(seed=3)
    env._pos = env.target_position + np.array([0.03, 0], np.float32)
    env._distance = env._target_distance()
    _, reward, terminated, truncated, info = env.step(np.array([-0.5, 0], np.float32))
    assert terminated and not truncated and info["is_success"] and reward > 1.0
    env.reset(seed=3)
    for _ in range(5):
        _, _, terminated, truncated, info = env.step(np.zeros(2, np.float32))
    assert truncated and not terminated and not info["is_success"]


def test_actions_are_clipped_and_positions_stay_in_arena():
    env = ReachEnv()
    env.reset(seed=0)
    before = env.effector_position.copy()
    obs, *_ = env.step(np.array([5.0, -5.0], np.float32))
    np.testing.assert_allclose(obs["state"][:2] - before, [0.06, -0.06], atol=1e-6)
    for _ in range(30):
        obs, *_ = env.step(np.array([1.0, 1.0], np.float32))
    assert np.all(obs["state"][:2] <= 1.0) and np.all(obs["state"][:2] >= 0.0)


@pytest.mark.parametrize("bad", [[np.nan, 0.0], [0.0, np.inf]])
def test_non_finite_action_is_refused(bad):
    env = ReachEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="finite"):
        env.step(np.array(bad, np.float32))


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"num_targets": 5}, "num_targets=5"),
        ({"num_targets": 13, "shared_colours": True}, "num_targets=13"),
        ({"num_targets": 0}, "num_targets=0"),
        ({"image_size": 4}, "image_size=4"),
        ({"success_radius": 0.0}, "success_radius=0.0"),
        ({"success_radius": -1.0}, "success_radius=-1.0"),
        ({"max_step": 0}, "max_step=0"),
    ],
)
def test_invalid_config_names_field_and_value(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        ReachEnv(**kwargs)


def test_render_gives_a_larger_frame():
    env = ReachEnv(render_mode="rgb_array", render_size=128)
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (128, 128, 3) and frame.dtype == np.uint8
    assert ReachEnv().render() is None
