"""train(cfg): collect demos if needed, train by behavior cloning, evaluate by rollouts."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import lightning as L
from hydra.utils import get_class
from lightning.pytorch.callbacks import LearningRateMonitor
from omegaconf import DictConfig

from vla.benchmark.flops import query_flops, training_flops
from vla.cli import log_file_into
from vla.config import check_group_choices, instantiate
from vla.data.datamodule import ReachDataModule
from vla.data.seeds import check_seeds
from vla.envs.config import env_kwargs_of
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError, TrainingInterrupted
from vla.eval.chunking import check_chunking
from vla.eval.stats import format_summary
from vla.pretrained.run import write_run_pretrained
from vla.runtime import configure_torch
from vla.training.callbacks import LastCheckpoint
from vla.training.module import build_module
from vla.training.offline import has_env, unevaluated, without_rollouts
from vla.training.outcome import final_evaluation, flat_hparams, learning_curve, why_stopped
from vla.training.resume import (
    check_resumable,
    record_resumed_config,
    requeued_checkpoint,
    resuming_quietly,
)
from vla.training.stop_at_step import StopAtStep
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
    log_file_into(out_dir)  # <run>/train.log, wherever paths.output_dir puts the run
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    # the data may decide values before anything is built (data=lerobot: the state and
    # action sizes, and whether there is an env to roll out in)
    get_class(cfg.data._target_).configure(cfg)
    rollouts = has_env(cfg)
    if not rollouts:
        without_rollouts(cfg)

    m = cfg.model
    kind = (m.head if "head" in m else m)._target_.rsplit(".", 1)[-1]
    log.info(
        f"building the policy: {kind}, d_model={m.d_model}, depth={m.depth}, "
        f"n_heads={m.n_heads}, {cfg.env.image_size} px images"
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
    stop_at_step = StopAtStep()  # Ctrl-C, SIGTERM: every rank stops at the same step
    callbacks.append(stop_at_step)
    env_kwargs = env_kwargs_of(cfg.env)
    ReachEnv(**env_kwargs)  # a task that cannot be built fails here, before any data is made
    module = build_module(
        cfg, policy, env_kwargs if rollouts else None
    )  # no env: nothing to evaluate it on
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
        logger.log_hyperparams(flat_hparams(cfg))
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
    finally:
        stop_at_step.restore()
    stop_at_step.stop_if_noted_since()
    trained = time.perf_counter()

    if not trainer.is_global_zero:
        return {}
    stopped = why_stopped(callbacks, trainer)
    log.info(stopped)
    if rollouts:
        metrics = final_evaluation(cfg, policy, env_kwargs, out_dir, callbacks, trainer)
        metrics["curve"] = learning_curve(callbacks, start_unix, metrics)
    else:
        metrics = unevaluated(cfg, policy, out_dir, callbacks, trainer)
    if hasattr(datamodule, "evaluate"):  # data with a held-out test of its own (VLM answers)
        metrics |= datamodule.evaluate(policy)
    metrics["stopped"] = stopped
    collected = fit_start + datamodule.prepare_seconds  # inside fit, before the first step
    metrics["timings"] = dict(
        collect_s=collected - start,
        train_s=trained - collected,
        eval_s=time.perf_counter() - trained,
        total_s=time.perf_counter() - start,
    )
    # the weights the final evaluation measured, shareable without Lightning (vla.pretrained)
    metrics["pretrained_model"] = str(write_run_pretrained(cfg, module, metrics, out_dir))
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    smoke = " (debug=fast: a smoke run of a few steps, not a trained policy)"
    if rollouts:
        result = (
            f"success rate {format_summary(metrics)} test episodes (95% interval; mean "
            f"{metrics['mean_steps']:.1f} steps)"
        )
    else:
        val = metrics["val_loss"]
        result = f"validation loss {'not measured' if val is None else f'{val:.4f}'}"
    log.info(
        f"{result} | wall time {metrics['timings']['total_s']:.0f}s"
        f"{smoke if cfg.get('smoke_test') else ''}"
    )
    log.info(f"best checkpoint: {metrics['best_checkpoint']}")
    log.info(f"last checkpoint: {metrics['last_checkpoint']}")
    kind = type(module.policy).__name__
    log.info(f"pretrained folder: {metrics['pretrained_model']} ({kind}.from_pretrained)")
    log.info(f"run directory: {out_dir} (metrics.json, tensorboard/, train.log)")
    return metrics


def stopped_training(stop, callbacks, trainer, out_dir: Path) -> TrainingInterrupted:
    """The error that ends a stopped run: the step, and how to resume."""
    last = next((c for c in callbacks if isinstance(c, LastCheckpoint)), None)
    folder = Path(last.path).parent if last else out_dir / "checkpoints"
    saved = last.saved_on_interrupt if last else None
    message = stop_message(trainer.global_step, saved, folder, last and last.save_failed)
    return TrainingInterrupted(message, signal_of(stop), trainer.is_global_zero)
