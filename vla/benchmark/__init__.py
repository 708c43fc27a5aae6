"""Speed figures measured side by side in one process: training loops (Lightning against plain
PyTorch, MFU), inference (attention kernels, vectorised rollouts, latency) and collection.
`python scripts/benchmark.py`; see the README's Performance section."""

from vla.benchmark.run import benchmark

__all__ = ["benchmark"]
