"""Behavior cloning from a LeRobotDataset folder: `data=lerobot data.path=<folder>`.

The folder is read into the same arrays as our own demonstrations (`vla.data.dataset.Demos`)
and from there everything is ReachDataModule's: the split by episode (the last
`val_episodes` for validation), the statistics, the batches. Each episode's task is its
instruction; words outside the tokenizer's vocabulary read as `<unk>` (one warning line
names them). Images are resized to the env's `image_size`.

A LeRobotDataset has none of our privileged arrays (where the shapes are), so the
training-only losses that need them are refused. Before the policy is built, `configure`
sets its state and action sizes from the dataset's info.json, and decides whether there is
an env to roll out in (`data.rollouts`): an export of our task (it holds
`meta/vla_export.json`) has ours; any other dataset has none (`vla.training.offline`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from PIL import Image

from vla.data.datamodule import ReachDataModule
from vla.data.dataset import Demos
from vla.envs.grammar import split_words
from vla.envs.reach import ACTION_DIM, STATE_DIM
from vla.errors import ConfigError, DatasetError
from vla.lerobot.layout import ACTION_KEY, EXPORT_MARKER, IMAGE_KEY, STATE_KEY
from vla.lerobot.reader import read_info, read_lerobot
from vla.models.language import UNK_ID

log = logging.getLogger(__name__)


class LeRobotDataModule(ReachDataModule):
    """ReachDataModule over a LeRobotDataset v3.0 folder.

    Args:
        path: the dataset folder.
        image_key, state_key, action_key: its features to read (lerobot's names by default).
        rollouts: whether the policy can be rolled out in the config's env; null: only if
            the folder is an export of our task (`configure` sets it).
        **kwargs: ReachDataModule's (batch_size, val_episodes, shift, ...); the collection
            arguments (num_episodes, seed, noise_std, ...) are unused.
    """

    def __init__(
        self,
        path: str | None = None,
        image_key: str = IMAGE_KEY,
        state_key: str = STATE_KEY,
        action_key: str = ACTION_KEY,
        rollouts: bool | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if path is None:
            raise ConfigError("data=lerobot needs data.path=<a LeRobotDataset folder>")
        if self.target or self.objects:
            raise ConfigError(
                "data=lerobot has no shape positions: the training-only losses that need them "
                "(bc.*_weight > 0) must be off"
            )
        self.path = Path(path)
        self.keys = dict(image=image_key, state=state_key, action=action_key)
        self.rollouts = rollouts

    @classmethod
    def configure(cls, cfg) -> None:
        """The policy's state and action sizes (`model.state_dim`, `model.action_dim`) from
        the dataset's info.json, and `data.rollouts` if unset."""
        data = cfg.data
        if data.get("path") is None:
            raise ConfigError("data=lerobot needs data.path=<a LeRobotDataset folder>")
        path = Path(data.path)
        if not path.is_dir():
            raise DatasetError(f"{path} does not exist or is not a folder")
        keys = dict(image=data.image_key, state=data.state_key, action=data.action_key)
        dims = vector_sizes(path, read_info(path)["features"], keys)
        cfg.model.state_dim, cfg.model.action_dim = dims["state"], dims["action"]
        ours = (path / EXPORT_MARKER).is_file()
        if data.rollouts is None:
            data.rollouts = ours
        if data.rollouts:
            how = "rollouts in the config's env"
        else:
            how = "no env to roll out in" + ("" if ours else " (not an export of this task)")
        sizes = f"{keys['state']} [{dims['state']}], {keys['action']} [{dims['action']}]"
        if data.rollouts and (dims["state"], dims["action"]) != (STATE_DIM, ACTION_DIM):
            raise ConfigError(
                f"data.rollouts=true, but {path}'s {sizes} do not fit the env's state "
                f"[{STATE_DIM}] and action [{ACTION_DIM}]"
            )
        log.info(f"LeRobotDataset {path}: {sizes}; {how}")

    def prepare_data(self) -> None:
        if self.demos is None:
            self.demos = self.load()

    def setup(self, stage: str | None = None) -> None:
        if self.demos is None:
            self.demos = self.load()
        if self.val_episodes >= self.demos.num_episodes:
            raise ConfigError(
                f"data.val_episodes={self.val_episodes} must be < the dataset's "
                f"{self.demos.num_episodes} episodes"
            )
        super().setup(stage)

    def load(self) -> Demos:
        """The dataset as Demos (privileged arrays zero: nothing may read them)."""
        data = read_lerobot(self.path)
        vector_sizes(self.path, data.info["features"], self.keys)
        if data.num_frames == 0:
            raise DatasetError(f"{self.path} holds no frames")
        image = self.resized(data.frames[self.keys["image"]])
        episode = data.frames["episode_index"].astype(np.int32)
        starts = np.flatnonzero(np.diff(episode, prepend=-1)).astype(np.int64)
        instructions = [data.tasks[i] for i in data.frames["task_index"][starts]]
        self.warn_unknown_words(instructions)
        n = data.num_frames
        log.info(f"LeRobotDataset {self.path}: {len(starts)} episodes, {n} frames")
        return Demos(
            path=self.path,
            meta=dict(num_episodes=len(starts), num_steps=n, lerobot=data.info),
            image=image,
            state=data.frames[self.keys["state"]].astype(np.float32),
            action=data.frames[self.keys["action"]].astype(np.float32),
            episode=episode,
            episode_start=starts,
            target_pair=np.zeros(n, np.int32),
            target_position=np.zeros((n, 2), np.float32),
            object_centres=np.zeros((n, 1, 2), np.float32),
            object_pairs=np.zeros((n, 1), np.int32),
            instructions=instructions,
        )

    def resized(self, frames: np.ndarray) -> np.ndarray:
        """Frames [N,H,W,3] at the env's image size."""
        size = self.env_kwargs["image_size"]
        if frames.shape[1:3] == (size, size):
            return frames
        return np.stack(
            [np.asarray(Image.fromarray(f).resize((size, size), Image.BILINEAR)) for f in frames]
        )

    def warn_unknown_words(self, instructions: list[str]) -> None:
        if self.tokenize is None:
            return
        unknown = set()
        for text in set(instructions):
            ids = self.tokenize(text)[0].tolist()
            unknown |= {w for w, i in zip(split_words(text), ids, strict=False) if i == UNK_ID}
        if unknown:
            unknown = sorted(unknown)
            log.warning(f"task words outside the vocabulary read as <unk>: {' '.join(unknown)}")


def vector_sizes(path: Path, features: dict, keys: dict[str, str]) -> dict[str, int]:
    """The sizes of the state and action features, checking that every key in `keys` (by
    role: image, state, action) names a feature and the state and action are float vectors."""
    for role, key in keys.items():
        if key not in features:
            raise DatasetError(
                f"{path} has no feature data.{role}_key={key!r}; it has {list(features)}"
            )
    sizes = {}
    for role in ("state", "action"):
        ft = features[keys[role]]
        if ft["dtype"] not in ("float32", "float64") or len(ft["shape"]) != 1:
            raise DatasetError(
                f"{path}: {keys[role]} is {ft['dtype']} {ft['shape']}, expected a float vector"
            )
        sizes[role] = int(ft["shape"][0])
    return sizes
