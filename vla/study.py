"""Learning-speed study: how fast each recipe reaches high rollout success, over seeds.

Every training run writes `metrics.json` with its learning curve (rollout success against
optimisation steps and wall-clock seconds since the command started, demo collection
included) and Hydra records its config in `.hydra/`. `summarize(root)` finds every run below
`root`, groups the runs whose configs differ only in the run's `seed`, its output paths, its
data folder and its threads (a recipe), names each group by its command-line overrides, and
reports per run and per group the time to 90/95/98% success and the final success (worst and
median seed), as a Markdown table, a JSON file and a PNG of success against time.

    python scripts/train.py -m seed=0,1,2 model/head=discrete,continuous
    python scripts/study.py runs=outputs/train/multirun/<date>
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vla.errors import StudyError
from vla.eval.stats import format_rate
from vla.study_suites import find_suites, suite_markdown, suite_rows

THRESHOLDS = (0.90, 0.95, 0.98)
# what may differ between the runs of one recipe: exact keys, then prefixes of keys
IGNORED_KEYS = ("seed", "threads", "data.dir")
IGNORED_PREFIXES = ("hydra.", "paths.")


@dataclass
class Run:
    """One training run's learning curve."""

    path: Path
    recipe: str  # its overrides, seed left out (see `name_recipes`)
    seed: int | None
    steps: list[int]
    seconds: list[float]
    success: list[float]
    final_success: float
    total_s: float
    config: dict[str, str] = field(default_factory=dict)  # flat, the ignored keys left out
    final_episodes: int | None = None  # test episodes of the final success rate
    time_to: dict[float, float | None] = field(init=False)  # threshold -> seconds (None: never)
    steps_to: dict[float, int | None] = field(init=False)  # threshold -> step (None: never)

    def __post_init__(self):
        self.time_to = {t: time_to(self.seconds, self.success, t) for t in THRESHOLDS}
        self.steps_to = {t: time_to(self.steps, self.success, t) for t in THRESHOLDS}


def time_to(seconds: list[float], success: list[float], threshold: float) -> float | None:
    """Seconds (or steps, given steps) until the curve first reaches `threshold` (None if it
    never does)."""
    return next((s for s, v in zip(seconds, success, strict=True) if v >= threshold), None)


def ignored(key: str) -> bool:
    """Whether runs of one recipe may differ in this config key."""
    return key in IGNORED_KEYS or key.startswith(IGNORED_PREFIXES)


def recipe_of(overrides: list[str]) -> str:
    """A recipe's name: the command-line overrides without the seed and output settings."""
    kept = [o for o in overrides if not ignored(o.lstrip("+~").split("=", 1)[0])]
    return " ".join(sorted(kept)) or "(defaults)"


def flat_config(node, prefix: str = "") -> dict[str, str]:
    """A config as {dotted key: value as text}, without the ignored keys. Values are as Hydra
    saved them: an interpolation stays `${...}`, and the value it points at is compared in
    its own key."""
    if not isinstance(node, dict) or not node:
        return {prefix.rstrip("."): json.dumps(node)}
    flat = {}
    for k, v in node.items():
        key = f"{prefix}{k}"
        if not ignored(key):
            flat |= flat_config(v, f"{key}.")
    return flat


def name_recipes(runs: list[Run]) -> None:
    """Sets each run's `recipe`: runs whose configs agree are one recipe, named by their
    overrides; two recipes that the overrides cannot tell apart (a config file edited
    between the runs) also get the keys in which they differ."""
    groups: dict[frozenset, list[Run]] = {}
    for run in runs:
        groups.setdefault(frozenset(run.config.items()), []).append(run)
    names = {config: members[0].recipe for config, members in groups.items()}
    for name in set(names.values()):
        alike = [config for config in names if names[config] == name]
        if len(alike) < 2:
            continue
        configs = [dict(config) for config in alike]
        keys = sorted({k for c in configs for k in c if any(c.get(k) != o.get(k) for o in configs)})
        for config, values in zip(alike, configs, strict=True):
            names[config] = f"{name} [" + ", ".join(f"{k}={values.get(k)}" for k in keys) + "]"
    for config, members in groups.items():
        for run in members:
            run.recipe = names[config]


def load_run(metrics_path: Path) -> Run:
    """Reads one run folder (its metrics.json and Hydra's record of the command)."""
    run_dir = metrics_path.parent
    metrics = json.loads(metrics_path.read_text())
    if "curve" not in metrics:
        raise StudyError(f"{metrics_path} has no learning curve (written by an older version)")
    hydra_dir = run_dir / ".hydra"
    overrides = yaml.safe_load((hydra_dir / "overrides.yaml").read_text()) or []
    config = yaml.safe_load((hydra_dir / "config.yaml").read_text())
    curve = metrics["curve"]
    return Run(
        path=run_dir,
        recipe=recipe_of(overrides),
        seed=config.get("seed"),
        config=flat_config(config),
        steps=[p["step"] for p in curve],
        seconds=[p["seconds"] for p in curve],
        success=[p["success_rate"] for p in curve],
        final_success=metrics["success_rate"],
        total_s=metrics["timings"]["total_s"],
        final_episodes=metrics.get("num_episodes"),
    )


def is_training_run(folder: Path) -> bool:
    """A folder train.py wrote (eval.py's folders have metrics.json and .hydra/ too)."""
    config = folder / ".hydra" / "config.yaml"
    return config.is_file() and yaml.safe_load(config.read_text()).get("task_name") == "train"


