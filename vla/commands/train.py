"""Train a policy by behavior cloning: `vla-train model=small` (`python scripts/train.py`).

`ckpt_path=<run folder>` resumes that run with its own config, in its own folder; overrides on
the same line change only what they name."""

from omegaconf import DictConfig

from vla.cli import run_cli
from vla.commands import entry_point
from vla.training.resume import resume_argv


def task(cfg: DictConfig) -> float:
    metrics = run_cli("vla.training.train.train", cfg)  # imported after the checks
    return metrics.get("success_rate", 0.0)  # the value a Hydra sweeper would optimise


main = entry_point(task, config_name="train", argv=resume_argv)  # a run's config: before Hydra
