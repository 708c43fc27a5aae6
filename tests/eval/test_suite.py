import json
import logging

import pytest
from PIL import Image

from vla.checkpoint import load_policy
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.eval.evaluate import evaluate
from vla.eval.stats import format_summary, rate_summary, wilson_interval
from vla.eval.suite import Level, level_env, markdown, select_levels


def eval_cfg(compose_cfg, ckpt, out, *overrides):
    return compose_cfg(
        "eval",
        [
            f"ckpt_path={ckpt}",
            "eval.num_episodes=3",
            "eval.num_envs=3",
            "env.max_episode_steps=4",  # untrained policies fail: keep their episodes short
            f"paths.output_dir={out}",
            *overrides,
        ],
    )


def test_suite_writes_tables_chart_and_gifs_with_rates_its_episodes_give(
    tiny_ckpt, compose_cfg, tmp_path
):
    only = ["name", "relation", "longer_chains", "pixel_noise"]
    cfg = eval_cfg(
        compose_cfg, tiny_ckpt, tmp_path / "suite", "suite=levels", f"suite.only=[{','.join(only)}]"
    )
    summary = evaluate(cfg)
    assert [r["level"] for r in summary["levels"]] == only
    saved = json.loads((tmp_path / "suite" / "suite.json").read_text())
    for row in saved["levels"]:
        successes = sum(e["success"] for e in row["episodes"])
        assert [e["seed"] for e in row["episodes"]] == [cfg.eval.seed + i for i in range(3)]
        assert row["num_episodes"] == 3 and row["success_rate"] == successes / 3
        assert row["ci95"] == list(wilson_interval(successes, 3))
        assert Image.open(row["gif"]).n_frames > 1
    relation = saved["levels"][1]
    words = [e["relation"] for e in relation["episodes"]]
    assert None not in words and set(relation["success_by_relation"]) == set(words)
    for word, m in relation["success_by_relation"].items():
        mine = [e for e in relation["episodes"] if e["relation"] == word]
        assert m["num_episodes"] == len(mine)
        assert m["ci95"] == list(wilson_interval(sum(e["success"] for e in mine), len(mine)))
    assert saved["levels"][0]["success_by_relation"] == {}  # name episodes have no relation
    trained = {r["level"]: r["trained"] for r in saved["levels"]}
    assert trained["name"] and trained["pixel_noise"]  # the tiny checkpoint knows names only
    assert not trained["relation"] and not trained["longer_chains"]
    table = (tmp_path / "suite" / "suite.md").read_text()
    levels, words_table = table.split("\n\n")
    assert levels.count("\n") == len(only) + 1 and "family not trained" in levels
    assert words_table.startswith("| level | relation word |")
    assert words_table.count("| relation | ") == len(set(words))
    assert Image.open(tmp_path / "suite" / "suite.png").size[0] > 0
    width, height = Image.open(tmp_path / "suite" / "levels.png").size
    assert width == 4 * 256 and 256 < height < 2 * 256  # one row of 4 scenes
    assert list((tmp_path / "suite" / "tensorboard").glob("events.out.tfevents.*"))


def test_every_configured_level_builds_an_env_from_a_trained_one(tiny_ckpt, compose_cfg):
    cfg = compose_cfg("eval", [f"ckpt_path={tiny_ckpt}", "suite=levels"])
    levels = select_levels(cfg.suite.levels, None)
    assert len(levels) == 17
    _, trained = load_policy(tiny_ckpt)
    for level in levels:
        env = ReachEnv(**level_env(trained, level))
        _, info = env.reset(seed=0)
        assert info["family"] in level.env.get("families", trained["families"])
        assert env.split.name == level.env.get("split", "train")


def test_suite_markdown_lists_each_relation_word_with_its_interval():
    nearest = rate_summary(5, 10)
    row = dict(
        level="relation",
        kind="in-distribution",
        changes={"families": ["relation"]},
        success_rate=0.5,
        ci95=nearest["ci95"],
        num_episodes=10,
        mean_steps=20.0,
        success_by_relation={"nearest": nearest},
    )
    table = markdown([row])
    assert (
        "| relation | in-distribution | families=['relation'] | 50.0% | 23.7-76.3% | 10 |" in table
    )
    assert table.endswith("| relation | nearest | 50.0% | 23.7-76.3% | 10 |\n")


def test_suite_only_runs_the_levels_named_and_refuses_unknown_ones(
    tiny_ckpt, compose_cfg, tmp_path
):
    levels = {"a": {"kind": "x", "env": {}}, "b": {"kind": "y", "env": {"num_targets": 4}}}
    assert [lv.name for lv in select_levels(levels, ["b"])] == ["b"]
    with pytest.raises(ConfigError, match=r"unknown levels \['c'\]: known are \['a', 'b'\]"):
        select_levels(levels, ["b", "c"])
    cfg = eval_cfg(
        compose_cfg, tiny_ckpt, tmp_path, "suite=levels", "suite.only=[novel_pairs,pixel_noise]"
    )
    assert [r["level"] for r in evaluate(cfg)["levels"]] == ["novel_pairs", "pixel_noise"]


def test_a_level_keeps_the_checkpoints_held_out_sets_and_changes_only_its_values():
    trained = {"families": ["name"], "split": "train", "held_out_pairs": [1], "num_targets": 3}
    env = level_env(trained, Level("x", "novel combination", {"split": "novel_pairs"}))
    assert env == {**trained, "split": "novel_pairs"}


def test_a_typed_instruction_is_rolled_out_and_its_unknown_words_named(
    tiny_ckpt, compose_cfg, tmp_path, caplog
):
    typed = "approach the leftmost circle"
    cfg = eval_cfg(compose_cfg, tiny_ckpt, tmp_path / "a", f"eval.instruction='{typed}'")
    with caplog.at_level(logging.INFO):
        metrics = evaluate(cfg)
    assert "vocabulary, read as <unk>: ['approach']" in caplog.text
    assert metrics["instruction"] == typed and metrics["success_rate"] is not None
    assert set(metrics["success_by_family"]) == {"relation"}
    nonsense = eval_cfg(compose_cfg, tiny_ckpt, tmp_path / "b", "eval.instruction='dance now'")
    caplog.clear()
    with caplog.at_level(logging.INFO):
        metrics = evaluate(nonsense)
    assert "not in the task's grammar" in caplog.text and metrics["success_rate"] is None


def test_relation_words_asks_one_word_and_metrics_break_success_down_by_it(
    tiny_ckpt, compose_cfg, tmp_path, caplog
):
    cfg = eval_cfg(
        compose_cfg,
        tiny_ckpt,
        tmp_path,
        "eval.num_episodes=6",
        "env.families=[relation,name]",
        "env.relation_words=[nearest]",
        "env.success_radius=0.3",  # an untrained policy reaches some: rates that are not all 0
    )
    with caplog.at_level(logging.INFO):
        metrics = evaluate(cfg)
    saved = json.loads((tmp_path / "metrics.json").read_text())
    relations = [e["relation"] for e in saved["episodes"] if e["family"] == "relation"]
    assert relations and set(relations) == {"nearest"}
    assert all(e["relation"] is None for e in saved["episodes"] if e["family"] == "name")
    (word,) = saved["success_by_relation"]
    nearest = saved["success_by_relation"]["nearest"]
    wins = sum(e["success"] for e in saved["episodes"] if e["relation"] == "nearest")
    assert word == "nearest" and nearest == rate_summary(wins, len(relations))
    assert metrics["success_by_relation"] == saved["success_by_relation"]
    assert f"relation nearest  {format_summary(nearest)}" in caplog.text