def find_runs(root: Path) -> list[Run]:
    """Every finished training run below `root` (a folder with metrics.json and .hydra/)."""
    paths = sorted(p for p in Path(root).rglob("metrics.json") if is_training_run(p.parent))
    if not paths:
        raise StudyError(f"no training runs (metrics.json beside .hydra/) under {root}")
    runs = [load_run(p) for p in paths]
    name_recipes(runs)
    return runs


def _fmt_time(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds / 60:.1f} min"


def _fmt_reached(run: Run, threshold: float) -> str:
    seconds = run.time_to[threshold]
    return "never" if seconds is None else f"{_fmt_time(seconds)} ({run.steps_to[threshold]})"


def _fmt_final(run: Run) -> str:
    if run.final_episodes is None:
        return f"{run.final_success:.1%}"
    return format_rate(run.final_success, run.final_episodes)


def group_rows(runs: list[Run]) -> list[dict]:
    """Per recipe: seeds, final success (worst, median) and time to each threshold (worst
    seed: the slowest, counting `never` as slowest; median over seeds that got there)."""
    rows = []
    for recipe in sorted({r.recipe for r in runs}):
        group = [r for r in runs if r.recipe == recipe]
        finals = [r.final_success for r in group]
        row = dict(
            recipe=recipe,
            seeds=sorted(r.seed for r in group),
            final_worst=min(finals),
            final_median=statistics.median(finals),
            total_s_median=statistics.median(r.total_s for r in group),
        )
        for t in THRESHOLDS:
            times = [r.time_to[t] for r in group]
            reached = [x for x in times if x is not None]
            row[f"time_to_{t:.0%}_worst"] = None if len(reached) < len(times) else max(reached)
            row[f"time_to_{t:.0%}_median"] = statistics.median(reached) if reached else None
        rows.append(row)
    return rows


def markdown(runs: list[Run]) -> str:
    """Two tables: one row per recipe (over seeds), then one row per run."""
    pct = [f"{t:.0%}" for t in THRESHOLDS]
    lines = [
        "| recipe | seeds | final success, worst / median | "
        + " | ".join(f"time to {p}, worst / median" for p in pct)
        + " | wall time (median) |",
        "|---" * (4 + len(pct)) + "|",
    ]
    for row in group_rows(runs):
        times = [
            f"{_fmt_time(row[f'time_to_{p}_worst'])} / {_fmt_time(row[f'time_to_{p}_median'])}"
            for p in pct
        ]
        lines.append(
            f"| `{row['recipe']}` | {', '.join(map(str, row['seeds']))} | "
            f"{row['final_worst']:.1%} / {row['final_median']:.1%} | "
            + " | ".join(times)
            + f" | {_fmt_time(row['total_s_median'])} |"
        )
    lines += [
        "",
        "| recipe | seed | final success | "
        + " | ".join(f"time (step) to {p}" for p in pct)
        + " | wall time | run |",
        "|---" * (5 + len(pct)) + "|",
    ]
    for r in sorted(runs, key=lambda r: (r.recipe, r.seed if r.seed is not None else -1)):
        lines.append(
            f"| `{r.recipe}` | {r.seed} | {_fmt_final(r)} | "
            + " | ".join(_fmt_reached(r, t) for t in THRESHOLDS)
            + f" | {_fmt_time(r.total_s)} | {r.path.name} |"
        )
    return "\n".join(lines) + "\n"


def plot(runs: list[Run], path: Path) -> None:
    """Success against wall-clock minutes: one line per run, one colour per recipe."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # an optional extra: the tables do not need it
        raise ImportError("the study's PNG needs matplotlib: pip install -e '.[study]'") from e
    recipes = sorted({r.recipe for r in runs})
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    for i, recipe in enumerate(recipes):
        colour = plt.get_cmap("tab10")(i % 10)
        for j, r in enumerate(x for x in runs if x.recipe == recipe):
            minutes = [s / 60 for s in r.seconds]
            label = recipe if j == 0 else None
            ax.plot(minutes, r.success, "-o", ms=2.5, lw=1.2, color=colour, label=label)
    for t in THRESHOLDS:
        ax.axhline(t, color="grey", lw=0.5, ls=":")
    ax.set(xlabel="wall-clock minutes since the command started", ylabel="rollout success")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def summarize(root: str | Path) -> dict:
    """Writes study.md, study.json and study.png into `root`."""
    out = Path(root)
    runs = find_runs(out)
    table = markdown(runs)
    (out / "study.md").write_text(table)
    summary = dict(
        recipes=group_rows(runs),
        runs=[
            dict(
                path=str(r.path),
                recipe=r.recipe,
                seed=r.seed,
                final_success=r.final_success,
                total_s=r.total_s,
                time_to={f"{t:.0%}": r.time_to[t] for t in THRESHOLDS},
                steps_to={f"{t:.0%}": r.steps_to[t] for t in THRESHOLDS},
                curve=dict(steps=r.steps, seconds=r.seconds, success=r.success),
            )
            for r in runs
        ],
    )
    (out / "study.json").write_text(json.dumps(summary, indent=2))
    plot(runs, out / "study.png")
    print(table)
    print(f"wrote {out / 'study.md'}, study.json and study.png")
    suites = find_suites(out, runs)
    if suites:
        summary["suites"] = rows = suite_rows(suites)
        (out / "suites.md").write_text(suite_markdown(rows))
        (out / "study.json").write_text(json.dumps(summary, indent=2))
        print(suite_markdown(rows))
        print(f"wrote {out / 'suites.md'}: {len(suites)} suite evaluations")
    return summary
