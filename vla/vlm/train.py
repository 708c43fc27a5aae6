"""`train.py experiment=vlm` (stage 1) and `experiment=rt2` (stage 2): one loop for both.

    stage 1  corpus (data/vlm-*) ─ MixedBatches (all corpus) ─ VLMModule ─> answers per family
    stage 2  demonstrations + corpus ─ MixedBatches (data.cotrain_ratio corpus) ─ VLMModule
             ─> rollouts (the final evaluation, and suite levels) + answers per family

`model.init_from=<run folder or .ckpt>` starts from a stage-1 run's weights (the normaliser
and action bins then come from this run's demonstrations); null trains from scratch. The run
folder holds checkpoints/last.ckpt (with the `vla` payload every checkpoint carries),
TensorBoard and metrics.json.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import lightning as L
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from vla.checkpoint import load_state, read_checkpoint
from vla.config import instantiate
from vla.data.prepare import ensure_demos
from vla.envs.config import env_kwargs_of
from vla.envs.grammar import PAIRS
from vla.errors import ConfigError
from vla.eval.rollout import rollout
from vla.eval.stats import format_summary
from vla.eval.suite import run_suite, select_levels
from vla.runtime import configure_torch
from vla.training.callbacks import LastCheckpoint
from vla.training.sigterm import SigtermAtStep
from vla.vlm.corpus import CorpusConfig, ensure_corpus
from vla.vlm.data import CorpusTensors, DemoTensors, MixedBatches, fixed_batches
from vla.vlm.module import VLMModule, score_answers
from vla.vlm.scoring import per_family

log = logging.getLogger(__name__)
FRESH = ("normalizer.", "action_bins.")  # set from this run's data, never from init_from
KEPT = ("progress", "lr_monitor")  # of conf/callbacks: the others follow rollouts or swap weights


def corpus_config(node) -> CorpusConfig:
    plain = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
    return CorpusConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in plain.items()})


def load_init(policy, path) -> str:
    """Copies a stage-1 checkpoint's weights (all but FRESH) into `policy`."""
    path = Path(path)
    path = path / "checkpoints" / "last.ckpt" if path.is_dir() else path
    state = {
        k.removeprefix("policy."): v
        for k, v in read_checkpoint(path)["state_dict"].items()
        if k.startswith("policy.") and not k.removeprefix("policy.").startswith(FRESH)
    }
    state |= {k: v for k, v in policy.state_dict().items() if k.startswith(FRESH)}
    load_state(policy, state, f"model.init_from={path}: weights do not fit this VLMPolicy")
    return str(path)


def answer_metrics(policy, tensors: CorpusTensors, held_out_pairs, batch_size=256) -> dict:
    """Per-family accuracy (Wilson 95%) on every example of `tensors`, and on the ones whose
    question or answer names one of `held_out_pairs` (what the control corpus never names)."""
    families, hits = [], []
    for batch in fixed_batches(tensors, torch.arange(len(tensors)), batch_size):
        f, h = score_answers(policy, batch)
        families, hits = families + f, hits + h
    names = {" ".join(PAIRS[p]) for p in held_out_pairs}
    questions = policy.tokenizer.decode(tensors.tokens)
    held = np.array(
        [
            any(n in q or n in a for n in names)
            for q, a in zip(questions, tensors.answers, strict=True)
        ]
    )
    held_fams = [f for f, k in zip(families, held, strict=True) if k]
    held_hits = [h for h, k in zip(hits, held, strict=True) if k]
    return dict(all=per_family(families, hits), held_out_pairs=per_family(held_fams, held_hits))


