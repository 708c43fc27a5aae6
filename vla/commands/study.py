"""Summarise a learning-speed study: `vla-study runs=outputs/train/multirun/<date>`
(`python scripts/study.py`)."""

from omegaconf import DictConfig

from vla.cli import run_cli
from vla.commands import entry_point
from vla.study import summarize


def task(cfg: DictConfig) -> None:
    run_cli(lambda c: summarize(c.runs), cfg)


main = entry_point(task, config_name="study")
