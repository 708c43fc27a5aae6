"""Every logger gets the same scalars; the ones that show pictures get the rollout GIFs."""

import csv
import importlib.util
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from vla.training.train import train

HAS_WANDB = importlib.util.find_spec("wandb") is not None
SCALARS = {"train/loss", "val/loss", "eval/success_rate", "final/success_rate"}


def test_several_loggers_compose_under_their_names(compose_cfg, tmp_path):
    cfg = compose_cfg("train", ["logger=[tensorboard,csv]", f"paths.output_dir={tmp_path}"])
    assert list(cfg.logger) == ["tensorboard", "csv"]
    assert cfg.logger.csv._target_ == "lightning.pytorch.loggers.CSVLogger"
    assert list(compose_cfg("train", ["logger=wandb"]).logger) == ["wandb"]
    assert compose_cfg("train", ["logger=wandb"]).logger.wandb.offline is True


@pytest.mark.slow
def test_each_installed_logger_gets_the_scalars_at_the_printed_steps(compose_cfg, fast_overrides):
    names = ["tensorboard", "csv"] + (["wandb"] if HAS_WANDB else [])
    cfg = compose_cfg(
        "train", [*fast_overrides, f"logger=[{','.join(names)}]", "trainer.val_check_interval=3"]
    )
    train(cfg)
    run = cfg.paths.output_dir
    with open(f"{run}/csv/metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert SCALARS <= set(rows[0])
    assert [r["step"] for r in rows if r["eval/success_rate"]] == ["3"]  # as the console says
    events = EventAccumulator(f"{run}/tensorboard").Reload()
    assert SCALARS <= set(events.Tags()["scalars"])
    assert [e.step for e in events.Scalars("eval/success_rate")] == [3]
    assert [e.step for e in events.Images("rollout/episode_0")] == [3]
    if HAS_WANDB:
        (offline,) = list((Path(run) / "wandb").glob("offline-*"))
        media = offline / "files" / "media"
        assert list((media / "videos" / "rollout").glob("*.gif"))
        assert list((media / "images" / "attention").glob("*.png"))
