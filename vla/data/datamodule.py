"""Batches for behavior cloning, straight from tensors in memory.

A demonstration set is small (tens of thousands of 64 px frames, a few hundred MB), so it is
loaded once into tensors and batches are cut from them by index: no per-sample Python work,
no worker processes, and the training loop never waits on a DataLoader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import lightning as L
import numpy as np
import torch
from einops import rearrange

from vla.data.chunks import chunk_indices
from vla.data.dataset import Demos, check_labels, dataset_path, load_demos
from vla.data.prepare import ensure_demos
from vla.envs.config import env_kwargs_of
from vla.errors import ConfigError
from vla.keys import ACTION, ACTION_IS_PAD, IMAGE, STATE, TARGET, TOKENS


class TensorBatches:
    """An iterable of dict batches over `indices` of in-memory tensors.

    Args:
        tensors: IMAGE uint8 [N,H,W,3], STATE [N,S], ACTION [N,A], TOKENS [E,L] (one row per
            episode), "episode" [N] (the episode of each step, to look up its tokens) and,
            optionally, TARGET [N,2] (where the named target is; batches carry it if present).
        indices: the steps this iterable covers.
        shuffle: reshuffle every epoch (seeded, so runs are reproducible).
        shift: random-shift augmentation in pixels (0 disables); edges are replicated.
        rank, world_size: each rank takes an equal, disjoint share of every global batch
            (the remainder that does not fill a global batch is dropped).
        epoch_fn: the current epoch (e.g. the trainer's), so a resumed run reshuffles as the
            original would; by default the iterable counts its own epochs.
        chunk_size: K. With K > 1 a batch's ACTION is [B,K,A], each step's action and the K-1
            after it in its episode, and ACTION_IS_PAD [B,K] marks steps past the episode's end
            (see `vla.data.chunks`); with K = 1 ACTION stays [B,A].
    """

    def __init__(
        self,
        tensors: dict[str, torch.Tensor],
        indices: torch.Tensor,
        batch_size: int,
        shuffle: bool,
        shift: int = 0,
        drop_last: bool = False,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        epoch_fn: Callable[[], int] | None = None,
        chunk_size: int = 1,
    ):
        self.tensors = tensors
        self.indices = indices
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.shift = shift
        self.drop_last = drop_last
        self.seed = seed
        self.rank, self.world_size = rank, world_size
        self.epoch_fn = epoch_fn
        self._epochs_seen = 0
        self.chunk_size = chunk_size
        if chunk_size > 1:  # [N,K] rows of each step's chunk, and which of them are past the end
            self.chunk_index, self.chunk_is_pad = chunk_indices(tensors["episode"], chunk_size)

    def _my_indices(self, epoch: int) -> torch.Tensor:
        idx = self.indices
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed + epoch)
            idx = idx[torch.randperm(len(idx), generator=g)]
        if self.world_size == 1:
            return idx
        # global batch i is idx[i*B*W : (i+1)*B*W]; rank r takes the r-th B of it, so W ranks
        # with batch B see exactly the batches one process with batch B*W would
        B, W = self.batch_size, self.world_size
        n = len(idx) // (B * W) * (B * W)
        return rearrange(idx[:n], "(i w b) -> i w b", w=W, b=B)[:, self.rank].reshape(-1)

    def __len__(self) -> int:
        if self.world_size > 1:
            return len(self.indices) // (self.batch_size * self.world_size)
        n = len(self.indices)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        epoch = self.epoch_fn() if self.epoch_fn is not None else self._epochs_seen
        self._epochs_seen += 1
        idx = self._my_indices(epoch)
        g = torch.Generator().manual_seed(self.seed + 1_000_003 * (epoch + 1))
        for i in range(len(self)):
            b = idx[i * self.batch_size : (i + 1) * self.batch_size]
            image = self.tensors[IMAGE][b]  # [B,H,W,3]
            if self.shift:
                image = random_shift(image, self.shift, g)
            chunked = self.chunk_size > 1
            batch = {
                IMAGE: image,
                STATE: self.tensors[STATE][b],
                # [B,A], or [B,K] rows -> [B,K,A] chunks
                ACTION: self.tensors[ACTION][self.chunk_index[b] if chunked else b],
                TOKENS: self.tensors[TOKENS][self.tensors["episode"][b]],
            }
            if TARGET in self.tensors:  # the named target's position, for auxiliary losses
                batch[TARGET] = self.tensors[TARGET][b]  # [B,2]
            if chunked:
                batch[ACTION_IS_PAD] = self.chunk_is_pad[b]  # [B,K]
            yield batch


def random_shift(image: torch.Tensor, pad: int, generator: torch.Generator) -> torch.Tensor:
    """Shifts each image by up to `pad` pixels, replicating edges (DrQ-style).

    Args:
        image: uint8 [B,H,W,C].
    Returns:
        uint8 [B,H,W,C].
    """
    B, H, W, _ = image.shape
    rows = torch.arange(H) + torch.randint(0, 2 * pad + 1, (B, 1), generator=generator) - pad
    cols = torch.arange(W) + torch.randint(0, 2 * pad + 1, (B, 1), generator=generator) - pad
    rows, cols = rows.clamp(0, H - 1), cols.clamp(0, W - 1)  # [B,H], [B,W]
    b = torch.arange(B)[:, None, None]
    return image[b, rows[:, :, None], cols[:, None, :]]  # [B,H,W,C]


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
        chunk_size: actions per training target (the policy's `model.chunk_size`).
    """

    def __init__(
        self,
        env: dict,
        dir: str = "data",
        num_episodes: int = 3000,
        seed: int = 0,
        noise_std: float = 0.3,
        collect_workers: int = 1,
        batch_size: int = 64,
        val_episodes: int = 100,
        shift: int = 0,
        tokenize: Callable[[list[str]], torch.Tensor] | None = None,
        shuffle_seed: int = 0,
        chunk_size: int = 1,
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
        self.demos: Demos | None = None
        self.tensors: dict[str, torch.Tensor] | None = None

    def prepare_data(self) -> None:
        """Builds or loads the demonstrations, once: later calls (Lightning's own) reuse them."""
        if self.demos is None:
            self.demos = ensure_demos(
                self.env_kwargs,
                self.dir,
                self.num_episodes,
                self.seed,
                self.noise_std,
                self.collect_workers,
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
            "episode": torch.from_numpy(np.array(d.episode, dtype=np.int64)),
        }
        # per step, for the optional auxiliary loss: [E,2] -> [N,2]
        self.tensors[TARGET] = torch.from_numpy(np.array(d.target_position))[
            self.tensors["episode"]
        ]
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
