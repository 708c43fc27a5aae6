"""Write a config's demonstrations, or a trained policy, in another format:
`vla-export format=lerobot out=<folder> [experiment=suite]`, or
`vla-export format=pretrained ckpt_path=<run or .ckpt> out=<folder> [push_to_hub=<user>/<name>]`
(`python scripts/export.py`)."""

from omegaconf import DictConfig

from vla.cli import run_cli
from vla.commands import entry_point
from vla.errors import ConfigError

FORMATS = ("lerobot", "pretrained")


def export(cfg: DictConfig):
    """The export `cfg.format` names."""
    if cfg.format not in FORMATS:
        raise ConfigError(f"format={cfg.format!r} is unknown: expected one of {list(FORMATS)}")
    if cfg.format == "pretrained":
        from vla.pretrained.run import export_pretrained  # torch: only for this format

        return export_pretrained(cfg)
    return export_demos(cfg)


def export_demos(cfg: DictConfig):
    """Collects the config's demonstrations if missing, then writes them to `cfg.out`."""
    from vla.data.prepare import demos_of
    from vla.envs.reach import ReachEnv
    from vla.lerobot.export import check_out, export_lerobot

    if cfg.get("out") is None:
        raise ConfigError("format=lerobot needs out=<folder> to write the dataset to")
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
    run_cli(export, cfg)


main = entry_point(task, config_name="export")
