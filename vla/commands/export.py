"""Write a config's demonstrations in another format:
`vla-export format=lerobot out=<folder> [experiment=suite]` (`python scripts/export.py`)."""

from omegaconf import DictConfig

from vla.cli import run_cli
from vla.commands import entry_point
from vla.data.prepare import demos_of
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError

FORMATS = ("lerobot",)


def export_demos(cfg: DictConfig):
    """Collects the config's demonstrations if missing, then writes them to `cfg.out`."""
    if cfg.format not in FORMATS:
        raise ConfigError(f"format={cfg.format!r} is unknown: expected one of {list(FORMATS)}")
    from vla.lerobot.export import check_out, export_lerobot

    check_out(cfg.out)  # before minutes of collecting
    demos = demos_of(cfg)
    out = export_lerobot(
        demos,
        cfg.out,
        fps=ReachEnv.metadata["render_fps"],
        robot_type=cfg.lerobot.robot_type,
        chunks_size=cfg.lerobot.chunks_size,
        data_files_size_in_mb=cfg.lerobot.data_files_size_in_mb,
        video=cfg.lerobot.video,
        video_pix_fmt=cfg.lerobot.video_pix_fmt,
        video_crf=cfg.lerobot.video_crf,
        video_files_size_in_mb=cfg.lerobot.video_files_size_in_mb,
    )
    print(f"{out}: LeRobotDataset v3.0, {demos.num_episodes} episodes, {demos.num_steps} frames")
    return out


def task(cfg: DictConfig) -> None:
    run_cli(export_demos, cfg)


main = entry_point(task, config_name="export")
