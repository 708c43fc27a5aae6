"""A training run folder: `checkpoints/last.ckpt` and Hydra's record `.hydra/overrides.yaml`.
`ckpt_path` may name one wherever a checkpoint is taken (evaluation, pictures, resuming)."""

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


def run_folder_of(ckpt_path) -> Path | None:
    """The training run folder `ckpt_path` belongs to: itself, the run of its `checkpoints/`
    folder, or the run holding the checkpoint file; None outside a run folder."""
    path = Path(ckpt_path).expanduser()
    for candidate in (path, path.parent, path.parent.parent):
        ours = candidate == path or candidate / "checkpoints" in (path, path.parent)
        if ours and (candidate / ".hydra" / "overrides.yaml").is_file():
            return candidate.resolve()
    return None
