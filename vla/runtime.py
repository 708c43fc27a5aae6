"""Process-wide torch settings shared by training, evaluation and benchmarks."""

from __future__ import annotations

import torch

from vla.errors import ConfigError


def configure_torch(threads: int | None = None) -> None:
    """Sets intra-op threads (None: torch's default, one per core) and flushes denormals.

    Flushing denormal floats to zero matters on CPU: tiny gradients and optimizer moments
    otherwise fall into the CPU's slow denormal path, where every operation on them costs
    many times a normal one (the step times with and without: docs/performance.md).
    """
    if threads is not None:
        if threads < 1:
            raise ConfigError(f"threads={threads} must be >= 1")
        torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
