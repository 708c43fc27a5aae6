"""Training reads a LeRobotDataset export exactly as it reads the demonstrations it came from."""

import json

import pytest
import torch

from tests.lerobot.conftest import ENV
from vla.data.datamodule import ReachDataModule
from vla.errors import ConfigError, DatasetError
from vla.keys import ACTION, EPISODE, IMAGE, STATE, TOKENS
from vla.models.language import Tokenizer

pytest.importorskip("pyarrow")
pytest.importorskip("pandas")

from vla.lerobot.datamodule import LeRobotDataModule  # noqa: E402

COMMON = dict(env=ENV, batch_size=4, val_episodes=2, tokenize=Tokenizer().encode)


def test_same_tensors_as_the_native_set(exported, demos):
    native = ReachDataModule(**COMMON, num_episodes=6, seed=3, dir=demos.path.parent)
    native.demos = demos
    native.setup()
    imported = LeRobotDataModule(path=str(exported), **COMMON)
    imported.prepare_data()
    imported.setup()
    for key in (IMAGE, STATE, ACTION, TOKENS, EPISODE):
        assert torch.equal(imported.tensors[key], native.tensors[key]), key
    assert torch.equal(imported.train_indices, native.train_indices)
    assert torch.equal(imported.val_indices, native.val_indices)
    for key, value in native.statistics().items():
        assert torch.equal(imported.statistics()[key], value), key


def test_refusals(exported, tmp_path, caplog):
    with pytest.raises(DatasetError, match=r"data.image_key='observation.images.top'.*it has"):
        LeRobotDataModule(path=str(exported), image_key="observation.images.top", **COMMON).setup()
    with pytest.raises(DatasetError, match="is not a LeRobotDataset"):
        LeRobotDataModule(path=str(tmp_path), **COMMON).setup()
    with pytest.raises(ConfigError, match="needs data.path"):
        LeRobotDataModule(**COMMON)
    with pytest.raises(ConfigError, match="no shape positions"):
        LeRobotDataModule(path=str(exported), target=True, **COMMON)
    with pytest.raises(ConfigError, match="val_episodes=6 must be < the dataset's 6"):
        LeRobotDataModule(path=str(exported), **{**COMMON, "val_episodes": 6}).setup()
    old = tmp_path / "old"
    (old / "meta").mkdir(parents=True)
    info = json.loads((exported / "meta/info.json").read_text())
    (old / "meta/info.json").write_text(json.dumps({**info, "codebase_version": "v2.1"}))
    with pytest.raises(DatasetError, match="codebase_version='v2.1'"):
        LeRobotDataModule(path=str(old), **COMMON).setup()


def test_unknown_task_words_are_named_once(exported, caplog):
    dm = LeRobotDataModule(path=str(exported), **COMMON)
    with caplog.at_level("WARNING"):
        dm.warn_unknown_words(["pick up the red cube", "go to the red cube"])
    lines = [r.getMessage() for r in caplog.records if "vocabulary" in r.getMessage()]
    assert lines == ["task words outside the vocabulary read as <unk>: cube pick up"]


@pytest.mark.slow
def test_trains_on_an_export(exported, compose_cfg, fast_overrides, tmp_path):
    from vla.training.train import train

    cfg = compose_cfg(
        "train",
        [
            *fast_overrides,
            "data=lerobot",
            f"data.path={exported}",
            "data.val_episodes=2",
            "bc.target_keypoint_weight=0",
            "~logger",
        ],
    )
    metrics = train(cfg)
    # four training episodes of a few steps make one batch of 32: a step, then rollouts
    assert metrics["global_step"] >= 1 and metrics["num_episodes"] == 8
    assert 0 <= metrics["success_rate"] <= 1
    assert (tmp_path / "run/checkpoints/last.ckpt").is_file()
