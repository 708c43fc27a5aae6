"""Training progress as lines of text: one per epoch always (console and `<run>/train.log`), and
a few per epoch instead of Lightning's live bar when the output is not a terminal."""

from __future__ import annotations

import logging
import math
import sys
import time

import lightning as L
from lightning.pytorch.callbacks import ProgressBar

from vla.console import is_terminal
from vla.errors import ConfigError

log = logging.getLogger(__name__)


class ProgressLines(L.Callback):
    """On a terminal Lightning's live bar stays; redirected to a file (CI, SLURM) it is turned
    off and `lines_per_epoch` lines report the epoch's progress, so the output stays a few
    readable lines instead of a stream of carriage-return redraws. Every epoch ends with one
    line of its progress-bar metrics and its duration.

    Args:
        lines_per_epoch: progress lines within an epoch when the output is not a terminal.
    """

    def __init__(self, lines_per_epoch: int = 4):
        if lines_per_epoch < 1:
            raise ConfigError(f"callbacks.progress.lines_per_epoch={lines_per_epoch} must be >= 1")
        self.lines_per_epoch = lines_per_epoch
        self.lines = False
        self.epoch_start = 0.0
        self.first_batch: int | None = None  # of this epoch in this process (resumed: later)

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        bars = [c for c in trainer.callbacks if isinstance(c, ProgressBar)]
        self.lines = bool(bars) and not is_terminal(sys.stdout)
        if self.lines:
            for bar in bars:
                bar.disable()

    # Lightning skips on_train_epoch_start for an epoch resumed in its middle: the clock and
    # the batch count start at the first batch this process runs instead
    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.first_batch = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.first_batch = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        if self.first_batch is None:
            self.first_batch, self.epoch_start = batch_idx, time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        total = trainer.num_training_batches
        if not self.lines or not trainer.is_global_zero or not math.isfinite(total):
            return
        done = batch_idx + 1
        every = max(1, math.ceil(total / self.lines_per_epoch))
        if done % every == 0 and done < total:
            ran = done - (self.first_batch or 0)
            rate = ran / max(time.perf_counter() - self.epoch_start, 1e-9)
            log.info(
                f"{self._epoch(trainer)} {done / total:4.0%} ({done}/{total} batches, "
                f"{rate:.1f} it/s) {_metrics(trainer, 'train/')}"
            )

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero:
            seconds = time.perf_counter() - self.epoch_start
            since = f" since resuming at batch {self.first_batch}" if self.first_batch else ""
            log.info(f"{self._epoch(trainer)} done in {seconds:.0f}s{since}: {_metrics(trainer)}")

    @staticmethod
    def _epoch(trainer: L.Trainer) -> str:
        of = f"/{trainer.max_epochs}" if trainer.max_epochs and trainer.max_epochs > 0 else ""
        return f"epoch {trainer.current_epoch + 1}{of}"


def _metrics(trainer: L.Trainer, prefix: str = "") -> str:
    shown = trainer.progress_bar_metrics
    return ", ".join(
        f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
        for k, v in shown.items()
        if k.startswith(prefix)
    )
