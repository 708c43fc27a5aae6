"""Measure training, rollout and inference speed: `vla-benchmark` (`python scripts/benchmark.py`)."""

from omegaconf import DictConfig

from vla.cli import run_cli
from vla.commands import entry_point


def task(cfg: DictConfig) -> None:
    run_cli("vla.benchmark.benchmark", cfg)  # imported after the checks


main = entry_point(task, config_name="benchmark")
