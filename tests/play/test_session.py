"""The page's actions without a browser: a View per step, the pictures, the text, the pacing."""

import numpy as np
import pytest

from tests.play.conftest import SEEDS
from vla.errors import ConfigError
from vla.play import session
from vla.play.episode import Scene, play
from vla.play.pictures import GAP, PATH_COLOUR, chunk_markdown, chunk_path
from vla.play.session import Playground
from vla.vlm.figure import KEYPOINT_0


def first_scene(env_kwargs, seed=SEEDS[0], family="name"):
    return Scene(seed, env_kwargs["num_targets"], env_kwargs["shared_colours"], family)


def test_a_view_per_step_with_the_outcome_in_the_last_status(tiny):
    policy, env_kwargs = tiny
    playground = Playground(policy, env_kwargs, fps=0)
    for seed in list(SEEDS)[:4]:
        sc = first_scene(env_kwargs, seed)
        views = list(playground.run(sc, ""))
        steps = list(play(policy, env_kwargs, sc))
        assert len(views) == len(steps) and views[-1].step.t == steps[-1].t
        outcome = "**success**" if steps[-1].success else "**no success**"
        assert f"{outcome} after {steps[-1].t} steps" in views[-1].status
        assert "after" not in views[0].status
        size = env_kwargs["render_size"]
        assert all(v.picture.shape == (size, 2 * size + GAP, 3) for v in views)
        assert all(np.array_equal(v.picture[:, :size], v.step.frame) for v in views[-1:])


def test_the_attention_figure_comes_first_last_and_once_a_second(tiny, monkeypatch):
    policy, env_kwargs = tiny
    playground = Playground(policy, env_kwargs, fps=0)
    monkeypatch.setattr(session, "FIGURE_EVERY_S", 1e9)
    views = list(playground.run(first_scene(env_kwargs), ""))
    drawn = [v.figure is not None for v in views]
    assert drawn == [True] + [False] * (len(views) - 2) + [True]
    monkeypatch.setattr(session, "FIGURE_EVERY_S", 0.0)
    assert all(v.figure is not None for v in playground.run(first_scene(env_kwargs), ""))


def test_steps_are_paced_to_fps(tiny, monkeypatch):
    policy, env_kwargs = tiny
    sc = first_scene(env_kwargs)
    n = len(list(play(policy, env_kwargs, sc)))
    waits = []
    monkeypatch.setattr(session.time, "sleep", waits.append)  # no real waiting
    list(Playground(policy, env_kwargs, fps=1).run(sc, ""))
    assert len(waits) == n - 1  # after every step but the last
    assert all(0.5 < w <= 1.0 for w in waits)  # the rest of each second a step takes
    waits.clear()
    list(Playground(policy, env_kwargs, fps=0).run(sc, ""))
    assert waits == []
    with pytest.raises(ConfigError, match="play.fps=-1"):
        Playground(policy, env_kwargs, fps=-1)


def test_words_are_labelled_as_the_tokenizer_reads_them(tiny):
    policy, env_kwargs = tiny
    words = Playground(policy, env_kwargs).words("Please reach the RED circle!")
    assert [w for w, label in words if label == "unknown"] == ["please"]
    assert [w for w, _ in words if w != " "] == ["please", "reach", "the", "red", "circle"]
    long = Playground(policy, env_kwargs).words(" ".join(["the"] * (policy.tokenizer.max_len + 1)))
    assert [label for _, label in long][-1] == "dropped"


def test_chunk_path_follows_the_actions_and_stops_at_the_walls():
    path = chunk_path(np.array([0.5, 0.95]), np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]]), 0.1)
    np.testing.assert_allclose(path, [[0.5, 0.95], [0.6, 0.95], [0.6, 1.0], [0.7, 1.0]])


def test_the_step_picture_draws_the_rest_of_the_chunk(chunked):
    policy, env_kwargs = chunked
    views = list(Playground(policy, env_kwargs, fps=0).run(first_scene(env_kwargs), ""))
    cyan = [int((v.picture == PATH_COLOUR).all(-1).sum()) for v in views]
    assert all(c > 0 for c in cyan[:-1]) and cyan[-1] == 0  # nothing left to run at the end
    table = chunk_markdown(views[1].step)  # step 1: the second action of step 0's chunk
    assert table.count("\n| ") == 1 + 4  # header + K rows
    assert "| 0 | " in table and "| yes |" in table and "| now |" in table


def test_a_scene_the_env_cannot_draw_is_refused(tiny):
    policy, env_kwargs = tiny
    playground = Playground(policy, env_kwargs)
    with pytest.raises(ConfigError, match="relation"):
        playground.preview(Scene(SEEDS[0], 1, False, "relation"))
    frame, text = playground.preview(first_scene(env_kwargs))
    assert frame.shape[-1] == 3 and text


def test_a_vlm_step_shows_its_keypoints_and_a_panel_per_layer(vlm):
    policy, env_kwargs = vlm
    views = list(Playground(policy, env_kwargs, fps=0).run(first_scene(env_kwargs), ""))
    size = env_kwargs["render_size"]
    assert all(v.picture.shape == (size, 2 * size + GAP, 3) for v in views)
    last = views[-1]  # the episode's end: no chunk path left on either panel
    frame, beside = last.picture[:, :size], last.picture[:, size + GAP :]
    assert np.array_equal(frame, last.step.frame)
    assert (beside == KEYPOINT_0).all(-1).sum() > (frame == KEYPOINT_0).all(-1).sum()  # drawn
    assert views[0].figure.shape[1] == size * len(policy.blocks)  # one panel per layer
