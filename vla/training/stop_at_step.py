"""Ctrl-C and SIGTERM during training: noted, then acted on by every rank after the same step.

A handler that raises where the signal lands (Python's for SIGINT) can stop the run inside
torch's checkpoint writer, whose error on closing then hides the interrupt, or inside C code
that drops it. Lightning's own SIGTERM handler runs collectives inside the handler (a
broadcast from rank 0, and a kill of the other ranks), so under DDP a signal that lands
between two collectives pairs them wrongly, and a rank that sees the signal one step later
than another waits forever in the next step's broadcast. Here the handlers only note the
signal; after each training step every rank takes the maximum of the notes (one all-reduce
of a scalar) and all of them stop at that step: SIGTERM through Lightning's flag
(`SIGTERMException`), Ctrl-C as the KeyboardInterrupt Lightning expects from it; either way
`LastCheckpoint` saves. A second Ctrl-C stops at once, for a step that does not end.
"""

from __future__ import annotations

import os
import signal
import threading

import lightning as L
import torch
from lightning.pytorch.utilities.exceptions import SIGTERMException

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopAtStep(L.Callback):
    """Replaces the SIGINT and SIGTERM handlers while training; the stop happens after a step."""

    def __init__(self):
        self.noted = 0  # the signal to stop with: SIGTERM (15) outranks SIGINT (2), 0 for none
        self._before: dict[int, object] = {}
        self._says = True  # rank 0 says what a Ctrl-C will do

    def _note(self, signum, frame) -> None:
        if signum == signal.SIGINT and self.noted == signal.SIGINT:
            raise KeyboardInterrupt  # the second Ctrl-C: where it lands
        self.noted = max(self.noted, signum)
        if signum == signal.SIGINT and self._says:  # os.write: safe inside a handler
            os.write(2, b"\nCtrl-C: stopping after this step (Ctrl-C again to stop now)\n")

    def on_train_start(self, trainer, pl_module) -> None:
        if threading.current_thread() is threading.main_thread():
            self._says = trainer.is_global_zero
            self._before = {s: signal.signal(s, self._note) for s in SIGNALS}

    def _agreed(self, trainer) -> int:
        """The signal noted on any rank (SIGTERM if one rank saw each), or 0."""
        if trainer.world_size == 1:  # one process alone needs no tensor, nor a device sync
            return self.noted
        noted = torch.tensor([float(self.noted)], device=trainer.strategy.root_device)
        torch.distributed.all_reduce(noted, op=torch.distributed.ReduceOp.MAX)
        return int(noted.item())

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        noted = self._agreed(trainer)
        if noted == signal.SIGTERM:
            trainer._signal_connector.received_sigterm = True  # Lightning stops after this hook
        elif noted == signal.SIGINT:
            raise KeyboardInterrupt

    def on_train_end(self, trainer, pl_module) -> None:
        noted = self._agreed(trainer)  # one that came after the last step is not lost
        self._restore()
        if noted == signal.SIGTERM:
            raise SIGTERMException
        if noted == signal.SIGINT:
            raise KeyboardInterrupt

    def _restore(self) -> None:
        for signum, handler in self._before.items():
            signal.signal(signum, handler)
        self._before = {}

    def on_exception(self, trainer, pl_module, exception) -> None:
        self._restore()  # also undoes the SIGINT Lightning ignores after a KeyboardInterrupt
