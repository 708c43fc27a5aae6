"""Train a policy by behavior cloning: `python scripts/train.py model=small`.

`python scripts/train.py ckpt_path=<run folder>` resumes that run with its own config, in its
own folder; overrides on the same line change only what they name."""

import sys

import hydra
from omegaconf import DictConfig

from vla.cli import run_cli, run_script
from vla.training.resume import resume_argv


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> float:
    metrics = run_cli("vla.training.train.train", cfg)  # imported after the checks
    return metrics.get("success_rate", 0.0)  # the value a Hydra sweeper would optimise


if __name__ == "__main__":
    sys.argv[1:] = resume_argv(sys.argv[1:])  # before Hydra composes the config
    run_script(main, "train")
