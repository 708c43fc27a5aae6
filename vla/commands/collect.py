"""Roll out the scripted expert and write demonstrations: `vla-collect`
(`python scripts/collect.py`)."""

from omegaconf import DictConfig

from vla.cli import run_cli
from vla.commands import entry_point
from vla.data.prepare import demos_of


def collect_demos(cfg: DictConfig):
    demos = demos_of(cfg)
    meta = demos.meta
    print(
        f"{demos.path}: {meta['num_episodes']} episodes, {meta['num_steps']} steps, "
        f"expert success {meta['success_rate']:.1%}"
    )
    return demos


def task(cfg: DictConfig) -> None:
    run_cli(collect_demos, cfg)


main = entry_point(task, config_name="collect")
