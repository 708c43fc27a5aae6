"""Two checkpoints on the same episodes: per level (or for the one env of a plain evaluation)
both success rates, the discordant episodes (solved by one checkpoint only) and the exact
McNemar p-value, and the same per relation word; as compare.md and compare.json (with every
episode's outcome under both).

    python scripts/eval.py ckpt_path=A compare_to=B                  # the env as trained
    python scripts/eval.py ckpt_path=A compare_to=B suite=levels     # every level

Both checkpoints run the episodes of seeds `eval.seed, eval.seed+1, ...` in one env per
level, so episode i is the same scene and instruction for both: a paired comparison, which
finds differences that two overlapping Wilson intervals hide (`vla.eval.stats`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from vla.envs.config import episode_values
from vla.errors import ConfigError
from vla.eval.rollout import Rollouts, rollout
from vla.eval.stats import format_summary, mcnemar_exact, rate_summary

log = logging.getLogger(__name__)


def check_same_env(env_a: dict, env_b: dict) -> None:
    """Refuses two checkpoints whose envs (as trained, with the evaluation's changes) differ:
    the same seeds would not be the same episodes (`episode_values`)."""
    a, b = episode_values(env_a), episode_values(env_b)
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    if differ:
        values = ", ".join(f"env.{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in differ)
        raise ConfigError(
            f"ckpt_path and compare_to were trained in different envs ({values}): the same "
            "seeds would not be the same episodes; set these env values on the command line"
        )


def paired(a: np.ndarray, b: np.ndarray) -> dict:
    """Both rates, the discordant counts and McNemar's p for successes `a`, `b` [N] bool of
    the same episodes."""
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    return dict(
        a=rate_summary(int(a.sum()), len(a)),
        b=rate_summary(int(b.sum()), len(b)),
        only_a=only_a,
        only_b=only_b,
        p_value=mcnemar_exact(only_a, only_b),
        num_episodes=len(a),
    )


def compare_rollouts(name: str, a: Rollouts, b: Rollouts) -> dict:
    """One level's row: `paired` over all its episodes and per relation word, with every
    episode's outcome under both checkpoints."""
    if not np.array_equal(a.seeds, b.seeds) or list(a.instructions) != list(b.instructions):
        raise ValueError(f"{name}: the two rollouts are not of the same episodes")
    words = np.array([w or "" for w in a.relations], dtype=str)
    episodes = [
        dict(seed=e["seed"], a=e["success"], b=bool(b.success[i]), relation=e["relation"])
        for i, e in enumerate(a.episodes())
    ]
    return dict(
        level=name,
        **paired(a.success, b.success),
        by_relation={
            w: paired(a.success[words == w], b.success[words == w])
            for w in sorted(set(words) - {""})
        },
        episodes=episodes,
    )


def compare(
    a: tuple[str, object, dict],
    b: tuple[str, object, dict],
    envs: list[tuple[str, dict]],
    out_dir: Path,
    **rollout_kwargs,
) -> dict:
    """Runs checkpoints `a` and `b` ((path, policy, its chunking settings)) on the same
    episodes of each (name, env kwargs) in `envs`; writes compare.md and compare.json.

    `rollout_kwargs`: num_episodes, seed, num_envs, options of `rollout`.
    """
    rows = []
    for name, env in envs:
        ra = rollout(a[1], env, **a[2], **rollout_kwargs)
        rb = rollout(b[1], env, **b[2], **rollout_kwargs)
        row = compare_rollouts(name, ra, rb)
        rows.append(row)
        log.info(
            f"{name:<28} A {format_summary(row['a'])}  B {format_summary(row['b'])}  "
            f"only A {row['only_a']}, only B {row['only_b']}, McNemar p={row['p_value']:.3g}"
        )
    summary = dict(a=a[0], b=b[0], levels=rows)
    (out_dir / "compare.json").write_text(json.dumps(summary, indent=2))
    table = markdown(summary)
    (out_dir / "compare.md").write_text(table)
    for line in table.splitlines():
        log.info(line)
    log.info(f"compare.md and compare.json written to {out_dir}")
    return summary


def markdown(summary: dict) -> str:
    """One row per level; then one per relation word of the levels that have them."""

    def line(label: str, r: dict) -> str:
        return (
            f"| {label} | {format_summary(r['a'])} | {format_summary(r['b'])} | "
            f"{r['only_a']} | {r['only_b']} | {r['p_value']:.3g} |"
        )

    head = "| A success [95% interval] of episodes | B success | only A | only B | McNemar p |"
    lines = [
        f"A: `{summary['a']}`, B: `{summary['b']}`, on the same episodes",
        "",
        f"| level {head}",
        "|---|---|---|---|---|---|",
        *(line(r["level"], r) for r in summary["levels"]),
    ]
    words = [(r["level"], w, m) for r in summary["levels"] for w, m in r["by_relation"].items()]
    if words:
        lines += ["", f"| level: relation word {head}", "|---|---|---|---|---|---|"]
        lines += [line(f"{level}: {word}", m) for level, word, m in words]
    return "\n".join(lines) + "\n"
