"""Stopping a run from outside: Ctrl-C (SIGINT) and SIGTERM, which `kill`, `docker stop`,
systemd, Kubernetes and SLURM send before they end a job.

Both save `last.ckpt` at the step reached (`LastCheckpoint.on_exception`), print one line,
`stopped at step N: resume with: ...`, and exit with status 128 + the signal (130, 143).
While Lightning trains, both take their own path: `vla.training.stop_at_step.StopAtStep`
notes them, and after each step every rank takes the maximum of the notes, so all ranks stop
at the same step and save together. Anywhere else (start-up, collecting demonstrations, the
final evaluation) SIGTERM raises `Terminated`, a KeyboardInterrupt, so it stops where Ctrl-C
would.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from pathlib import Path

from vla.run_folder import run_folder_of
from vla.training.resume import resume_hint, train_command


class Terminated(KeyboardInterrupt):
    """A stop asked for by a signal other than SIGINT."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum, frame) -> None:
    if signal.getsignal(signum) is not _raise_terminated:
        return  # called by Lightning's handler, which stops the loop after this step
    raise Terminated(signum)


@contextlib.contextmanager
def sigterm_stops():
    """Inside, SIGTERM stops the command as Ctrl-C does (signals reach the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def signal_of(stop: BaseException) -> int:
    """The signal behind a stop: Lightning's SIGTERMException, its `sys.exit` after a
    KeyboardInterrupt (which it keeps as context), a stop with a `signum` of its own
    (`StoppedAtStep`, `Terminated`), or the interrupt itself."""
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    if isinstance(stop, SIGTERMException):
        return signal.SIGTERM
    if isinstance(stop, SystemExit) and isinstance(stop.__context__, KeyboardInterrupt):
        stop = stop.__context__
    return getattr(stop, "signum", signal.SIGINT)


def exit_status(signum: int) -> int:
    """What a shell reports for a process ended by `signum`: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + int(signum)


def newest_checkpoint(folder) -> tuple[Path, int] | None:
    """(path, step) of the checkpoint in `folder` at the latest step that loads, or None."""
    from vla.checkpoint import read_checkpoint
    from vla.errors import CheckpointError

    found = []
    for path in sorted(Path(folder).glob("*.ckpt")) if Path(folder).is_dir() else ():
        try:
            found.append(
                (read_checkpoint(path).get("global_step", 0), path.name == "last.ckpt", path)
            )
        except CheckpointError:
            continue
    if not found:
        return None
    step, _, path = max(found)  # at equal steps, last.ckpt
    return path, step


def stop_message(step: int, saved, folder, failure: str | None = None) -> str:
    """The line a stopped run prints: how to resume from `saved` (the checkpoint just written)
    or, when there is none (`failure` says why), from the newest that loads in `folder`."""
    if saved is not None:
        return f"stopped at step {step}: {resume_hint(saved)}"
    why = f"saving step {step} failed ({failure})" if failure else f"step {step} was not saved"
    newest = newest_checkpoint(folder)
    if newest is None:
        return f"stopped at step {step}: {why} and there is no checkpoint to resume from"
    path, saved_step = newest
    hint = resume_hint(path)
    if path.name != "last.ckpt" and run_folder_of(path):  # a run folder means its last.ckpt
        hint = f"resume with: {train_command()} ckpt_path={path}"
    return f"stopped at step {step}: {why}; the newest checkpoint is {path} (step {saved_step}): {hint}"
