import numpy as np
import pytest
import torch

from vla.checkpoint import load_policy
from vla.data.seeds import TEST_SEED_START
from vla.envs import render
from vla.envs.grammar import PAIRS
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.eval.rollout import NEUTRAL_INSTRUCTION, Rollouts, ablate_inputs, rollout


@pytest.fixture
def policy_env(tiny_ckpt):
    return load_policy(tiny_ckpt)


def test_rollout_counts_every_episode_with_its_seed(policy_env):
    policy, env = policy_env
    result = rollout(policy, env, num_episodes=7, seed=TEST_SEED_START, num_envs=3, record=2)
    m = result.metrics()
    assert m["num_episodes"] == 7 and m["success_rate"] == result.success.sum() / 7
    assert m["mean_steps"] == result.steps.sum() / 7
    assert list(result.seeds) == list(range(TEST_SEED_START, TEST_SEED_START + 7))
    max_steps = env["max_episode_steps"]
    assert np.all((result.steps >= 1) & (result.steps <= max_steps))
    # an episode that stopped early reached its target; one that failed ran to the end
    assert np.all(result.success[result.steps < max_steps])
    assert np.all(result.steps[~result.success] == max_steps)
    for i, seed in enumerate(result.seeds):  # the instruction of each episode is its seed's
        obs, info = ReachEnv(**env).reset(seed=int(seed))
        assert result.instructions[i] == obs["instruction"]
        assert result.target_pair[i] == info["target_pair"] and result.families[i] == "name"
    assert len(result.frames) == 2 and result.frames[0][0].shape == (256, 256, 3)
    assert len(result.frames[0]) == result.steps[0] + 1  # reset frame + one per step
    assert set(m["success_by_colour"]) <= {c for c, _ in PAIRS}
    for colour, rate in m["success_by_colour"].items():
        named = np.array([PAIRS[p][0] == colour for p in result.target_pair])
        assert rate["success_rate"] == result.success[named].mean()
        assert rate["num_episodes"] == named.sum()


def test_ablation_really_replaces_the_input(policy_env):
    policy, env = policy_env
    obs, _ = ReachEnv(**env).reset(seed=TEST_SEED_START)
    image = torch.from_numpy(np.stack([obs["image"]] * 2))
    state = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.9, 0.8, 0.7, 0.6]])
    tokens = policy.tokenizer.encode(["go to the red circle", "reach the blue square"])
    img, st, tok = ablate_inputs(policy, image, state, tokens, ["image", "language", "state"])
    assert (img == torch.tensor(render.BACKGROUND, dtype=torch.uint8)).all()
    assert torch.equal(st, policy.normalizer.state_mean.expand(2, -1))
    assert torch.equal(tok, policy.tokenizer.encode([NEUTRAL_INSTRUCTION] * 2))
    untouched = ablate_inputs(policy, image, state, tokens, ["state"])
    assert torch.equal(untouched[0], image) and torch.equal(untouched[2], tokens)


def test_rollout_feeds_the_ablated_inputs_to_the_policy(policy_env, monkeypatch):
    policy, env = policy_env
    seen = []
    original = policy.predict_chunk_tensors
    monkeypatch.setattr(
        policy,
        "predict_chunk_tensors",
        lambda i, s, t: seen.append((i.clone(), t.clone())) or original(i, s, t),
    )
    rollout(policy, env, 2, TEST_SEED_START, num_envs=2, ablate=["image", "language"])
    assert seen and all(len(torch.unique(i)) <= 3 for i, _ in seen)  # background only
    assert all((t == t[:1]).all() for _, t in seen)  # one neutral instruction for everyone


def test_unknown_ablation_is_refused(policy_env):
    policy, env = policy_env
    with pytest.raises(ConfigError, match="unknown entries"):
        rollout(policy, env, 1, TEST_SEED_START, ablate=["smell"])


def test_success_by_relation_word_counts_relation_episodes_only():
    # 10 "nearest" episodes (5 succeed), 10 "leftmost" (all succeed), 5 name episodes
    relations = ["nearest"] * 10 + ["leftmost"] * 10 + [None] * 5
    success = np.array([True] * 5 + [False] * 5 + [True] * 10 + [False] * 5)
    result = Rollouts(
        seeds=np.arange(25),
        success=success,
        steps=np.full(25, 10),
        queries=np.full(25, 10),
        target_pair=np.zeros(25, dtype=np.int64),
        families=np.array(["relation"] * 20 + ["name"] * 5),
        relations=np.array(relations, dtype=object),
        instructions=[""] * 25,
    )
    by = result.metrics()["success_by_relation"]
    assert set(by) == {"nearest", "leftmost"}
    nearest, leftmost = by["nearest"], by["leftmost"]
    assert (nearest["success_rate"], nearest["num_episodes"]) == (0.5, 10)
    # Wilson intervals at 95%, as published tables give them: 5 of 10, 10 of 10
    assert nearest["ci95"] == pytest.approx([0.2366, 0.7634], abs=5e-5)
    assert leftmost["ci95"] == pytest.approx([0.7225, 1.0], abs=5e-5)
    records = result.episodes()
    assert records[0] == dict(seed=0, success=True, steps=10, family="relation", relation="nearest")
    assert records[-1]["relation"] is None and records[-1]["family"] == "name"


def test_rollout_records_each_episodes_relation_word(policy_env):
    policy, env = policy_env
    env = {**env, "families": ["relation", "name"], "max_episode_steps": 3}
    result = rollout(policy, env, num_episodes=8, seed=TEST_SEED_START, num_envs=4)
    for record in result.episodes():
        _, info = ReachEnv(**env).reset(seed=record["seed"])
        assert record["relation"] == info["relation"] and record["family"] == info["family"]
    assert {r["family"] for r in result.episodes()} == {"relation", "name"}
    by = result.metrics()["success_by_relation"]
    assert sum(m["num_episodes"] for m in by.values()) == sum(result.families == "relation")
