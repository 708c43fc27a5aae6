"""The generalisation suite over seeds: every `suite.json` below a study's folder (written by
`scripts/eval.py ckpt_path=<run> suite=levels`), joined to the training run it evaluated and
so to that run's recipe, as one table: per level and recipe, the median and the worst seed's
success, and each seed's rate with its 95% Wilson interval and episode count.

    python scripts/study.py runs=<folder with training runs and their suite evaluations>
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from vla.eval.stats import format_summary

if TYPE_CHECKING:
    from vla.study import Run


def find_suites(root: Path, runs: list[Run]) -> list[tuple[Run, dict]]:
    """(training run, its suite.json) for every suite evaluation below `root` whose checkpoint
    is one of `runs` (a run folder, or a checkpoint inside one)."""
    found = []
    for path in sorted(Path(root).rglob("suite.json")):
        config = path.parent / ".hydra" / "config.yaml"
        if not config.is_file():
            continue
        ckpt = Path(yaml.safe_load(config.read_text())["ckpt_path"]).resolve()
        run = next((r for r in runs if r.path.resolve() in (ckpt, *ckpt.parents)), None)
        if run is not None:
            found.append((run, json.loads(path.read_text())))
    return found


def suite_rows(suites: list[tuple[Run, dict]]) -> list[dict]:
    """One row per (level, recipe): seeds, the worst and the median success, per seed rates."""
    rows: dict[tuple[str, str], dict] = {}
    for run, suite in sorted(suites, key=lambda s: (s[0].recipe, s[0].seed or 0)):
        for level in suite["levels"]:
            row = rows.setdefault(
                (level["level"], run.recipe),
                dict(level=level["level"], kind=level["kind"], recipe=run.recipe, seeds={}),
            )
            row["seeds"][run.seed] = {
                k: level[k] for k in ("success_rate", "ci95", "num_episodes", "mean_steps")
            }
    for row in rows.values():
        rates = [s["success_rate"] for s in row["seeds"].values()]
        row["worst"], row["median"] = min(rates), statistics.median(rates)
    order = {name: i for i, name in enumerate(dict.fromkeys(k[0] for k in rows))}
    return sorted(rows.values(), key=lambda r: (order[r["level"]], r["recipe"]))


def suite_markdown(rows: list[dict]) -> str:
    lines = [
        "| level | what it asks | recipe | median / worst seed | each seed: success [95% interval] of episodes |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        seeds = "; ".join(f"{seed}: {format_summary(s)}" for seed, s in r["seeds"].items())
        lines.append(
            f"| {r['level']} | {r['kind']} | `{r['recipe']}` | "
            f"{r['median']:.1%} / {r['worst']:.1%} | {seeds} |"
        )
    return "\n".join(lines) + "\n"
