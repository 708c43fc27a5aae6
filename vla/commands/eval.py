"""Evaluate a checkpoint with rollouts: `vla-eval ckpt_path=PATH` (`python scripts/eval.py`)."""

from omegaconf import DictConfig

from vla.cli import run_cli
from vla.commands import entry_point


def task(cfg: DictConfig) -> None:
    run_cli("vla.eval.evaluate.evaluate", cfg)  # imported after the checks


main = entry_point(task, config_name="eval")
