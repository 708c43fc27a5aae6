"""SIGTERM during training, decided by every rank at the same step.

Lightning's own SIGTERM handler runs collectives inside the handler (a broadcast from rank 0,
and a kill of the other ranks), so under DDP a signal that lands between two collectives
pairs them wrongly, and a rank that sees the signal one step later than another waits
forever in the next step's broadcast. Here the handler only notes the signal; after each
training step every rank takes the maximum of the notes (one all-reduce of a scalar) and,
if any rank was signalled, all of them raise Lightning's flag at that step, so all stop
together with `SIGTERMException` and `LastCheckpoint` saves.
"""

from __future__ import annotations

import signal
import threading

import lightning as L
import torch


class SigtermAtStep(L.Callback):
    """Replaces Lightning's SIGTERM handler while training; the stop happens after a step."""

    def __init__(self):
        self.noted = False
        self._before = None

    def _note(self, signum, frame) -> None:
        self.noted = True

    def on_train_start(self, trainer, pl_module) -> None:
        if threading.current_thread() is threading.main_thread():
            self._before = signal.signal(signal.SIGTERM, self._note)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        stop = self.noted
        if trainer.world_size > 1:  # one process alone needs no tensor, nor a device sync
            noted = torch.tensor([float(stop)], device=trainer.strategy.root_device)
            torch.distributed.all_reduce(noted, op=torch.distributed.ReduceOp.MAX)
            stop = noted.item() > 0
        if stop:
            trainer._signal_connector.received_sigterm = True  # every rank, this step

    def _restore(self) -> None:
        if self._before is not None:
            signal.signal(signal.SIGTERM, self._before)
            self._before = None

    def on_train_end(self, trainer, pl_module) -> None:
        self._restore()

    def on_exception(self, trainer, pl_module, exception) -> None:
        self._restore()
