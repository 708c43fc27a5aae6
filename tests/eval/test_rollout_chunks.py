"""Rollouts, evaluation and pictures of a policy that predicts action chunks."""

import numpy as np
import pytest
from PIL import Image

from vla.checkpoint import load_policy, read_checkpoint
from vla.data.seeds import TEST_SEED_START
from vla.errors import ConfigError
from vla.eval.attention import TITLE_H
from vla.eval.evaluate import evaluate
from vla.eval.rollout import rollout
from vla.eval.visualize import visualize
from vla.models.heads import FlowHead


def test_checkpoint_round_trips_the_chunk_settings(chunked_ckpt):
    config = read_checkpoint(chunked_ckpt)["vla"]["policy_config"]
    head = config["head"]
    assert (head["_target_"], config["chunk_size"], head["flow_steps"]) == (
        "vla.models.heads.flow.FlowHead",
        4,
        10,
    )
    policy, _ = load_policy(chunked_ckpt)
    assert isinstance(policy.head, FlowHead)
    assert (policy.chunk_size, policy.n_action_steps, policy.head.flow_steps) == (4, 2, 10)


def test_rollout_queries_once_per_n_action_steps(chunked_ckpt):
    policy, env = load_policy(chunked_ckpt)
    env["max_episode_steps"] = 9  # odd: an episode that runs out ends in the middle of a chunk
    result = rollout(policy, env, num_episodes=5, seed=TEST_SEED_START, num_envs=3, record=1)
    assert (result.steps % 2 == 1).any()  # some episodes ended mid-chunk, in a vector env ...
    # ... and every episode made one query per 2 actions, its last one maybe used in part
    np.testing.assert_array_equal(result.queries, np.ceil(result.steps / 2))
    assert result.metrics()["mean_queries"] == pytest.approx(result.queries.mean())
    assert len(result.frames[0]) == result.steps[0] + 1  # frames still recorded every step
    again = rollout(policy, env, num_episodes=5, seed=TEST_SEED_START, num_envs=3)
    np.testing.assert_array_equal(again.steps, result.steps)  # seeded flow noise: reproducible
    every = rollout(policy, env, 3, TEST_SEED_START, num_envs=3, n_action_steps=1)
    np.testing.assert_array_equal(every.queries, every.steps)
    blended = rollout(policy, env, 3, TEST_SEED_START, num_envs=3, temporal_ensemble_coeff=0.1)
    np.testing.assert_array_equal(blended.queries, blended.steps)


def test_rollout_refuses_chunk_settings_that_mean_nothing(chunked_ckpt, tiny_ckpt):
    chunked, env = load_policy(chunked_ckpt)
    single, _ = load_policy(tiny_ckpt)
    with pytest.raises(ConfigError, match=r"model.chunk_size=1\)"):
        rollout(single, env, 1, TEST_SEED_START, temporal_ensemble_coeff=0.1)
    with pytest.raises(ConfigError, match="eval.n_action_steps=2 must be 1 or unset"):
        rollout(chunked, env, 1, TEST_SEED_START, n_action_steps=2, temporal_ensemble_coeff=0.1)
    with pytest.raises(ConfigError, match="eval.n_action_steps=5 must be between 1 and model.chunk_size=4"):  # fmt: skip
        rollout(chunked, env, 1, TEST_SEED_START, n_action_steps=5)


def test_eval_with_temporal_ensembling(chunked_ckpt, compose_cfg, tmp_path):
    cfg = compose_cfg(
        "eval",
        [
            f"ckpt_path={chunked_ckpt}",
            "eval.num_episodes=4",
            "eval.num_envs=4",
            "eval.record=0",
            "eval.temporal_ensemble_coeff=0.01",
            "+env.max_episode_steps=6",
            f"paths.output_dir={tmp_path}",
        ],
    )
    metrics = evaluate(cfg)
    assert metrics["mean_queries"] == metrics["mean_steps"]  # one query per step
    assert (metrics["chunk_size"], metrics["n_action_steps"]) == (4, 1)
    assert metrics["temporal_ensemble_coeff"] == 0.01


def test_attention_pictures_show_the_query_behind_the_action(chunked_ckpt, compose_cfg, tmp_path):
    """Step 1 executes the second action of step 0's chunk: its picture is step 0's query
    (same frame, same attention); only the caption says which step it is."""
    cfg = compose_cfg(
        "visualize",
        [
            f"ckpt_path={chunked_ckpt}",
            "viz.num_episodes=1",
            "viz.steps=[0,1,2]",
            f"paths.output_dir={tmp_path}",
        ],
    )
    pictures = [np.asarray(Image.open(p)).astype(int) for p in visualize(cfg)]
    assert len(pictures) == 3  # a tiny policy needs more than 3 steps at 2 actions per query
    title = TITLE_H  # rows of the caption
    assert np.array_equal(pictures[1][title:], pictures[0][title:])
    assert not np.array_equal(pictures[1][:title], pictures[0][:title])
    assert not np.array_equal(pictures[2][title:], pictures[0][title:])  # a new query at step 2
