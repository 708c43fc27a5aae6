"""What the command-line scripts share: one clear line for bad input, no stack trace."""

from __future__ import annotations

import os
import sys

from omegaconf.errors import OmegaConfBaseException

from vla.data.dataset import DatasetError


class UserError(ValueError):
    """Bad input from the user: a config value, a path, a file. Printed as one line."""


USER_ERRORS = (ValueError, FileNotFoundError, DatasetError, OmegaConfBaseException)
# CheckpointError is a ValueError


def run_cli(fn, cfg):
    """Runs `fn(cfg)`; bad input exits with status 2 and one line on stderr.

    Set VLA_DEBUG=1 to get the full traceback instead.
    """
    try:
        return fn(cfg)
    except USER_ERRORS as e:
        if os.environ.get("VLA_DEBUG"):
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
