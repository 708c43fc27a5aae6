"""`ckpt_path` may name a training run folder: its `checkpoints/last.ckpt` is meant."""

from __future__ import annotations

import logging
from pathlib import Path

from vla.errors import CheckpointError

log = logging.getLogger(__name__)


def resolve_ckpt_path(ckpt_path) -> Path:
    """The checkpoint file `ckpt_path` means: itself, or `last.ckpt` of the run folder (or of
    its `checkpoints/` folder) it names. A folder without one is refused, naming what is missing."""
    path = Path(ckpt_path)
    if not path.is_dir():
        return path  # a file, or a missing path that reading the checkpoint reports
    for candidate in (path / "checkpoints" / "last.ckpt", path / "last.ckpt"):
        if candidate.is_file():
            log.info(f"ckpt_path={str(path)!r} is a folder: using {candidate}")
            return candidate
    raise CheckpointError(
        f"ckpt_path={str(path)!r} is a folder without checkpoints/last.ckpt: pass a run folder "
        "of scripts/train.py or a .ckpt file"
    )
