"""How a training run ends: the final evaluation, why training stopped, the learning curve,
and the hyperparameters TensorBoard compares runs by."""

from __future__ import annotations

import time
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import EarlyStopping
from lightning.pytorch.callbacks.early_stopping import EarlyStoppingReason
from lightning.pytorch.loggers import TensorBoardLogger
from omegaconf import DictConfig, OmegaConf

from vla.eval.rollout import rollout
from vla.eval.stats import rate_summary
from vla.training.callbacks import RolloutEval


def run_metrics(policy, out_dir: Path, callbacks, trainer) -> dict:
    """What every run reports, evaluated or not."""
    return dict(
        num_parameters=sum(p.numel() for p in policy.parameters()),
        global_step=trainer.global_step,
        last_checkpoint=str(out_dir / "checkpoints" / "last.ckpt"),
        best_checkpoint=best_checkpoint(callbacks),
    )


def final_evaluation(cfg, policy, env_kwargs, out_dir: Path, callbacks, trainer) -> dict:
    """Rollouts of the final weights; their success rate also goes to TensorBoard."""
    result = rollout(
        policy,
        env_kwargs,
        cfg.eval.num_episodes,
        cfg.eval.seed,
        num_envs=cfg.eval.num_envs,
        progress=True,
        n_action_steps=cfg.eval.n_action_steps,
        temporal_ensemble_coeff=cfg.eval.temporal_ensemble_coeff,
    )
    metrics = result.metrics() | run_metrics(policy, out_dir, callbacks, trainer)
    final = {"final/success_rate": metrics["success_rate"]}
    for logger in trainer.loggers:
        if isinstance(logger, TensorBoardLogger):  # the scalar, and the HPARAMS tab's metric
            logger.log_hyperparams(flat_hparams(cfg), final, trainer.global_step)
        else:
            logger.log_metrics(final, trainer.global_step)
        logger.finalize("success")
    return metrics


def why_stopped(callbacks, trainer) -> str:
    """One line: at which step training ended, and why."""
    at = f"training stopped at step {trainer.global_step}"
    stopper = next((c for c in callbacks if isinstance(c, EarlyStopping)), None)
    reason = stopper.stopping_reason if stopper else EarlyStoppingReason.NOT_STOPPED
    if stopper is not None and stopper.monitor == "val/loss":
        what, value = "validation loss", lambda v: f"{float(v):.4f}"
    else:
        what, value = "selection success", lambda v: f"{float(v):.1%}"
    if reason == EarlyStoppingReason.STOPPING_THRESHOLD:
        now = trainer.callback_metrics[stopper.monitor]
        beyond = ">" if stopper.mode == "max" else "<"
        return (
            f"{at}: {what} {value(now)} {beyond} {value(stopper.stopping_threshold)} "
            "(callbacks.early_stopping.stopping_threshold)"
        )
    if reason == EarlyStoppingReason.PATIENCE_EXHAUSTED:
        return (
            f"{at}: no better {what} in {stopper.wait_count} evaluations "
            f"(best {value(stopper.best_score)}; callbacks.early_stopping.patience)"
        )
    if reason != EarlyStoppingReason.NOT_STOPPED:
        return f"{at}: {stopper.stopping_reason_message}"
    limit = "max_steps" if trainer.max_steps > 0 else "max_epochs"
    return f"{at}: the end of the schedule (trainer.{limit}={getattr(trainer, limit)})"


def learning_curve(callbacks, start_unix: float, final: dict) -> list[dict]:
    """Rollout success against optimisation steps and seconds since `train` began (demo
    collection included): the training-time evaluations, then the final one."""
    history = next((c.history for c in callbacks if isinstance(c, RolloutEval)), [])
    curve = [
        dict(
            step=h["step"],
            seconds=h["time"] - start_unix,
            **rate_summary(round(h["success_rate"] * h["num_episodes"]), h["num_episodes"]),
        )
        for h in history
    ]
    end = dict(step=final["global_step"], seconds=time.time() - start_unix, final=True)
    return curve + [end | {k: final[k] for k in ("success_rate", "num_episodes", "ci95")}]


def best_checkpoint(callbacks) -> str | None:
    for c in callbacks:
        if isinstance(c, L.pytorch.callbacks.ModelCheckpoint) and c.monitor and c.best_model_path:
            return c.best_model_path
    return None


def flat_hparams(cfg: DictConfig) -> dict:
    """Scalar hyperparameters worth comparing across runs, for TensorBoard's HPARAMS tab."""
    flat = {}
    for group in ("model", "bc", "data", "env", "optimizer", "trainer"):
        for k, v in OmegaConf.to_container(cfg[group], resolve=True).items():
            if isinstance(v, int | float | str | bool) and not k.startswith("_"):
                flat[f"{group}.{k}"] = v
            elif group == "model" and (v is None or "_target_" in v):
                flat[f"model.{k}"] = v["_target_"].rsplit(".", 1)[-1] if v else "none"  # a part
    flat["seed"] = cfg.seed
    return flat
