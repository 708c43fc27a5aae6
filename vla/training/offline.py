"""Training on data with no env to roll out in (a LeRobotDataset of another task,
`data.rollouts=false`): no rollouts during training, the best checkpoint and early stopping
on validation loss, and no final evaluation. Logs, checkpoints, TensorBoard, resume and
metrics.json are as in any run."""

from __future__ import annotations

import logging
from pathlib import Path

from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import TensorBoardLogger
from omegaconf import DictConfig

from vla.errors import ConfigError
from vla.training.outcome import flat_hparams, run_metrics

log = logging.getLogger(__name__)

VAL_LOSS = "val/loss"
ROLLOUT_METRIC = "eval/success_rate"


def has_env(cfg: DictConfig) -> bool:
    """Whether the policy can be rolled out: `data.rollouts` where the data config has it
    (data=lerobot decides it from the dataset), else true."""
    return bool(cfg.data.get("rollouts", True))


def without_rollouts(cfg: DictConfig) -> None:
    """The callbacks of a run without an env, in `cfg.callbacks`: no rollout evaluation, and
    the callbacks that follow rollout success (the best checkpoint, early stopping) follow
    the validation loss instead (lower is better, no threshold)."""
    if cfg.data.val_episodes < 1:
        raise ConfigError(
            "data.val_episodes=0: without an env to roll out in, checkpoints are chosen on "
            "validation loss, so some episodes must be held out"
        )
    callbacks = cfg.callbacks
    if callbacks.get("rollout_eval") is not None:
        callbacks.rollout_eval = None
    best = callbacks.get("best_checkpoint")
    if best is not None and best.get("monitor") == ROLLOUT_METRIC:
        best.monitor, best.mode = VAL_LOSS, "min"
        best.filename = "best-step{step:05d}-val_loss{val/loss:.4f}"
    stop = callbacks.get("early_stopping")
    if stop is not None and stop.get("monitor") == ROLLOUT_METRIC:
        stop.monitor, stop.mode, stop.stopping_threshold = VAL_LOSS, "min", None


def unevaluated(cfg, policy, out_dir: Path, callbacks, trainer) -> dict:
    """The metrics of a run without an env: the final evaluation is skipped (one log line
    says why), the validation loss takes its place in metrics.json and TensorBoard."""
    log.info(
        "final evaluation skipped: the data has no env to roll out in (data.rollouts=false); "
        "the best checkpoint is the one of lowest validation loss"
    )
    val_loss = trainer.callback_metrics.get(VAL_LOSS)
    metrics = run_metrics(policy, out_dir, callbacks, trainer) | dict(
        evaluated=False,
        val_loss=None if val_loss is None else float(val_loss),
        best_val_loss=best_score(callbacks),
    )
    final = {"final/val_loss": metrics["val_loss"]} if val_loss is not None else {}
    for logger in trainer.loggers:
        if isinstance(logger, TensorBoardLogger):  # the HPARAMS tab's metric, as with rollouts
            logger.log_hyperparams(flat_hparams(cfg), final, trainer.global_step)
        elif final:
            logger.log_metrics(final, trainer.global_step)
        logger.finalize("success")
    return metrics


def best_score(callbacks) -> float | None:
    """The lowest validation loss a best-checkpoint callback saw."""
    for c in callbacks:
        if (
            isinstance(c, ModelCheckpoint)
            and c.monitor == VAL_LOSS
            and c.best_model_score is not None
        ):
            return float(c.best_model_score)
    return None
