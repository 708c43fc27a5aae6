"""Summarise a learning-speed study: `python scripts/study.py runs=outputs/train/multirun/<date>`."""

import hydra
from omegaconf import DictConfig

from vla.cli import run_cli
from vla.study import summarize


@hydra.main(version_base="1.3", config_path="../conf", config_name="study")
def main(cfg: DictConfig) -> None:
    run_cli(lambda c: summarize(c.runs), cfg)


if __name__ == "__main__":
    main()
