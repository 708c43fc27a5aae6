"""The generalisation suite over seeds: every `suite.json` below a study's folder (written by
`scripts/eval.py ckpt_path=<run> suite=levels`), joined to the training run it evaluated and
so to that run's recipe, as one table: per level and recipe, the median and the worst seed's
success, and each seed's rate with its 95% Wilson interval and episode count; then the same
per relation word of the levels that have relation episodes.

    python scripts/study.py runs=<folder with training runs and their suite evaluations>
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

import yaml

from vla.eval.stats import format_summary
from vla.study.runs import Run

RATE_KEYS = ("success_rate", "ci95", "num_episodes", "mean_steps")


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
    return _over_seeds(suites, lambda level: [(None, level)])


def relation_rows(suites: list[tuple[Run, dict]]) -> list[dict]:
    """The same per (level, relation word, recipe), for the levels with relation episodes
    (suite.json's `success_by_relation`)."""
    return _over_seeds(suites, lambda level: list(level.get("success_by_relation", {}).items()))


def _over_seeds(suites, parts: Callable[[dict], list[tuple[str | None, dict]]]) -> list[dict]:
    """Rows of the rates `parts(level)` gives ((relation word or None, rates) per level),
    over the seeds of each recipe, in the order the levels come."""
    rows: dict[tuple, dict] = {}
    for run, suite in sorted(suites, key=lambda s: (s[0].recipe, s[0].seed or 0)):
        for level in suite["levels"]:
            for word, rates in parts(level):
                row = rows.setdefault(
                    (level["level"], word, run.recipe),
                    dict(level=level["level"], kind=level["kind"], recipe=run.recipe, seeds={})
                    | ({"relation": word} if word else {}),
                )
                row["seeds"][run.seed] = {k: rates[k] for k in RATE_KEYS if k in rates}
    for row in rows.values():
        rates = [s["success_rate"] for s in row["seeds"].values()]
        row["worst"], row["median"] = min(rates), statistics.median(rates)
    order = {name: i for i, name in enumerate(dict.fromkeys(k[0] for k in rows))}
    return sorted(
        rows.values(), key=lambda r: (order[r["level"]], r.get("relation", ""), r["recipe"])
    )


def suite_markdown(rows: list[dict], words: list[dict] = ()) -> str:
    """The levels' table; then, if `words` (`relation_rows`) has rows, the relation words'."""
    lines = [
        "| level | what it asks | recipe | median / worst seed | each seed: success [95% interval] of episodes |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {r['level']} | {r['kind']} | {_rates(r)}" for r in rows]
    if words:
        lines += [
            "",
            "| level | relation word | recipe | median / worst seed | each seed: success [95% interval] of episodes |",
            "|---|---|---|---|---|",
        ]
        lines += [f"| {r['level']} | {r['relation']} | {_rates(r)}" for r in words]
    return "\n".join(lines) + "\n"


def _rates(r: dict) -> str:
    seeds = "; ".join(f"{seed}: {format_summary(s)}" for seed, s in r["seeds"].items())
    return f"`{r['recipe']}` | {r['median']:.1%} / {r['worst']:.1%} | {seeds} |"
