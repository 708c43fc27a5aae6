"""Measure training, rollout and inference speed: `python scripts/benchmark.py`."""

import hydra
from omegaconf import DictConfig

from vla.cli import run_cli, run_script


@hydra.main(version_base="1.3", config_path="../conf", config_name="benchmark")
def main(cfg: DictConfig) -> None:
    run_cli("vla.benchmark.benchmark", cfg)  # imported after the checks


if __name__ == "__main__":
    run_script(main, "benchmark")
