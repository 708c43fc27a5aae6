"""Draw where the policy looks: `vla-visualize ckpt_path=PATH` (`python scripts/visualize.py`)."""

from omegaconf import DictConfig

from vla.cli import run_cli
from vla.commands import entry_point


def task(cfg: DictConfig) -> None:
    run_cli("vla.eval.visualize.visualize", cfg)  # imported after the checks


main = entry_point(task, config_name="visualize")
