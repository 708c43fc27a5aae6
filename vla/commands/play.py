"""Watch the policy act on a scene and instruction of your choice, in a local web page:
`vla-play ckpt_path=RUN` (`python scripts/play.py`)."""

from omegaconf import DictConfig

from vla.cli import run_cli
from vla.commands import entry_point


def task(cfg: DictConfig) -> None:
    run_cli("vla.play.serve.play", cfg)  # imported after the checks


main = entry_point(task, config_name="play")
