import json
import logging

import pytest
from PIL import Image

from vla.errors import ConfigError
from vla.eval.evaluate import evaluate
from vla.eval.suite import Level, level_env, select_levels


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


def test_suite_runs_every_level_and_writes_tables_chart_and_gifs(tiny_ckpt, compose_cfg, tmp_path):
    cfg = eval_cfg(compose_cfg, tiny_ckpt, tmp_path / "suite", "suite=levels")
    summary = evaluate(cfg)
    names = list(cfg.suite.levels)
    assert [r["level"] for r in summary["levels"]] == names and len(names) >= 15
    saved = json.loads((tmp_path / "suite" / "suite.json").read_text())
    for row in saved["levels"]:
        low, high = row["ci95"]
        assert row["num_episodes"] == 3 and low <= row["success_rate"] <= high
        assert Image.open(row["gif"]).n_frames > 1
    trained = {r["level"]: r["trained"] for r in saved["levels"]}
    assert trained["name"] and trained["pixel_noise"]  # the tiny checkpoint knows names only
    assert not trained["relation"] and not trained["longer_chains"]
    table = (tmp_path / "suite" / "suite.md").read_text()
    assert table.count("\n") == len(names) + 2 and "family not trained" in table
    assert Image.open(tmp_path / "suite" / "suite.png").size[0] > 0
    assert Image.open(tmp_path / "suite" / "levels.png").size[1] >= 256 * 4  # 4 rows of 4
    assert list((tmp_path / "suite" / "tensorboard").glob("events.out.tfevents.*"))


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
