"""Stage-2 starts compared on the same test episodes: success per level (Wilson 95%) and the
exact McNemar test of each start against the first (the baseline), from the runs'
metrics.json (their final evaluation's and suite levels' episode records).

    python -m vla.vlm.compare scratch=<run> fine_tuned=<run> co_fine_tuned=<run>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vla.errors import ConfigError
from vla.eval.stats import mcnemar_exact, wilson_interval


def episodes_by_level(metrics: dict) -> dict[str, list[dict]]:
    """{level: episode records}: the final evaluation's, each suite level's, and "nearest"."""
    out = {"four families": metrics["episodes"]}
    for level in (metrics.get("suite") or {}).get("levels", []):
        out[level["level"]] = level["episodes"]
        if level["level"] == "relation":
            out["relation: nearest"] = [e for e in level["episodes"] if e["relation"] == "nearest"]
    return out


def paired(a: list[dict], b: list[dict]) -> tuple[int, int, float]:
    """(episodes only `a` solved, only `b` solved, exact McNemar p) on the same seeds."""
    sa, sb = {e["seed"]: e["success"] for e in a}, {e["seed"]: e["success"] for e in b}
    if sa.keys() != sb.keys():
        raise ConfigError("the runs were evaluated on different episodes: they cannot be paired")
    only_a = sum(sa[s] and not sb[s] for s in sa)
    only_b = sum(sb[s] and not sa[s] for s in sa)
    return only_a, only_b, mcnemar_exact(only_a, only_b)


def table(runs: dict[str, Path]) -> str:
    """A markdown table: each level's success per run, and each run against the first."""
    levels = {
        k: episodes_by_level(json.loads((Path(v) / "metrics.json").read_text()))
        for k, v in runs.items()
    }
    names = list(runs)
    base = names[0]
    head = [*names, *(f"{k} vs {base} (b/c, p)" for k in names[1:])]
    lines = ["| level | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for level, eps in levels[base].items():
        cells = []
        for k in names:
            e = levels[k][level]
            s = sum(x["success"] for x in e)
            lo, hi = wilson_interval(s, len(e))
            cells.append(f"{s / len(e):.1%} [{lo:.1%}, {hi:.1%}] of {len(e)}")
        for k in names[1:]:
            b, c, p = paired(levels[k][level], eps)
            cells.append(f"{b}/{c}, p={p:.2g}")
        lines.append(f"| {level} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(dict(a.split("=", 1) for a in sys.argv[1:])))
