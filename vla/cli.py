"""What the command-line scripts share: one clear line for bad input, no stack trace."""

from __future__ import annotations

import os
import sys

from omegaconf.errors import OmegaConfBaseException

from vla.data.dataset import DatasetError

# Bad input from the user (a config value, a path, a file; CheckpointError is a ValueError)
USER_ERRORS = (ValueError, FileNotFoundError, DatasetError, OmegaConfBaseException)


def run_cli(fn, cfg):
    """Runs `fn(cfg)`; bad input exits with status 2 and one line on stderr, a non-finite
    loss with status 1, Ctrl-C with status 130 (after training saved a checkpoint).

    Set VLA_DEBUG=1 to get the full traceback instead.
    """
    from vla.training.train import TrainingInterrupted

    try:
        return fn(cfg)
    except (*USER_ERRORS, FloatingPointError, TrainingInterrupted) as e:
        if os.environ.get("VLA_DEBUG"):
            raise
        print(f"error: {e}", file=sys.stderr)
        code = 130 if isinstance(e, TrainingInterrupted) else 1
        sys.exit(2 if isinstance(e, USER_ERRORS) else code)
