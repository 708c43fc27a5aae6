"""The shape tour: `vla-tour [model=tiny] [ckpt_path=<run>]` (`python scripts/tour.py`)."""

from omegaconf import DictConfig

from vla.cli import run_cli
from vla.commands import entry_point


def task(cfg: DictConfig) -> None:
    run_cli("vla.tour.tour", cfg)  # imported after the checks


main = entry_point(task, config_name="tour")
