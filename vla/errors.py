"""Errors that are the user's to fix, apart from the ones that are bugs.

    UserError           bad input from whoever runs a command or builds an object
      ConfigError         a config value, or a combination of values, that cannot work
        SeedRangeError      episodes whose seeds leave their range (see `vla.data.seeds`)
      CheckpointError     a checkpoint that is missing, unreadable, unsafe or does not fit
      DatasetError        a demonstration set that is missing, incomplete or inconsistent
      StudyError          a study folder without finished training runs
    TrainingInterrupted Ctrl-C or SIGTERM during training, after a checkpoint was saved (not
                        an error: the command says how to resume)

The command-line scripts print a UserError as one line and exit with status 2 (`vla.cli`);
every other exception is a bug and keeps its traceback. So a check of something the user
chose raises one of these, naming the key and the value; a check of the code's own
invariants (shapes between modules, an executor asked for an action it has not got) raises
ValueError or RuntimeError. UserError is not a ValueError on purpose: an internal ValueError
must never be mistaken for the user's fault.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: the message says what to change."""


class ConfigError(UserError):
    """A config value, or a combination of values, that cannot work."""


class SeedRangeError(ConfigError):
    """Episode seeds outside the range of their use."""


class CheckpointError(UserError):
    """A checkpoint is missing, unreadable, unsafe, of another version or does not fit."""


class DatasetError(UserError):
    """A dataset folder is missing, incomplete or inconsistent."""


class StudyError(UserError):
    """A folder that holds no training run the study can read."""


class TrainingInterrupted(RuntimeError):
    """Training stopped by a signal (Ctrl-C, SIGTERM), after saving a checkpoint: the message
    says how to resume. `signum` is the signal; `rank_zero` is false on the other ranks of a
    distributed run, which say nothing."""

    def __init__(self, message: str, signum: int = 2, rank_zero: bool = True):
        super().__init__(message)
        self.signum, self.rank_zero = signum, rank_zero
