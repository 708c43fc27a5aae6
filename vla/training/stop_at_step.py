"""Ctrl-C and SIGTERM during training: noted, then acted on by every rank at the same step.

A handler that raises where the signal lands (Python's for SIGINT) can stop the run inside
torch's checkpoint writer, whose error on closing then hides the interrupt, or inside C code
that drops it. Lightning's own SIGTERM handler runs collectives inside the handler (a
broadcast from rank 0, and a kill of the other ranks), so under DDP a signal that lands
between two collectives pairs them wrongly, and a rank that sees the signal one step later
than another waits forever in the next step's broadcast; its flag also lets a step's rollout
evaluation start and then stops it, and the resumed run skips that evaluation. Here the
handlers only note the signal. At the end of each step that has no rollout evaluation to run
(after one that has, at the end of the next) and at the end of each epoch, every rank takes
the maximum of the notes (one all-reduce of a scalar) and all of them raise `StoppedAtStep`
there: Lightning calls `on_exception`, where `LastCheckpoint` saves, and re-raises it. A
second Ctrl-C stops at once, wherever it lands.
"""

from __future__ import annotations

import os
import signal
import threading

import lightning as L
import torch

from vla.training.stopping import Terminated, exit_status

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StoppedAtStep(SystemExit):
    """Training stopped by `signum` at the end of a step (a SystemExit, as Lightning's own
    SIGTERMException: Lightning saves through `on_exception` and re-raises it)."""

    def __init__(self, signum: int):
        super().__init__(exit_status(signum))
        self.signum = signum


class StopAtStep(L.Callback):
    """Replaces the SIGINT and SIGTERM handlers while training; the stop happens at the end
    of a step, after every other callback's end of that step (`LastCheckpoint`'s save, the
    ema callback's update)."""

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
        if trainer.received_sigterm:  # noted by Lightning's handler, before this one's
            self.noted = signal.SIGTERM
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
            self.noted = 0  # acted on
            raise StoppedAtStep(noted)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if (batch_idx + 1) % trainer.accumulate_grad_batches:
            return  # not between accumulated batches: the step is not done
        loop = trainer.fit_loop.epoch_loop  # the same answer on every rank
        if loop._should_check_val_fx(trainer.fit_loop._data_fetcher):
            return  # its rollout evaluation runs first: a resumed run would skip it
        self._stop_if_noted(trainer)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        # the epoch is counted as done by now (a resumed run starts the next one), and the
        # averaged weights have not yet replaced the trained ones (ema's on_train_end)
        self._stop_if_noted(trainer)

    def restore(self) -> None:
        """The handlers of before training (also when a save in `on_exception` failed)."""
        for signum, handler in self._before.items():
            signal.signal(signum, handler)
        self._before = {}

    def stop_if_noted_since(self) -> None:
        """After training ended by itself: a signal noted after the last check stops the
        command here, before the final evaluation, as one outside training does."""
        if self.noted == signal.SIGTERM:
            raise Terminated(signal.SIGTERM)
        if self.noted:
            raise KeyboardInterrupt
