"""Training on a LeRobotDataset of another task: its sizes, no env, validation-loss selection."""

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from vla.checkpoint import load_policy, read_checkpoint
from vla.data.dataset import Demos
from vla.errors import CheckpointError, ConfigError
from vla.training.offline import without_rollouts

pytest.importorskip("pyarrow")
pytest.importorskip("pandas")

from vla.lerobot.export import MARKER, export_lerobot  # noqa: E402

TASKS = ["open the drawer", "stack the blue cube on the red one", "wipe the table"]
SKIP_LINE = "final evaluation skipped"


def other_task(root: Path, episodes: int = 12, state_dim: int = 6, action_dim: int = 3) -> Path:
    """A LeRobotDataset written as another robot's would be: 40x56 frames, a 6-d state, a
    3-d action, its own task strings, and no trace of this project's task."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(20, 30, episodes)
    n = int(lengths.sum())
    demos = Demos(
        path=root / "recorded",
        meta={},
        image=rng.integers(0, 256, (n, 40, 56, 3), dtype=np.uint8),
        state=rng.normal(size=(n, state_dim)).astype(np.float32),
        action=rng.uniform(-3, 3, (n, action_dim)).astype(np.float32),
        episode=np.repeat(np.arange(episodes), lengths).astype(np.int32),
        episode_start=np.concatenate([[0], np.cumsum(lengths)[:-1]]),
        target_pair=np.zeros(n, np.int32),
        target_position=np.zeros((n, 2), np.float32),
        object_centres=np.zeros((n, 1, 2), np.float32),
        object_pairs=np.zeros((n, 1), np.int32),
        instructions=[TASKS[e % len(TASKS)] for e in range(episodes)],
    )
    out = export_lerobot(demos, root / "other", fps=30, robot_type="arm6", progress=False)
    (out / MARKER).unlink()  # not written from our task
    return out


@pytest.fixture(scope="module")
def other(tmp_path_factory):
    return other_task(tmp_path_factory.mktemp("other"))


def overrides(path, fast_overrides) -> list[str]:
    return [
        *fast_overrides,
        "data=lerobot",
        f"data.path={path}",
        "data.val_episodes=2",
        "bc.target_keypoint_weight=0",
    ]


def test_trains_without_an_env(other, compose_cfg, fast_overrides, tmp_path, caplog):
    from vla.training.train import train

    cfg = compose_cfg("train", overrides(other, fast_overrides))
    with caplog.at_level(logging.INFO):
        metrics = train(cfg)
    lines = [r.getMessage() for r in caplog.records]
    assert sum(SKIP_LINE in line for line in lines) == 1
    assert not any(line.startswith("rollouts at step") for line in lines)
    run = tmp_path / "run"
    saved = json.loads((run / "metrics.json").read_text())
    assert saved["evaluated"] is False and "success_rate" not in saved
    assert saved["val_loss"] == metrics["val_loss"]
    assert saved["global_step"] == 5 and np.isfinite(saved["val_loss"])
    assert saved["best_val_loss"] == pytest.approx(saved["val_loss"])  # one validation
    assert saved["stopped"].startswith("training stopped at step 5")
    (best,) = (run / "checkpoints").glob("best-*.ckpt")
    assert saved["best_checkpoint"] == str(best) and "val_loss" in best.name
    # the policy takes the dataset's sizes, and its checkpoint rebuilds it so
    ckpt = read_checkpoint(run / "checkpoints" / "last.ckpt")
    config = ckpt["vla"]["policy_config"]
    assert (config["state_dim"], config["action_dim"]) == (6, 3)
    assert ckpt["global_step"] == 5
    with pytest.raises(CheckpointError, match="no env to roll out in"):
        load_policy(run / "checkpoints" / "last.ckpt")  # what eval.py and visualize.py read
    events = EventAccumulator(str(run / "tensorboard")).Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "val/loss", "final/val_loss"} <= tags
    assert not any(t.startswith("eval/") for t in tags)
    losses = [e.value for e in events.Scalars("train/loss")]
    assert all(torch.isfinite(torch.tensor(losses)))

    # resume: from the saved step, with the same sizes
    resumed = compose_cfg(
        "train",
        [
            *overrides(other, fast_overrides),
            f"ckpt_path={run / 'checkpoints/last.ckpt'}",
            f"paths.output_dir={tmp_path}/resumed",
            "trainer.max_epochs=2",
        ],
    )
    assert train(resumed)["global_step"] == 10


def test_rollouts_follow_the_dataset(other, exported, compose_cfg, fast_overrides):
    from vla.lerobot.datamodule import LeRobotDataModule

    cfg = compose_cfg("train", overrides(other, fast_overrides))
    LeRobotDataModule.configure(cfg)
    assert (cfg.data.rollouts, cfg.model.state_dim, cfg.model.action_dim) == (False, 6, 3)
    cfg = compose_cfg("train", overrides(exported, fast_overrides))
    LeRobotDataModule.configure(cfg)  # an export of this task: its env rolls out
    assert (cfg.data.rollouts, cfg.model.state_dim, cfg.model.action_dim) == (True, 4, 2)
    forced = compose_cfg("train", [*overrides(other, fast_overrides), "data.rollouts=true"])
    with pytest.raises(ConfigError, match=r"do not fit the env's state \[4\] and action \[2\]"):
        LeRobotDataModule.configure(forced)
    held_out = [
        o.replace("val_episodes=2", "val_episodes=0") for o in overrides(other, fast_overrides)
    ]
    unheld = compose_cfg("train", held_out)
    with pytest.raises(ConfigError, match="data.val_episodes=0: without an env"):
        without_rollouts(unheld)
