"""Batches for behavior cloning, cut by index from tensors in memory.

A batch is a dict of `vla.keys` tensors for a slice of step indices: no per-sample Python work
and no worker processes, so the training loop never waits on a DataLoader. With several
processes each rank takes its share of every global batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from einops import rearrange

from vla.data.chunks import chunk_indices
from vla.keys import (
    ACTION,
    ACTION_IS_PAD,
    EPISODE,
    IMAGE,
    OBJECT_PAIRS,
    OBJECTS,
    STATE,
    TARGET,
    TOKENS,
)


class TensorBatches:
    """An iterable of dict batches over `indices` of in-memory tensors.

    Args:
        tensors: IMAGE uint8 [N,H,W,3], STATE [N,S], ACTION [N,A], TOKENS [E,L] (one row per
            episode), EPISODE [N] (the episode of each step, to look up its tokens) and,
            optionally, TARGET [N,2] (where the shape to reach now is), OBJECTS [N,M,2] and
            OBJECT_PAIRS [N,M] (every shape's centre and pair): batches carry them if present.
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
            self.chunk_index, self.chunk_is_pad = chunk_indices(tensors[EPISODE], chunk_size)

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
                TOKENS: self.tensors[TOKENS][self.tensors[EPISODE][b]],
            }
            if TARGET in self.tensors:  # the named target's position, for auxiliary losses
                batch[TARGET] = self.tensors[TARGET][b]  # [B,2]
            if OBJECTS in self.tensors:  # every shape's position and what it is, likewise
                batch[OBJECTS] = self.tensors[OBJECTS][b]  # [B,M,2]
                batch[OBJECT_PAIRS] = self.tensors[OBJECT_PAIRS][b]  # [B,M]
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
