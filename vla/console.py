"""What a command prints: our own lines through `logging` (Hydra writes them to the console and
to `<run>/<task>.log`), library noise filtered by message, and progress that stays readable
when the output is a file instead of a terminal."""

from __future__ import annotations

import io
import logging
import re
import sys
import warnings

from tqdm.auto import tqdm

# Lightning's info lines that say nothing about this run
LIGHTNING_NOISE = (
    "💡 Tip: For seamless cloud logging",  # an advert for a cloud service
    "Loading `train_dataloader` to estimate number of stepping batches",
    # the hardware Lightning did not find; a GPU that is used still gets its line
    "GPU available: False",
    "TPU available: False",
    "HPU available: False",
    "`Trainer.fit` stopped:",
    # resuming: train.py says itself which checkpoint, step and epoch it resumes from
    "Restoring states from the checkpoint path at",
    "Restored all states from the checkpoint at",
    "Found current_model_state in the checkpoint",
    # a stopped run says so in one line of its own (vla.training.stopping)
    "Detected KeyboardInterrupt, attempting graceful shutdown",
    "Received SIGTERM",
    "Bypassing SIGTERM",
)
_RANK = re.compile(r"^\s*(\[rank: \d+\] )?")  # Lightning's prefix on some per-rank lines
_CURSOR_UP = re.compile(r"\x1b\[\d*A")  # tqdm moves up to redraw nested bars


class DropMessages(logging.Filter):
    """Drops records whose message starts with one of `prefixes`."""

    def __init__(self, prefixes):
        super().__init__()
        self.prefixes = tuple(prefixes)

    def filter(self, record: logging.LogRecord) -> bool:
        return not _RANK.sub("", record.getMessage()).startswith(self.prefixes)


class ConsoleHandler(logging.StreamHandler):
    """Writes each record on its own line above any live progress bar, never glued to it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=self.stream)
            self.flush()
        except Exception:
            self.handleError(record)


class FinalLines(io.TextIOBase):
    """A stream for output that is not a terminal (a file, CI, SLURM): a line redrawn with
    carriage returns (a progress bar) is written once, in its final state, when it ends."""

    def __init__(self, stream):
        self.stream = stream
        self.pending = ""

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            self.stream.write(self._final(line) + "\n")
        return len(text)

    @staticmethod
    def _final(line: str) -> str:
        drawn = [s for s in _CURSOR_UP.sub("", line).split("\r") if s.strip()]
        return drawn[-1].rstrip() if drawn else ""

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> None:  # a line left without its newline still gets written
        if self._final(self.pending):
            self.stream.write(self._final(self.pending) + "\n")
        self.pending = ""
        self.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self):
        return self.stream.encoding

    @property
    def errors(self):
        return self.stream.errors

    def __getattr__(self, name):  # `buffer` and the like: the wrapped stream's
        return getattr(self.stream, name)


def is_terminal(stream) -> bool:
    return hasattr(stream, "isatty") and stream.isatty()


def bar_shown() -> bool:
    """A live progress bar only on a terminal: in a log file it is one stale line."""
    return is_terminal(sys.stderr)


def setup_console() -> None:
    """Called once by each command before its work starts."""
    # a deprecation inside Lightning's own code, about a torch API it uses; nothing to act on
    warnings.filterwarnings(
        "ignore",
        message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
        category=FutureWarning,
        module=r"lightning\.pytorch\.utilities\._pytree",
    )
    root = logging.getLogger()
    lightning = [logging.getLogger(n) for n in ("lightning", "lightning.pytorch")]
    if root.handlers:  # Hydra's console and log file: Lightning's lines go there too
        for logger in lightning:  # (it gives itself console handlers when imported first)
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
            logger.propagate = True
    noise = DropMessages(LIGHTNING_NOISE)
    for handler in root.handlers + [h for g in lightning for h in g.handlers]:
        handler.addFilter(noise)  # a handler sees the records of every logger below it
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not is_terminal(stream) and not isinstance(stream, FinalLines):
            setattr(sys, name, FinalLines(stream))
