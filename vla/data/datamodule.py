"""Demonstrations for behavior cloning: prepared once, split by episode, batched per rank.

A demonstration set is small (tens of thousands of 48 px frames, a few hundred MB), so it is
loaded once into tensors and batches are cut from them by index (`vla.data.batches`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import lightning as L
import numpy as np
import torch

from vla.data.batches import TensorBatches
from vla.data.dataset import Demos, check_labels, dataset_path, load_demos
from vla.data.prepare import ensure_demos
from vla.envs.config import env_kwargs_of
from vla.errors import ConfigError
from vla.keys import ACTION, EPISODE, IMAGE, OBJECT_PAIRS, OBJECTS, STATE, TARGET, TOKENS

log = logging.getLogger(__name__)


class ReachDataModule(L.LightningDataModule):
    """Demonstrations for behavior cloning, split into train/val by episode.

    Args:
        env: the env config (kwargs of ReachEnv); it decides the dataset, with the rest below.
        dir: root folder of cached datasets.
        num_episodes, seed, noise_std, collect_workers: how to collect when missing.
        batch_size: training batch size (per process).
        val_episodes: episodes held out for validation (the last ones).
        shift: random-shift augmentation in pixels for training batches.
        tokenize: turns instruction strings into token ids [E,L]; the policy's tokenizer.
        shuffle_seed: seeds the batch order and augmentation (the run's seed).
        chunk_size: actions per training target (the policy's `chunk_size`, given by train).
        target: batches carry TARGET, where the shape to reach now is (privileged): on only
            while a training-only loss uses it (`BCModule.uses_target`).
        objects: batches carry OBJECTS and OBJECT_PAIRS, where every shape is and what it is
            (privileged), likewise (`BCModule.uses_objects`).
        prepare_per_node: collect missing demonstrations once per node (a node-local `dir`)
            instead of once in all (a `dir` every node shares). Either way one process
            collects and the others wait, then load what it wrote.
    """

    def __init__(
        self,
        env: dict,
        dir: str = "data",
        num_episodes: int = 3000,
        seed: int = 0,
        noise_std: float = 0.3,
        collect_workers: int = 1,
        batch_size: int = 32,
        val_episodes: int = 100,
        shift: int = 0,
        tokenize: Callable[[list[str]], torch.Tensor] | None = None,
        shuffle_seed: int = 0,
        chunk_size: int = 1,
        target: bool = False,
        objects: bool = False,
        prepare_per_node: bool = False,
    ):
        super().__init__()
        for name, value, low in [
            ("batch_size", batch_size, 1),
            ("num_episodes", num_episodes, 1),
            ("val_episodes", val_episodes, 0),
            ("shift", shift, 0),
            ("chunk_size", chunk_size, 1),
        ]:
            if value < low:
                raise ConfigError(f"data.{name}={value} must be >= {low}")
        if val_episodes >= num_episodes:
            raise ConfigError(
                f"data.val_episodes={val_episodes} must be < data.num_episodes={num_episodes}"
            )
        self.env_kwargs = env_kwargs_of(env)
        self.dir = dir
        self.num_episodes, self.seed, self.noise_std = num_episodes, seed, noise_std
        self.collect_workers = collect_workers
        self.batch_size, self.val_episodes, self.shift = batch_size, val_episodes, shift
        self.tokenize = tokenize
        self.shuffle_seed = shuffle_seed
        self.chunk_size = chunk_size
        self.target, self.objects = target, objects
        self.prepare_data_per_node = prepare_per_node  # Lightning's switch, see prepare_data
        self.demos: Demos | None = None
        self.prepare_seconds = 0.0  # how long prepare_data took in this process
        self.tensors: dict[str, torch.Tensor] | None = None

    @classmethod
    def configure(cls, cfg) -> None:
        """Sets the values of the run's config that the data decides, before anything is
        built from it. Our own demonstrations decide none; see LeRobotDataModule."""

    def prepare_data(self) -> None:
        """Builds the demonstrations if they are missing (or loads them), once.

        Under DDP, torchrun or SLURM, Lightning calls this on one process (global rank 0, or
        local rank 0 of each node with `prepare_per_node`) while the others wait at a barrier;
        `setup` then loads the finished set on every process.
        """
        if self.demos is not None:
            return
        start = time.perf_counter()
        self.demos = ensure_demos(
            self.env_kwargs,
            self.dir,
            self.num_episodes,
            self.seed,
            self.noise_std,
            self.collect_workers,
        )
        self.prepare_seconds = time.perf_counter() - start
        log.info(
            f"demonstrations: {self.num_episodes} episodes (seed {self.seed}, noise "
            f"{self.noise_std}, {self.val_episodes} for validation) in {self.demos.path}"
        )

    def setup(self, stage: str | None = None) -> None:
        """Loads the demonstrations into tensors and splits them; they must exist by now."""
        if self.tensors is not None:
            return
        if self.tokenize is None:
            raise ValueError("ReachDataModule needs `tokenize` (the policy's tokenizer)")
        if self.demos is None:  # a process that did not run prepare_data (DDP ranks > 0)
            self.demos = load_demos(
                dataset_path(
                    self.dir, self.env_kwargs, self.num_episodes, self.seed, self.noise_std
                )
            )
        d = self.demos
        check_labels(d)
        self.tensors = {
            IMAGE: torch.from_numpy(np.array(d.image)),
            STATE: torch.from_numpy(np.array(d.state)),
            ACTION: torch.from_numpy(np.array(d.action)),
            TOKENS: self.tokenize(d.instructions),
            EPISODE: torch.from_numpy(np.array(d.episode, dtype=np.int64)),
        }
        if self.target:  # per step, for the auxiliary loss: where the shape to reach now is
            self.tensors[TARGET] = torch.from_numpy(np.array(d.target_position))  # [N,2]
        if self.objects:  # per step, for the object losses: every shape's centre [N,M,2], pair
            self.tensors[OBJECTS] = torch.from_numpy(np.array(d.object_centres))
            self.tensors[OBJECT_PAIRS] = torch.from_numpy(d.object_pairs.astype(np.int64))
        first_val_step = (
            int(d.episode_start[d.num_episodes - self.val_episodes])
            if (self.val_episodes)
            else d.num_steps
        )
        self.train_indices = torch.arange(first_val_step)
        self.val_indices = torch.arange(first_val_step, d.num_steps)

    def statistics(self) -> dict[str, torch.Tensor]:
        """Normalisation statistics from the training split (never the validation split)."""
        if self.tensors is None:
            raise RuntimeError("ReachDataModule.statistics() needs setup() to have run first")
        state = self.tensors[STATE][self.train_indices]
        action = self.tensors[ACTION][self.train_indices]
        return dict(
            state_mean=state.mean(0),
            state_std=state.std(0),
            action_low=action.min(0).values,
            action_high=action.max(0).values,
        )

    def _rank(self) -> tuple[int, int]:
        t = self.trainer
        return (t.global_rank, t.world_size) if t is not None else (0, 1)

    def train_dataloader(self) -> TensorBatches:
        rank, world = self._rank()
        epoch_fn = (lambda: self.trainer.current_epoch) if self.trainer is not None else None
        return TensorBatches(
            self.tensors,
            self.train_indices,
            self.batch_size,
            shuffle=True,
            shift=self.shift,
            drop_last=True,
            seed=self.shuffle_seed,
            rank=rank,
            world_size=world,
            epoch_fn=epoch_fn,
            chunk_size=self.chunk_size,
        )

    def val_dataloader(self) -> TensorBatches:
        rank, world = self._rank()
        return TensorBatches(
            self.tensors,
            self.val_indices,
            256,
            shuffle=False,
            rank=rank,
            world_size=world,
            chunk_size=self.chunk_size,
        )
