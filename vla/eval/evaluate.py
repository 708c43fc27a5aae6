"""evaluate(cfg): rollouts of a checkpoint's policy; a table, metrics.json and GIFs; or, with
`suite=levels`, the generalisation suite (`vla.eval.suite`); with `compare_to=<checkpoint>`,
both checkpoints on the same episodes, paired (`vla.eval.compare`); with `eval.question`, a
VLM's answers about the same scenes (`vla.vlm.ask`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from omegaconf import DictConfig

from vla.checkpoint import load_policy
from vla.data.seeds import check_seeds
from vla.envs.config import env_changes
from vla.envs.grammar import GrammarError, parse, split_words
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.eval.chunking import check_chunking
from vla.eval.compare import check_same_env, compare
from vla.eval.rollout import ABLATIONS, check_ablations, rollout
from vla.eval.stats import format_summary
from vla.eval.suite import applicable, run_suite, select_levels
from vla.eval.video import annotate, save_gif, save_mp4
from vla.run_folder import resolve_ckpt_path
from vla.runtime import configure_torch

log = logging.getLogger(__name__)


def evaluate(cfg: DictConfig) -> dict:
    """Evaluates `cfg.ckpt_path`; returns the metrics also written to <run>/metrics.json (or,
    with `suite=levels`, the suite's summary, also in <run>/suite.json; with `compare_to`,
    the paired comparison, also in <run>/compare.json)."""
    n, seed = cfg.eval.num_episodes, cfg.eval.seed
    if n is None or n <= 0:
        raise ConfigError(f"eval.num_episodes={n} must be > 0")
    check_seeds("test", seed, n, "eval.seed")
    ablate = check_ablations(list(cfg.eval.ablate))
    suite = cfg.get("suite")
    levels = select_levels(suite.levels, suite.get("only")) if suite else None
    configure_torch(cfg.get("threads"))
    ckpt_path = resolve_ckpt_path(cfg.ckpt_path)
    question = cfg.eval.get("question")
    policy, env_kwargs = load_policy(ckpt_path, need_env=not question)
    env_kwargs.update(env_changes(cfg.env))
    ReachEnv(**env_kwargs)  # a bad env value fails here, before any rollout
    coeff = cfg.eval.get("temporal_ensemble_coeff")
    n_action_steps = check_chunking(policy, cfg.eval.get("n_action_steps"), coeff)
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    chunking = dict(n_action_steps=n_action_steps, temporal_ensemble_coeff=coeff)
    if question:  # a VLM answers instead of acting (vla.vlm.ask)
        from vla.vlm.ask import ask_scenes

        return ask_scenes(policy, env_kwargs, question, n, seed, cfg.eval.record, out_dir)
    typed = cfg.eval.get("instruction")
    options = {"instruction": check_instruction(policy, typed)} if typed else None
    if cfg.get("compare_to"):
        other_path = resolve_ckpt_path(cfg.compare_to)
        other, other_env = load_policy(other_path)
        check_same_env(env_kwargs, {**other_env, **env_changes(cfg.env)})
        other_steps = check_chunking(other, cfg.eval.get("n_action_steps"), coeff)
        other_chunking = dict(n_action_steps=other_steps, temporal_ensemble_coeff=coeff)
        envs = [("env", env_kwargs)]
        if levels is not None:
            envs = [(level.name, env) for level, env in applicable(env_kwargs, levels)]
        return compare(
            (str(ckpt_path), policy, chunking),
            (str(other_path), other, other_chunking),
            envs,
            out_dir,
            num_episodes=n,
            seed=seed,
            num_envs=cfg.eval.num_envs,
            ablate=ablate,
            options=None if levels else options,
        )
    if levels is not None:
        return run_suite(
            policy,
            env_kwargs,
            levels,
            out_dir,
            num_episodes=n,
            seed=seed,
            num_envs=cfg.eval.num_envs,
            **chunking,
        )
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
            options=options,
            **chunking,
        )
        results[name] = result
    summaries = {name: result.metrics() for name, result in results.items()}  # once each
    first_name, first = next(iter(results.items()))
    metrics = summaries[first_name] | {
        "ckpt_path": str(ckpt_path),
        "ablate": list(ablate),
        "instruction": typed,
        "env": env_kwargs,
        "seed": seed,
        "chunk_size": policy.chunk_size,
        "n_action_steps": n_action_steps,
        "temporal_ensemble_coeff": coeff,
    }
    if len(results) > 1:
        metrics["ablations"] = {
            k: {key: m[key] for key in ("success_rate", "ci95", "num_episodes")}
            for k, m in summaries.items()
        }
    if typed and "typed" in first.families:  # nothing to reach: no success to report
        metrics["success_rate"] = metrics["ci95"] = None
    gifs, mp4s = [], []
    for i, frames in enumerate(first.frames):
        ok = bool(first.success[i])
        frames = annotate(frames, first.instructions[i], ok)
        name = out_dir / f"rollout_{i:02d}_{'success' if ok else 'failure'}"
        gifs.append(str(save_gif(frames, name.with_suffix(".gif"))))
        mp4s.append(str(save_mp4(frames, name.with_suffix(".mp4"))))
    metrics["gifs"], metrics["videos"] = gifs, mp4s
    metrics["episodes"] = first.episodes()
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    for line in format_table(metrics).splitlines():
        log.info(line)
    log.info(f"metrics.json and {len(gifs)} rollouts as GIF and MP4 written to {out_dir}")
    return metrics


def check_instruction(policy, text: str) -> str:
    """A typed instruction for `eval.instruction`: says in one line which of its words the
    policy has never seen (they are read as <unk>) and whether the task's grammar reads it (if
    not, its episodes have nothing to reach and no success rate)."""
    vocab = set(policy.tokenizer.vocab)
    unknown = [w for w in split_words(text) if w not in vocab]
    if unknown:
        log.info(
            f"eval.instruction: words outside the policy's vocabulary, read as <unk>: {unknown}"
        )
    try:
        parse(text)
    except GrammarError as e:
        log.info(
            f"eval.instruction: not in the task's grammar ({e}); episodes have nothing to "
            "reach, so no success rate is reported, only the recorded rollouts"
        )
    return text


def format_table(metrics: dict) -> str:
    """Success with its 95% interval and episode count, overall and by family, colour, shape
    and relation word; steps and queries; the ablations side by side."""

    def rate(m: dict) -> str:
        return "n/a" if m["success_rate"] is None else format_summary(m)

    rows = [
        ("success rate", rate(metrics)),
        ("mean steps", f"{metrics['mean_steps']:.1f}"),
        ("mean queries", f"{metrics['mean_queries']:.1f}"),
    ]
    if metrics["success_rate"] is not None:
        for key in ("family", "colour", "shape", "relation"):
            rows += [(f"  {key} {k}", rate(v)) for k, v in metrics[f"success_by_{key}"].items()]
    rows += [(f"ablate {k}", rate(m)) for k, m in metrics.get("ablations", {}).items()]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
