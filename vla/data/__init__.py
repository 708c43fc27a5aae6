"""Demonstrations: collecting them from the scripted expert, storing, loading and batching."""

from vla.data.collect import collect, dataset_path, env_kwargs_of
from vla.data.dataset import DatasetError, Demos, load_demos

__all__ = ["DatasetError", "Demos", "collect", "dataset_path", "env_kwargs_of", "load_demos"]
