"""render_mode="human": Gymnasium's checker passes, every reset and step shows the frame that
rgb_array would return, paced to render_fps, and render() itself returns None."""

import sys
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import DependencyNotInstalled
from gymnasium.utils.env_checker import check_env

import vla  # noqa: F401  (registers the env)
from vla.envs import ENV_ID
from vla.envs.reach import ReachEnv


@pytest.fixture
def off_screen(monkeypatch):
    """pygame, drawing into memory (no screen here)."""
    pytest.importorskip("pygame", reason='render_mode="human" needs pygame (the play extra)')
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")


def test_human_mode_passes_gymnasium_checker_without_warnings(off_screen):
    env = gym.make(ENV_ID, render_mode="human")
    assert env.unwrapped.metadata["render_modes"] == ["human", "rgb_array"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)  # also makes and renders every declared mode through the spec
    assert [str(w.message) for w in caught] == []
    env.close()
    env.close()  # closing twice is allowed


def test_every_reset_and_step_shows_the_rgb_array_frame(off_screen):
    human = ReachEnv(render_mode="human", render_size=64)
    watched = ReachEnv(render_mode="rgb_array", render_size=64)
    human.reset(seed=3)
    watched.reset(seed=3)
    assert human._window.frames_shown == 1
    assert np.array_equal(human._window.pixels(), watched.render())
    actions = np.random.default_rng(0).uniform(-1, 1, (4, 2)).astype(np.float32)
    for a in actions:
        human.step(a)
        watched.step(a)
        assert np.array_equal(human._window.pixels(), watched.render())
    assert human._window.frames_shown == 1 + len(actions)
    assert human.render() is None  # shown, not returned: one more frame
    assert human._window.frames_shown == 2 + len(actions)
    human.close()
    assert human._window.pixels() is None


def test_frames_are_paced_to_render_fps(off_screen):
    env = ReachEnv(render_mode="human", render_size=32)
    fps = env.metadata["render_fps"]
    env.reset(seed=0)
    started = time.perf_counter()
    for _ in range(5):
        env.step(np.zeros(2, np.float32))
    elapsed = time.perf_counter() - started
    env.close()
    assert elapsed >= 5 / fps * 0.9  # pygame's clock waits out each 1/fps (10 fps: 0.5 s)


def test_without_pygame_human_mode_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pygame", None)  # `import pygame` now fails
    env = ReachEnv(render_mode="human")
    with pytest.raises(DependencyNotInstalled, match="pip install pygame"):
        env.reset(seed=0)
    rgb = ReachEnv(render_mode="rgb_array", render_size=32)  # other modes need no pygame
    rgb.reset(seed=0)
    assert rgb.render().shape == (32, 32, 3)
