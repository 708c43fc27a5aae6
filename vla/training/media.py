"""Pictures and animations for whichever loggers a run has: TensorBoard's IMAGES tab, W&B's
media panel; loggers without media (CSV) get only the scalars."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from lightning.pytorch.loggers import Logger, TensorBoardLogger

from vla.eval.video import add_gif, save_gif

try:
    from lightning.pytorch.loggers import WandbLogger
except ImportError:  # pragma: no cover - Lightning always ships the class; wandb is optional
    WandbLogger = ()


def takes_media(logger: Logger) -> bool:
    return isinstance(logger, TensorBoardLogger | WandbLogger)


def log_image(loggers: list[Logger], tag: str, image: np.ndarray, step: int) -> None:
    """`image` uint8 [H,W,3] under `tag` at `step`, in every logger that shows pictures."""
    for logger in loggers:
        if isinstance(logger, TensorBoardLogger):
            logger.experiment.add_image(tag, image, step, dataformats="HWC")
        elif isinstance(logger, WandbLogger):
            logger.log_image(key=tag, images=[image], step=step)


def log_gif(loggers: list[Logger], tag: str, frames: list[np.ndarray], step: int) -> None:
    """`frames` (uint8 [H,W,3] each) as an animated GIF under `tag` at `step`."""
    for logger in loggers:
        if isinstance(logger, TensorBoardLogger):
            add_gif(logger.experiment, tag, frames, step)
        elif isinstance(logger, WandbLogger):
            # from a file, as W&B encodes arrays only through moviepy; it copies the file
            with tempfile.TemporaryDirectory() as tmp:
                path = save_gif(frames, Path(tmp) / f"{tag.replace('/', '_')}.gif")
                logger.log_video(key=tag, videos=[str(path)], step=step, format=["gif"])
