"""Checkpoint files written atomically and read as data only."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO


class AtomicCheckpointIO(TorchCheckpointIO):
    """Writes to a temporary file in the same folder, fsyncs it, then renames it over the
    target: a kill during a save leaves the previous checkpoint whole. Loads with
    `weights_only=True`, so a checkpoint can never run code (see `vla.checkpoint`)."""

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO does not take storage_options")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        try:
            with open(tmp, "wb") as f:
                torch.save(checkpoint, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    def load_checkpoint(self, path, map_location=None, weights_only=None):
        from vla.checkpoint import read_checkpoint

        return read_checkpoint(path)
