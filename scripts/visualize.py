"""Draw where the policy looks: `python scripts/visualize.py ckpt_path=PATH`."""

import hydra
from omegaconf import DictConfig

from vla.cli import run_cli, run_script


@hydra.main(version_base="1.3", config_path="../conf", config_name="visualize")
def main(cfg: DictConfig) -> None:
    run_cli("vla.eval.visualize.visualize", cfg)  # imported after the checks


if __name__ == "__main__":
    run_script(main, "visualize")
