"""The generalisation suite: one checkpoint on every level, each a named change of the env it
was trained in (`conf/suite/levels.yaml`), with success, its 95% Wilson interval, mean steps
and episode count, and the same per relation word, as suite.md, suite.json (with every
episode's record), suite.png (a bar chart), levels.png (a scene of each level with its
instruction), a GIF per level and TensorBoard.

    python scripts/eval.py ckpt_path=<run> suite=levels

A level changes env values only (families, split, perturbations); the held-out sets are the
checkpoint's own, so a level never asks for something the checkpoint's training split held
in (and the demonstrations of that split never held out what a level tests: see
`vla.envs.families`). Families the checkpoint was not trained on are still measured and
marked "not trained": a zero-shot number, not a generalisation level.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from PIL import Image
from torch.utils.tensorboard import SummaryWriter

from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.eval.chart import contact_sheet, success_chart
from vla.eval.rollout import rollout
from vla.eval.stats import format_summary
from vla.eval.video import add_gif, annotate, save_gif, shrink

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Level:
    name: str
    kind: str  # the question it asks: in-distribution, novel combinations, ...
    env: dict  # env values it changes


def select_levels(levels: dict, only) -> list[Level]:
    """The configured levels (`suite.levels`), or the ones `suite.only` names, in order."""
    known = list(levels)
    wanted = known if only is None else list(only)
    unknown = [w for w in wanted if w not in levels]
    if unknown or not wanted:
        raise ConfigError(f"suite.only={wanted} has unknown levels {unknown}: known are {known}")
    plain = (
        OmegaConf.to_container(levels, resolve=True) if isinstance(levels, DictConfig) else levels
    )
    return [Level(w, plain[w]["kind"], dict(plain[w].get("env") or {})) for w in wanted]


def level_env(trained: dict, level: Level) -> dict:
    """The env a level runs: the checkpoint's training env with the level's changes."""
    return {**trained, "split": "train", **level.env}


def applicable(trained_env: dict, levels: list[Level]) -> list[tuple[Level, dict]]:
    """(level, its env) for every level whose env can be built from the checkpoint's; the
    others (e.g. relations in a scene of one shape) are logged and left out."""
    kept = []
    for level in levels:
        env = level_env(trained_env, level)
        try:
            ReachEnv(**env)
        except (ConfigError, ValueError) as e:  # e.g. relations with one shape: it does not apply
            log.info(f"level {level.name}: not run for this checkpoint ({e})")
            continue
        kept.append((level, env))
    return kept


def run_suite(policy, trained_env: dict, levels: list[Level], out_dir: Path, **rollout_kwargs):
    """Rolls the policy out on each level; writes the tables, chart and GIFs into `out_dir`.

    `rollout_kwargs`: num_episodes, seed, num_envs and the chunking settings of `rollout`.
    """
    families = set(trained_env["families"])
    rows, writer, scenes = [], SummaryWriter(str(out_dir / "tensorboard")), []
    (out_dir / "levels").mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for i, (level, env) in enumerate(applicable(trained_env, levels)):
        t = time.perf_counter()
        result = rollout(policy, env, record=1, **rollout_kwargs)
        m = result.metrics()
        trained = set(env["families"]) <= families
        row = dict(
            level=level.name,
            kind=level.kind if trained else f"{level.kind} (family not trained)",
            trained=trained,
            changes=level.env,
            success_rate=m["success_rate"],
            ci95=m["ci95"],
            num_episodes=m["num_episodes"],
            mean_steps=m["mean_steps"],
            success_by_family=m["success_by_family"],
            success_by_relation=m["success_by_relation"],
            seconds=time.perf_counter() - t,
            episodes=result.episodes(),
        )
        rows.append(row)
        log.info(
            f"level {level.name:<28} {format_summary(row)}"
            f"  mean {row['mean_steps']:.1f} steps  ({row['seconds']:.0f}s)"
        )
        frames = annotate(result.frames[0], result.instructions[0], bool(result.success[0]))
        scenes.append(shrink(frames[:1], 256)[0])
        row["gif"] = str(save_gif(frames, out_dir / "levels" / f"{i:02d}_{level.name}.gif"))
        add_gif(writer, f"suite/{level.name}", shrink(frames, 160), 0)
        writer.add_scalar(f"suite/{level.name}", row["success_rate"], 0)
    chart = success_chart(
        [dict(r, label=r["level"]) for r in rows],
        f"success on each level, 95% Wilson intervals ({rows[0]['num_episodes']} episodes "
        "each; grey: a family the policy was not trained on)"
        if rows
        else "no level applies",
    )
    Image.fromarray(chart).save(out_dir / "suite.png")
    if scenes:  # the first frame of each level's recorded episode, with its instruction
        sheet = contact_sheet(scenes, [r["level"] for r in rows])
        Image.fromarray(sheet).save(out_dir / "levels.png")
    writer.add_image("suite/chart", chart, 0, dataformats="HWC")
    writer.close()
    summary = dict(trained_env=trained_env, levels=rows, seconds=time.perf_counter() - start)
    (out_dir / "suite.json").write_text(json.dumps(summary, indent=2))
    table = markdown(rows)
    (out_dir / "suite.md").write_text(table)
    for line in table.splitlines():
        log.info(line)
    log.info(
        f"{len(rows)} levels in {summary['seconds']:.0f}s: suite.md, suite.json, suite.png, "
        f"levels.png, levels/*.gif and tensorboard/ written to {out_dir}"
    )
    return summary


def markdown(rows: list[dict]) -> str:
    """The levels' table; then, for the levels with relation episodes, one row per relation
    word."""
    lines = [
        "| level | what it asks | changes | success | 95% interval | episodes | mean steps |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        changes = ", ".join(f"{k}={v}" for k, v in r["changes"].items()) or "-"
        low, high = r["ci95"]
        lines.append(
            f"| {r['level']} | {r['kind']} | {changes} | {r['success_rate']:.1%} | "
            f"{100 * low:.1f}-{100 * high:.1f}% | {r['num_episodes']} | {r['mean_steps']:.1f} |"
        )
    words = [(r["level"], w, m) for r in rows for w, m in r["success_by_relation"].items()]
    if words:
        lines += [
            "",
            "| level | relation word | success | 95% interval | episodes |",
            "|---|---|---|---|---|",
        ]
        for level, word, m in words:
            low, high = m["ci95"]
            lines.append(
                f"| {level} | {word} | {m['success_rate']:.1%} | "
                f"{100 * low:.1f}-{100 * high:.1f}% | {m['num_episodes']} |"
            )
    return "\n".join(lines) + "\n"
