"""Roll out the scripted expert and write demonstrations: `python scripts/collect.py`."""

import hydra
from omegaconf import DictConfig

from vla.cli import run_cli, run_script
from vla.data.prepare import demos_of


def collect_demos(cfg: DictConfig):
    demos = demos_of(cfg)
    meta = demos.meta
    print(
        f"{demos.path}: {meta['num_episodes']} episodes, {meta['num_steps']} steps, "
        f"expert success {meta['success_rate']:.1%}"
    )
    return demos


@hydra.main(version_base="1.3", config_path="../conf", config_name="collect")
def main(cfg: DictConfig) -> None:
    run_cli(collect_demos, cfg)


if __name__ == "__main__":
    run_script(main, "collect")
