"""A training run folder: `checkpoints/last.ckpt`, Hydra's record `.hydra/overrides.yaml`
and `pretrained_model/` (`vla.pretrained`). `ckpt_path` may name a run wherever a checkpoint
is taken (evaluation, pictures, resuming), and a pretrained folder or Hub id wherever a policy
is only read (evaluation, pictures, the suite, compare_to)."""

from __future__ import annotations

import logging
from pathlib import Path

from vla.errors import CheckpointError

log = logging.getLogger(__name__)

PRETRAINED_FILES = ("config.json", "model.safetensors")


def resolve_ckpt_path(ckpt_path) -> Path:
    """What `ckpt_path` means: a checkpoint file itself, `last.ckpt` of the run folder (or of
    its `checkpoints/` folder) it names, or a pretrained folder (also when named by one of its
    files). Anything else that is not a folder (a missing path, a Hub id) is returned as it
    is, for the reader to report or fetch. A folder with neither is refused, naming what is
    missing."""
    path = Path(ckpt_path)
    if path.name in PRETRAINED_FILES and (path.parent / "config.json").is_file():
        return path.parent
    if not path.is_dir():
        return path  # a file, a Hub id, or a missing path that reading the checkpoint reports
    for candidate in (path / "checkpoints" / "last.ckpt", path / "last.ckpt"):
        if candidate.is_file():
            log.info(f"ckpt_path={str(path)!r} is a folder: using {candidate}")
            return candidate
    if (path / "config.json").is_file():
        return path  # a pretrained folder: reading it checks the rest
    raise CheckpointError(
        f"ckpt_path={str(path)!r} is a folder without checkpoints/last.ckpt or config.json: "
        "pass a run folder of scripts/train.py, a .ckpt file or a pretrained folder"
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
