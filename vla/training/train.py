"""train(cfg): collect demos if needed, train by behavior cloning, evaluate by rollouts."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor
from lightning.pytorch.callbacks.early_stopping import EarlyStoppingReason
from lightning.pytorch.loggers import TensorBoardLogger
from omegaconf import DictConfig, OmegaConf

from vla.config import check_group_choices, instantiate
from vla.data.datamodule import ReachDataModule
from vla.data.seeds import check_seeds
from vla.envs.config import env_kwargs_of
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError, TrainingInterrupted
from vla.eval.rollout import rollout
from vla.eval.stats import format_summary, rate_summary
from vla.models.chunking import check_chunking
from vla.models.flops import query_flops, training_flops
from vla.runtime import configure_torch
from vla.training.callbacks import LastCheckpoint, RolloutEval
from vla.training.module import build_module
from vla.training.resume import (
    check_resumable,
    record_resumed_config,
    requeued_checkpoint,
    resuming_quietly,
)
from vla.training.stopping import signal_of, stop_message

log = logging.getLogger(__name__)


def check_config(cfg: DictConfig) -> None:
    """Fails fast, before any expensive work, on values that cannot work."""
    check_group_choices(cfg)
    positive = {
        "data.batch_size": cfg.data.batch_size,
        "data.num_episodes": cfg.data.num_episodes,
        "optimizer.lr": cfg.optimizer.lr,
        "trainer.max_epochs": cfg.trainer.max_epochs,
        "eval.num_episodes": cfg.eval.num_episodes,
    }
    for key, value in positive.items():
        if value is None or value <= 0:
            raise ConfigError(f"{key}={value} must be > 0")
    check_seeds("test", cfg.eval.seed, cfg.eval.num_episodes, "eval.seed")


def train(cfg: DictConfig) -> dict:
    """Trains a policy as `cfg` says; returns the final metrics (also in <run>/metrics.json)."""
    start, start_unix = time.perf_counter(), time.time()
    check_config(cfg)
    configure_torch(cfg.get("threads"))
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    L.seed_everything(cfg.seed, workers=True, verbose=False)

    m = cfg.model
    log.info(
        f"building the policy: {m.head._target_.rsplit('.', 1)[-1]}, d_model={m.d_model}, "
        f"depth={m.depth}, n_heads={m.n_heads}, {cfg.env.image_size} px images"
    )
    policy = instantiate(cfg.model)
    check_chunking(policy, cfg.eval.n_action_steps, cfg.eval.temporal_ensemble_coeff)
    ckpt_path = None
    if requeued := requeued_checkpoint(cfg):
        log.info(
            f"SLURM requeued this job (SLURM_RESTART_COUNT={os.environ['SLURM_RESTART_COUNT']})"
        )
        cfg.ckpt_path = str(requeued)
    if cfg.ckpt_path is not None:  # refuse a bad checkpoint before collecting any data
        ckpt_path = check_resumable(cfg, policy)
    # callbacks check their own values (rollout seeds among them) before any data is made
    callbacks = [instantiate(c) for c in cfg.callbacks.values() if c is not None]
    env_kwargs = env_kwargs_of(cfg.env)
    ReachEnv(**env_kwargs)  # a task that cannot be built fails here, before any data is made
    module = build_module(cfg, policy, env_kwargs)
    # the demonstrations are built (or loaded) inside `fit`, on one process, the others
    # waiting (Lightning's prepare_data); `module.setup` then normalises by their statistics
    datamodule: ReachDataModule = instantiate(
        cfg.data,
        env=env_kwargs,
        tokenize=policy.tokenizer.encode,
        shuffle_seed=cfg.seed,
        chunk_size=policy.chunk_size,  # batches hold the chunks the head predicts
        target=module.uses_target,
        objects=module.uses_objects,
    )
    if cfg.get("compile"):
        policy.compile()  # in place: parameter names (and checkpoints) stay the same
    # logger=csv, or several: 'logger=[tensorboard,csv]' (each sits under logger.<name>)
    loggers = [instantiate(c) for c in (cfg.get("logger") or {}).values() if c is not None]
    if not loggers:  # nothing to log learning rates to
        callbacks = [c for c in callbacks if not isinstance(c, LearningRateMonitor)]
    trainer: L.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    for logger in loggers:  # TensorBoard: only hparams.yaml now, HPARAMS gets its metric later
        logger.log_hyperparams(_flat_hparams(cfg))
    num_params = sum(p.numel() for p in policy.parameters())
    train_gflop, query_gflop = training_flops(policy) / 1e9, query_flops(policy) / 1e9
    query = f", {query_gflop:.3f} per query" if query_gflop != train_gflop else ""
    log.info(
        f"policy: {num_params / 1e6:.2f}M parameters, {policy.num_tokens()} tokens with an "
        f"instruction of {policy.tokenizer.max_len} words (fewer for shorter ones), "
        f"{train_gflop:.3f} GFLOP per sample forward (x3 to train){query}"
    )
    log.info(
        f"training: max_epochs={cfg.trainer.max_epochs}, batch_size={cfg.data.batch_size}, "
        f"lr={cfg.optimizer.lr}, seed={cfg.seed}, accelerator={cfg.trainer.accelerator}, "
        f"devices={cfg.trainer.devices}; writing to {out_dir}"
    )

    if ckpt_path is not None:  # every check has passed: the run goes on with this config
        record_resumed_config(cfg, out_dir)
    fit_start = time.perf_counter()
    try:
        with resuming_quietly(ckpt_path):
            trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
    except SystemExit as stop:  # Ctrl-C or SIGTERM: LastCheckpoint has saved by then
        raise stopped_training(stop, callbacks, trainer, out_dir) from None
    trained = time.perf_counter()

    if not trainer.is_global_zero:
        return {}
    stopped = why_stopped(callbacks, trainer)
    log.info(stopped)
    metrics = final_evaluation(cfg, policy, env_kwargs, out_dir, callbacks, trainer)
    metrics["stopped"] = stopped
    metrics["curve"] = learning_curve(callbacks, start_unix, metrics)
    collected = fit_start + datamodule.prepare_seconds  # inside fit, before the first step
    metrics["timings"] = dict(
        collect_s=collected - start,
        train_s=trained - collected,
        eval_s=time.perf_counter() - trained,
        total_s=time.perf_counter() - start,
    )
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    smoke = " (debug=fast: a smoke run of a few steps, not a trained policy)"
    rate = format_summary(metrics)
    log.info(
        f"success rate {rate} test episodes (95% interval; mean {metrics['mean_steps']:.1f} "
        f"steps) | wall time {metrics['timings']['total_s']:.0f}s"
        f"{smoke if cfg.get('smoke_test') else ''}"
    )
    log.info(f"best checkpoint: {metrics['best_checkpoint']}")
    log.info(f"last checkpoint: {metrics['last_checkpoint']}")
    log.info(f"run directory: {out_dir} (metrics.json, tensorboard/, train.log)")
    return metrics


def stopped_training(stop, callbacks, trainer, out_dir: Path) -> TrainingInterrupted:
    """The error that ends a stopped run: the step, and how to resume."""
    last = next((c for c in callbacks if isinstance(c, LastCheckpoint)), None)
    folder = Path(last.path).parent if last else out_dir / "checkpoints"
    saved = last.saved_on_interrupt if last else None
    message = stop_message(trainer.global_step, saved, folder, last and last.save_failed)
    return TrainingInterrupted(message, signal_of(stop), trainer.is_global_zero)


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
    metrics = result.metrics() | dict(
        num_parameters=sum(p.numel() for p in policy.parameters()),
        global_step=trainer.global_step,
        last_checkpoint=str(out_dir / "checkpoints" / "last.ckpt"),
        best_checkpoint=_best_checkpoint(callbacks),
    )
    final = {"final/success_rate": metrics["success_rate"]}
    for logger in trainer.loggers:
        if isinstance(logger, TensorBoardLogger):  # the scalar, and the HPARAMS tab's metric
            logger.log_hyperparams(_flat_hparams(cfg), final, trainer.global_step)
        else:
            logger.log_metrics(final, trainer.global_step)
        logger.finalize("success")
    return metrics


def why_stopped(callbacks, trainer) -> str:
    """One line: at which step training ended, and why."""
    at = f"training stopped at step {trainer.global_step}"
    stopper = next((c for c in callbacks if isinstance(c, EarlyStopping)), None)
    reason = stopper.stopping_reason if stopper else EarlyStoppingReason.NOT_STOPPED
    if reason == EarlyStoppingReason.STOPPING_THRESHOLD:
        success = float(trainer.callback_metrics[stopper.monitor])
        return (
            f"{at}: selection success {success:.1%} > {stopper.stopping_threshold:.1%} "
            "(callbacks.early_stopping.stopping_threshold)"
        )
    if reason == EarlyStoppingReason.PATIENCE_EXHAUSTED:
        return (
            f"{at}: no better selection success in {stopper.wait_count} evaluations "
            f"(best {float(stopper.best_score):.1%}; callbacks.early_stopping.patience)"
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


def _best_checkpoint(callbacks) -> str | None:
    for c in callbacks:
        if isinstance(c, L.pytorch.callbacks.ModelCheckpoint) and c.monitor and c.best_model_path:
            return c.best_model_path
    return None


def _flat_hparams(cfg: DictConfig) -> dict:
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