def train_vlm(cfg: DictConfig) -> dict:
    """Trains the VLM (stage 1) or the VLA from it (stage 2); returns metrics.json's dict."""
    start = time.perf_counter()
    configure_torch(cfg.get("threads"))
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    d = cfg.data
    if not 0.0 <= d.cotrain_ratio <= 1.0:
        raise ConfigError(f"data.cotrain_ratio={d.cotrain_ratio} must be in [0, 1]")
    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    init_from = model_cfg.pop("init_from", None)
    policy = instantiate(model_cfg)
    if init_from is not None:
        log.info(f"initialised from {load_init(policy, init_from)}")
    tok = policy.tokenizer

    t = time.perf_counter()
    corpus = ensure_corpus(d.dir, corpus_config(d.corpus))
    held_out = ensure_corpus(d.dir, corpus_config(d.eval_corpus))
    corpus_s = time.perf_counter() - t
    log.info(f"corpus: {corpus['manifest']['per_family']} ({corpus_s:.1f}s)")
    train_c, eval_c = CorpusTensors(corpus, tok), CorpusTensors(held_out, tok)
    val_idx = torch.arange(min(d.val_examples, len(eval_c)))
    val = fixed_batches(eval_c, val_idx, 256)

    demos, env_kwargs, demo_idx = None, None, None
    if d.actions:
        env_kwargs = env_kwargs_of(cfg.env)
        raw = ensure_demos(env_kwargs, d.dir, d.num_episodes, d.seed, d.noise_std)
        first_val = int(raw.episode_start[raw.num_episodes - d.val_episodes])
        action = torch.from_numpy(np.array(raw.action[:first_val]))
        state = torch.from_numpy(np.array(raw.state[:first_val]))
        policy.action_bins.fit(action)  # OpenVLA: the 1st-99th percentile of training actions
        low, high = action.min(0).values, action.max(0).values
        policy.set_normalization(state.mean(0), state.std(0), low, high)
        demos = DemoTensors(raw, tok, policy.action_bins, policy.chunk_size)
        demo_idx = torch.arange(first_val)
        val_steps = torch.arange(first_val, len(demos))[:: max(1, (len(demos) - first_val) // 512)]
        val += fixed_batches(demos, val_steps, 256)
    use_corpus = demos is None or d.cotrain_ratio > 0
    batches = MixedBatches(
        train_c if use_corpus else None, torch.arange(len(train_c)), demos, demo_idx,
        d.batch_size, d.cotrain_ratio, d.steps_per_epoch, cfg.seed,
    )  # fmt: skip
    optimizer, scheduler = instantiate(cfg.optimizer), instantiate(cfg.scheduler)
    module = VLMModule(policy, optimizer, scheduler, model_cfg, env_kwargs)
    loggers = [instantiate(c) for c in (cfg.get("logger") or {}).values() if c is not None]
    callbacks = [LastCheckpoint(str(out_dir / "checkpoints"), 200), SigtermAtStep()]
    callbacks += [
        instantiate(c) for k, c in (cfg.get("callbacks") or {}).items() if k in KEPT and c
    ]
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    n_params = sum(p.numel() for p in policy.parameters())
    log.info(
        f"VLMPolicy: {n_params / 1e6:.2f}M parameters, {policy.num_tokens()} tokens at most, "
        f"{tok.vocab_size} tokens in the vocabulary; batches of {d.batch_size} "
        f"({batches.n_corpus} corpus, {batches.n_demo} demonstration), "
        f"{cfg.trainer.max_epochs} x {d.steps_per_epoch} steps; writing to {out_dir}"
    )
    fit_start = time.perf_counter()
    trainer.fit(module, train_dataloaders=batches, val_dataloaders=val)
    trained = time.perf_counter()

    metrics = dict(
        stage="rt2" if d.actions else "vlm", init_from=init_from,
        cotrain_ratio=d.cotrain_ratio if d.actions else None, seed=cfg.seed,
        num_parameters=n_params, global_step=trainer.global_step,
        corpus=corpus["manifest"] | {"path": str(Path(d.dir))},
        eval_corpus=dict(config=held_out["manifest"]["config"], num_examples=len(eval_c)),
        last_checkpoint=str(out_dir / "checkpoints" / "last.ckpt"),
    )  # fmt: skip
    metrics["answers"] = answer_metrics(policy, eval_c, cfg.env.held_out_pairs)
    for f, v in metrics["answers"]["all"].items():
        log.info(f"answers on held-out scenes, {f:<10} {v['accuracy']:.1%} of {v.get('n', '')}")
    if d.actions:
        kw = dict(
            num_episodes=cfg.eval.num_episodes, seed=cfg.eval.seed, num_envs=cfg.eval.num_envs
        )
        result = rollout(policy, env_kwargs, **kw)
        metrics |= result.metrics() | dict(episodes=result.episodes())
        log.info(f"success rate {format_summary(metrics)} test episodes")
        if cfg.get("suite") and cfg.suite.get("only"):
            levels = select_levels(cfg.suite.levels, cfg.suite.only)
            metrics["suite"] = run_suite(policy, env_kwargs, levels, out_dir / "suite", **kw)
    metrics["timings"] = dict(
        corpus_s=corpus_s, setup_s=fit_start - start, train_s=trained - fit_start,
        eval_s=time.perf_counter() - trained, total_s=time.perf_counter() - start,
    )  # fmt: skip
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, default=str))
    log.info(f"wall time {metrics['timings']['total_s']:.0f}s; run directory: {out_dir}")
    return metrics
