"""Training runs of a study: each run's learning curve and config, read from the folder
train.py wrote (metrics.json and Hydra's `.hydra/`), and runs grouped into recipes: runs whose
configs differ only in the seed, the output paths, the data folder and the threads, named by
their command-line overrides."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vla.errors import StudyError

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
