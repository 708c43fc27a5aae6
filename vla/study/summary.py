"""summarize(root): the study of every training run below a folder, and of the suite
evaluations of those runs, written into it."""

from __future__ import annotations

import json
from pathlib import Path

from vla.study.report import group_rows, markdown, plot
from vla.study.runs import THRESHOLDS, find_runs
from vla.study.suites import find_suites, relation_rows, suite_markdown, suite_rows


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
        summary["suites_by_relation"] = words = relation_rows(suites)
        table = suite_markdown(rows, words)
        (out / "suites.md").write_text(table)
        (out / "study.json").write_text(json.dumps(summary, indent=2))
        print(table)
        print(f"wrote {out / 'suites.md'}: {len(suites)} suite evaluations")
    return summary
