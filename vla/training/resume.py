"""`train.py ckpt_path=<run folder or checkpoint>` resumes that run: with its own config, in
its own folder.

Hydra composes the config from the command line alone, so the run's config has to be on the
command line before Hydra starts: the run's saved overrides (`<run>/.hydra/overrides.yaml`),
then the new ones, which win key by key, then `hydra.run.dir=<run>`. A checkpoint outside a
run folder (no `.hydra/` next to its `checkpoints/`) leaves the command line as it is.
Hydra would record the new command line in `<run>/.hydra/` before anything is checked, so a
resume refused for a bad override would leave the run with a config it cannot resume with:
Hydra writes nothing there (`hydra.output_subdir=null`), and `train` records the config once
the checkpoint has been found to fit it (`record_resumed_config`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

from vla.errors import CheckpointError, ConfigError
from vla.run_folder import resolve_ckpt_path, run_folder_of

log = logging.getLogger(__name__)

CKPT_KEY = "ckpt_path"


def override_key(override: str) -> str:
    """The key an override sets: `model=tiny` -> model, `+trainer.x=1` -> trainer.x,
    `~logger` -> logger."""
    return override.lstrip("~+").split("=", 1)[0]


def resume_argv(args: list[str]) -> list[str]:
    """The command-line overrides that resume the run `ckpt_path=` names, or `args` unchanged
    when there is no such run (no ckpt_path, a checkpoint outside a run folder, a sweep)."""
    if any(a in ("-m", "--multirun") for a in args):
        return args
    ckpt = next(
        (a.split("=", 1)[1] for a in args if override_key(a) == CKPT_KEY and "=" in a), None
    )
    run = run_folder_of(ckpt) if ckpt else None
    if run is None:
        return args
    saved = yaml.safe_load((run / ".hydra" / "overrides.yaml").read_text()) or []
    new_keys = {override_key(a) for a in args if not a.startswith("-")}
    kept = [o for o in saved if override_key(o) not in new_keys]
    if "hydra.run.dir" in new_keys:  # resumed into another folder, which gets its own record
        return [*kept, *args]
    return [*kept, *args, f"hydra.run.dir={run}", "hydra.output_subdir=null"]


def record_resumed_config(cfg: DictConfig, out_dir: Path) -> None:
    """Writes `<run>/.hydra/overrides.yaml` and `config.yaml` of a run resumed in its own
    folder, once its checkpoint fits (see the module docstring)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized() or HydraConfig.get().output_subdir is not None:
        return
    if run_folder_of(cfg.ckpt_path) != out_dir.resolve():
        return
    record = out_dir / ".hydra"
    overrides = list(HydraConfig.get().overrides.task)
    (record / "overrides.yaml").write_text(yaml.safe_dump(overrides, default_flow_style=False))
    (record / "config.yaml").write_text(OmegaConf.to_yaml(cfg))


def requeued_checkpoint(cfg: DictConfig) -> Path | None:
    """The run's own `last.ckpt` when SLURM has requeued its job (preempted, or stopped before
    its time limit by `--signal=USR1@90`, which Lightning answers by requeueing): the job
    starts again with the same config and run folder and goes on from there. None on a first
    start, outside SLURM, without a checkpoint yet, or when `ckpt_path` is set."""
    if cfg.ckpt_path is not None or int(os.environ.get("SLURM_RESTART_COUNT") or 0) < 1:
        return None
    last = cfg.get("callbacks", {}).get("last_checkpoint")
    folder = Path(last.dirpath) if last else Path(cfg.paths.output_dir) / "checkpoints"
    path = folder / "last.ckpt"
    return path if path.is_file() else None


def check_resumable(cfg: DictConfig, policy) -> Path:
    """The checkpoint `cfg.ckpt_path` means (a run folder: its last.ckpt) exists, loads as
    data only, fits this config's architecture and has epochs left; returns its path."""
    from vla.checkpoint import load_weights, read_checkpoint  # torch: only when resuming

    path = resolve_ckpt_path(cfg.ckpt_path)
    ckpt = read_checkpoint(path)
    try:
        load_weights(policy, ckpt, f"ckpt_path={str(cfg.ckpt_path)!r} does not fit this config")
    except CheckpointError:
        saved = _flat(ckpt.get("vla", {}).get("policy_config", {}), "model.")
        now = _flat(OmegaConf.to_container(cfg.model, resolve=True), "model.")
        changed = [k for k in sorted(saved.keys() | now.keys()) if saved.get(k) != now.get(k)]
        if not changed:
            raise
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise CheckpointError(
            f"ckpt_path={str(cfg.ckpt_path)!r} was trained with {changed[0]}="
            f"{saved.get(changed[0])}, this config has {now.get(changed[0])}{more}: a resumed "
            "run keeps its architecture (drop the model overrides, or leave out ckpt_path to "
            "start a new run)"
        ) from None
    epoch, max_epochs = ckpt.get("epoch", 0), cfg.trainer.max_epochs
    if max_epochs not in (None, -1) and epoch >= max_epochs:
        raise ConfigError(
            f"ckpt_path={str(cfg.ckpt_path)!r} stopped in epoch {epoch + 1}, past "
            f"trainer.max_epochs={max_epochs}: set trainer.max_epochs={epoch + 1} or more"
        )
    log.info(f"resuming from {path}: step {ckpt.get('global_step', 0)}, epoch {epoch + 1}")
    return path


def _flat(node, prefix: str = "") -> dict:
    if not isinstance(node, dict):
        return {prefix.rstrip("."): node}
    return {k: v for key, child in node.items() for k, v in _flat(child, f"{prefix}{key}.").items()}


def train_command() -> str:
    """How this run was started: the installed `vla-train`, or the checkout's script."""
    return "vla-train" if Path(sys.argv[0]).name == "vla-train" else "python scripts/train.py"


def resume_hint(saved_ckpt) -> str:
    """What to type to go on from `saved_ckpt`: the run folder alone when it holds its config."""
    run = run_folder_of(saved_ckpt)
    if run is not None:
        return f"resume with: {train_command()} ckpt_path={run}"
    return f"resume with: {train_command()} ckpt_path={saved_ckpt} and this run's overrides"


@contextlib.contextmanager
def resuming_quietly(ckpt_path):
    """Lightning's warnings that a resumed run sets off by design: its checkpoint folder is not
    empty, and may have moved (`hydra.run.dir` named another); and a run stopped mid-epoch
    restarts that epoch's batches, in the same shuffled order, for the steps the epoch has
    left (behavior cloning draws i.i.d. steps: the recipe does not depend on which ones)."""
    with warnings.catch_warnings():
        if ckpt_path is not None:
            for message in (
                "Checkpoint directory .* exists and is not empty",
                "The dirpath has changed",
                "You're resuming from a checkpoint that ended before the epoch ended",
            ):
                warnings.filterwarnings("ignore", message=message)
        yield
