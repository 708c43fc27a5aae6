"""Ctrl-C and SIGTERM during training: noted, then acted on by every rank after the same step.

A handler that raises where the signal lands (Python's for SIGINT) can stop the run inside
torch's checkpoint writer, whose error on closing then hides the interrupt, or inside C code
that drops it. Lightning's own SIGTERM handler runs collectives inside the handler (a
broadcast from rank 0, and a kill of the other ranks), so under DDP a signal that lands
between two collectives pairs them wrongly, and a rank that sees the signal one step later
than another waits forever in the next step's broadcast; its flag also lets the step's
rollout evaluation start and then stops it halfway, with the averaged weights swapped in.
Here the handlers only note the signal; after each training step (and at each epoch's end)
every rank takes the maximum of the notes (one all-reduce of a scalar) and all of them raise
`StoppedAtStep` there, before that step's validation: Lightning calls `on_exception`, where
`LastCheckpoint` saves, and re-raises it. A second Ctrl-C stops at once, wherever it lands.
"""

from __future__ import annotations

import os
import signal
import threading

import lightning as L
import torch

from vla.training.stopping import exit_status

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StoppedAtStep(SystemExit):
    """Training stopped by `signum` after a step (a SystemExit, as Lightning's own
    SIGTERMException: Lightning saves through `on_exception` and re-raises it)."""

    def __init__(self, signum: int):
        super().__init__(exit_status(signum))
        self.signum = signum


class StopAtStep(L.Callback):
    """Replaces the SIGINT and SIGTERM handlers while training; the stop happens after a step."""

    def __init__(self):
        self.noted = 0  # the signal to stop with: SIGTERM (15) outranks SIGINT (2), 0 for none
        self.presses = 0  # Ctrl-C's
        self._before: dict[int, object] = {}
        self._says = True  # rank 0 says what a Ctrl-C will do

    def _note(self, signum, frame) -> None:
        if signum == signal.SIGINT:
            self.presses += 1
            if self.presses > 1:
                raise KeyboardInterrupt  # the second Ctrl-C: where it lands
            if self._says:  # os.write: safe inside a handler
                os.write(2, b"\nCtrl-C: stopping after this step (Ctrl-C again to stop now)\n")
        self.noted = max(self.noted, signum)

    def on_train_start(self, trainer, pl_module) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self._says = trainer.is_global_zero
        for signum in SIGNALS:  # a SIGINT ignored (a job started with &) stays ignored
            if signum != signal.SIGINT or signal.getsignal(signum) is signal.default_int_handler:
                self._before[signum] = signal.signal(signum, self._note)

    def _stop_if_noted(self, trainer) -> None:
        noted = self.noted
        if trainer.world_size > 1:  # one process alone needs no tensor, nor a device sync
            note = torch.tensor([float(noted)], device=trainer.strategy.root_device)
            torch.distributed.all_reduce(note, op=torch.distributed.ReduceOp.MAX)
            noted = int(note.item())
        if noted:
            raise StoppedAtStep(noted)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._stop_if_noted(trainer)  # before the step's rollout evaluation, if it has one

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        # one noted during the epoch's last evaluation, before on_train_end, where the
        # averaged weights (the ema callback) replace the trained ones
        self._stop_if_noted(trainer)

    def _restore(self) -> None:
        for signum, handler in self._before.items():
            signal.signal(signum, handler)
        self._before = {}

    def on_train_end(self, trainer, pl_module) -> None:
        self._restore()

    def on_exception(self, trainer, pl_module, exception) -> None:
        self._restore()
