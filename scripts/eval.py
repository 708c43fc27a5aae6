"""Evaluate a checkpoint with rollouts: `python scripts/eval.py ckpt_path=PATH`."""

import hydra
from omegaconf import DictConfig

from vla.cli import run_cli, run_script


@hydra.main(version_base="1.3", config_path="../conf", config_name="eval")
def main(cfg: DictConfig) -> None:
    run_cli("vla.eval.evaluate.evaluate", cfg)  # imported after the checks


if __name__ == "__main__":
    run_script(main, "eval")
