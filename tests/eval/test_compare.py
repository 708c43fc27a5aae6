"""Two checkpoints on the same episodes: the paired counts and McNemar's p on known outcomes,
and `scripts/eval.py ckpt_path=A compare_to=B` end to end on two untrained checkpoints."""

import json

import numpy as np
import pytest

from vla.checkpoint import load_policy
from vla.errors import ConfigError
from vla.eval.compare import check_same_env, compare_rollouts, markdown
from vla.eval.evaluate import evaluate
from vla.eval.rollout import Rollouts, rollout
from vla.eval.stats import wilson_interval


def rollouts(success, relations) -> Rollouts:
    n = len(success)
    return Rollouts(
        seeds=np.arange(n),
        success=np.asarray(success, dtype=bool),
        steps=np.full(n, 5),
        queries=np.full(n, 5),
        target_pair=np.zeros(n, dtype=np.int64),
        families=np.array(["relation" if r else "name" for r in relations]),
        relations=np.array(relations, dtype=object),
        instructions=[f"episode {i}" for i in range(n)],
    )


def test_discordant_episodes_and_mcnemar_on_known_outcomes():
    # 20 episodes: 10 both solve, 1 only A solves, 8 only B solves, 1 neither
    a = [True] * 10 + [True] + [False] * 8 + [False]
    b = [True] * 10 + [False] + [True] * 8 + [False]
    relations = ["nearest"] * 10 + ["nearest"] + ["leftmost"] * 8 + [None]
    row = compare_rollouts("relation", rollouts(a, relations), rollouts(b, relations))
    assert (row["only_a"], row["only_b"], row["num_episodes"]) == (1, 8, 20)
    assert row["p_value"] == pytest.approx(0.0390625)  # 2 * (1 + 9) / 2**9
    assert row["a"]["success_rate"] == 0.55 and row["b"]["success_rate"] == 0.9
    assert row["b"]["ci95"] == list(wilson_interval(18, 20))
    nearest, leftmost = row["by_relation"]["nearest"], row["by_relation"]["leftmost"]
    assert (nearest["only_a"], nearest["only_b"], nearest["p_value"]) == (1, 0, 1.0)
    assert (leftmost["only_a"], leftmost["only_b"]) == (0, 8)
    assert leftmost["p_value"] == pytest.approx(2 / 2**8)
    assert row["episodes"][10] == dict(seed=10, a=True, b=False, relation="nearest")
    table = markdown(dict(a="A.ckpt", b="B.ckpt", levels=[row]))
    assert (
        "| relation | 55.0% [34.2, 74.2] of 20 | 90.0% [69.9, 97.2] of 20 | 1 | 8 | 0.0391 |"
        in table
    )
    assert (
        "| relation: leftmost | 0.0% [0.0, 32.4] of 8 | 100.0% [67.6, 100.0] of 8 | 0 | 8 |"
        in table
    )
    other = rollouts(a, relations)
    other.seeds = other.seeds + 1
    with pytest.raises(ValueError, match="not of the same episodes"):
        compare_rollouts("relation", rollouts(a, relations), other)


def test_checkpoints_trained_in_different_envs_are_refused_naming_the_values():
    env = {"num_targets": 3, "families": ["name"], "relation_words": None, "render_size": 256}
    check_same_env(env, {"num_targets": 3, "families": ["name"], "render_size": 128})
    with pytest.raises(ConfigError, match=r"env.num_targets: 3 vs 4"):
        check_same_env(env, {**env, "num_targets": 4})


def compare_cfg(compose_cfg, a, b, out, *overrides):
    return compose_cfg(
        "eval",
        [
            f"ckpt_path={a}",
            f"compare_to={b}",
            "eval.num_episodes=6",
            "eval.num_envs=3",
            "env.max_episode_steps=4",  # the chunked checkpoint was trained with 10
            "env.success_radius=0.3",  # untrained policies reach some: outcomes that differ
            f"paths.output_dir={out}",
            *overrides,
        ],
    )


def test_compare_to_runs_both_checkpoints_on_the_same_episodes(
    tiny_ckpt, chunked_ckpt, compose_cfg, tmp_path
):
    cfg = compare_cfg(
        compose_cfg, tiny_ckpt, chunked_ckpt, tmp_path, "suite=levels", "suite.only=[name,relation]"
    )
    summary = evaluate(cfg)
    saved = json.loads((tmp_path / "compare.json").read_text())
    assert saved == json.loads(json.dumps(summary)) and saved["b"] == str(chunked_ckpt)
    assert [r["level"] for r in saved["levels"]] == ["name", "relation"]
    for row, families in zip(saved["levels"], (["name"], ["relation"]), strict=True):
        env = {**load_policy(tiny_ckpt)[1], "families": families, "max_episode_steps": 4}
        env["success_radius"] = 0.3
        for key, ckpt in (("a", tiny_ckpt), ("b", chunked_ckpt)):  # each alone, same seeds
            alone = rollout(load_policy(ckpt)[0], env, 6, cfg.eval.seed, num_envs=3)
            assert [e[key] for e in row["episodes"]] == alone.success.tolist()
        a = np.array([e["a"] for e in row["episodes"]])
        b = np.array([e["b"] for e in row["episodes"]])
        assert (row["only_a"], row["only_b"]) == (int(np.sum(a & ~b)), int(np.sum(~a & b)))
        assert row["a"]["success_rate"] == a.mean() and row["b"]["success_rate"] == b.mean()
    assert any(r["only_a"] + r["only_b"] for r in saved["levels"])  # they do disagree
    assert set(saved["levels"][1]["by_relation"]) == {
        e["relation"] for e in saved["levels"][1]["episodes"]
    }
    table = (tmp_path / "compare.md").read_text()
    assert table.count("\n| name | ") == 1 and "| level: relation word |" in table


def test_a_checkpoint_compared_with_itself_agrees_on_every_episode(
    tiny_ckpt, compose_cfg, tmp_path
):
    (row,) = evaluate(compare_cfg(compose_cfg, tiny_ckpt, tiny_ckpt, tmp_path))["levels"]
    assert row["level"] == "env" and row["a"] == row["b"] and row["a"]["success_rate"] > 0
    assert (row["only_a"], row["only_b"], row["p_value"]) == (0, 0, 1.0)


def test_compare_to_refuses_a_checkpoint_of_another_env(
    tiny_ckpt, chunked_ckpt, compose_cfg, tmp_path
):
    cfg = compare_cfg(compose_cfg, tiny_ckpt, chunked_ckpt, tmp_path)
    cfg.env.max_episode_steps = None  # as trained: 50 and 10
    with pytest.raises(ConfigError, match="env.max_episode_steps: 50 vs 10"):
        evaluate(cfg)
