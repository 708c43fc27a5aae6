"""evaluate(cfg): rollouts of a checkpoint's policy; a table, metrics.json and GIFs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from vla.checkpoint import load_policy
from vla.data.seeds import check_seeds
from vla.envs.instructions import PAIRS
from vla.errors import ConfigError
from vla.eval.rollout import ABLATIONS, check_ablations, rollout
from vla.eval.run_folder import resolve_ckpt_path
from vla.eval.runner import check_chunking
from vla.eval.video import annotate, save_gif, save_mp4
from vla.runtime import configure_torch

log = logging.getLogger(__name__)


def evaluate(cfg: DictConfig) -> dict:
    """Evaluates `cfg.ckpt_path`; returns the metrics also written to <run>/metrics.json."""
    n, seed = cfg.eval.num_episodes, cfg.eval.seed
    if n is None or n <= 0:
        raise ConfigError(f"eval.num_episodes={n} must be > 0")
    check_seeds("test", seed, n, "eval.seed")
    ablate = check_ablations(list(cfg.eval.ablate))
    configure_torch(cfg.get("threads"))
    ckpt_path = resolve_ckpt_path(cfg.ckpt_path)
    policy, env_kwargs = load_policy(ckpt_path)
    env_kwargs.update(OmegaConf.to_container(cfg.env, resolve=True) or {})
    env_kwargs = split_env(env_kwargs, cfg.eval.get("split", "all"))
    coeff = cfg.eval.get("temporal_ensemble_coeff")
    n_action_steps = check_chunking(policy, cfg.eval.get("n_action_steps"), coeff)
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    runs = {"+".join(ablate) or "none": ablate}
    if cfg.eval.get("ablation_table"):
        runs = {"none": ()} | {a: (a,) for a in ABLATIONS}
    results = {}
    for name, ablation in runs.items():
        record = cfg.eval.record if name == next(iter(runs)) else 0
        result = rollout(
            policy,
            env_kwargs,
            n,
            seed,
            num_envs=cfg.eval.num_envs,
            record=record,
            ablate=ablation,
            progress=True,
            n_action_steps=n_action_steps,
            temporal_ensemble_coeff=coeff,
        )
        results[name] = result
    first_name, first = next(iter(results.items()))
    metrics = first.metrics() | {
        "ckpt_path": str(ckpt_path),
        "ablate": list(ablate),
        "split": cfg.eval.get("split", "all"),
        "env": env_kwargs,
        "seed": seed,
        "chunk_size": policy.chunk_size,
        "n_action_steps": n_action_steps,
        "temporal_ensemble_coeff": coeff,
    }
    if len(results) > 1:
        metrics["ablations"] = {k: r.metrics()["success_rate"] for k, r in results.items()}
    gifs, mp4s = [], []
    for i, frames in enumerate(first.frames):
        ok = bool(first.success[i])
        frames = annotate(frames, first.instructions[i], ok)
        name = out_dir / f"rollout_{i:02d}_{'success' if ok else 'failure'}"
        gifs.append(str(save_gif(frames, name.with_suffix(".gif"))))
        mp4s.append(str(save_mp4(frames, name.with_suffix(".mp4"))))
    metrics["gifs"], metrics["videos"] = gifs, mp4s
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    for line in format_table(metrics, results).splitlines():
        log.info(line)
    log.info(f"metrics.json and {len(gifs)} rollouts as GIF and MP4 written to {out_dir}")
    return metrics


def split_env(env_kwargs: dict, split: str) -> dict:
    """The env for an evaluation split: "all" as trained, or "held_out": instruct only the
    colour+shape pairs the training demonstrations never instructed."""
    if split == "all":
        return env_kwargs
    if split != "held_out":
        raise ConfigError(f"eval.split={split!r} must be 'all' or 'held_out'")
    trained = env_kwargs.get("instructed_pairs")
    if trained is None:
        raise ConfigError(
            "eval.split=held_out needs a checkpoint trained with env.instructed_pairs set "
            "(e.g. experiment=held_out); this one was trained on every pair"
        )
    held_out = [p for p in range(len(PAIRS)) if p not in set(trained)]
    return {**env_kwargs, "instructed_pairs": held_out}


def format_table(metrics: dict, results: dict) -> str:
    rows = [
        ("episodes", f"{metrics['num_episodes']}"),
        ("success rate", f"{metrics['success_rate']:.1%}"),
        ("mean steps", f"{metrics['mean_steps']:.1f}"),
        ("mean queries", f"{metrics['mean_queries']:.1f}"),
    ]
    rows += [(f"  colour {k}", f"{v:.1%}") for k, v in metrics["success_by_colour"].items()]
    rows += [(f"  shape {k}", f"{v:.1%}") for k, v in metrics["success_by_shape"].items()]
    if len(results) > 1:
        rows += [(f"ablate {k}", f"{r.metrics()['success_rate']:.1%}") for k, r in results.items()]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v:>8}" for k, v in rows)
