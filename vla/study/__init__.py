"""Learning-speed study: how fast each recipe reaches high rollout success, over seeds.

Every training run writes `metrics.json` with its learning curve (rollout success against
optimisation steps and wall-clock seconds since the command started, demo collection
included) and Hydra records its config in `.hydra/`. `summarize(root)` finds every run below
`root` (runs.py), groups the runs whose configs differ only in the run's `seed`, its output
paths, its data folder and its threads (a recipe), names each group by its command-line
overrides, and reports per run and per group the time to 90/95/98% success and the final
success (worst and median seed), as a Markdown table, a JSON file and a PNG of success
against time (report.py); suite evaluations of those runs become suites.md (suites.py).

    python scripts/train.py -m seed=0,1,2 model/head=discrete,continuous
    python scripts/study.py runs=outputs/train/multirun/<date>
"""

from vla.study.summary import summarize

__all__ = ["summarize"]
