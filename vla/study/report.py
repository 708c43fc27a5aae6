"""The study's tables and figure: per recipe (worst and median seed) and per run, the final
success and the time to 90/95/98% success; success against wall-clock minutes as a PNG."""

from __future__ import annotations

import statistics
from pathlib import Path

from vla.eval.stats import format_rate
from vla.study.runs import THRESHOLDS, Run


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
