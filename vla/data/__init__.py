"""Demonstrations: the format on disk (dataset), collecting them from the scripted expert
(collect), building or loading a run's set (prepare), batching for training (datamodule) and
the episode seed ranges (seeds)."""

from vla.data.collect import collect
from vla.data.dataset import DatasetError, Demos, dataset_path, load_demos
from vla.data.prepare import ensure_demos

__all__ = ["DatasetError", "Demos", "collect", "dataset_path", "ensure_demos", "load_demos"]
