"""Scoring answers: exact words for every family but pointing and chain, right when the decoded
point lies within `radius` of the shape's centre (the env's success radius: a point that
close is one the effector would count as reached)."""

from __future__ import annotations

import numpy as np

from vla.eval.stats import wilson_interval
from vla.vlm.questions import FAMILIES, POINTING
from vla.vlm.vocab import VLMTokenizer

POINT_RADIUS = 0.06  # the env's success_radius


def correct(
    family: str, predicted: str, answer: str, centre, tokenizer: VLMTokenizer,
    radius: float = POINT_RADIUS,
) -> bool:  # fmt: skip
    """Whether `predicted` answers the question whose reference answer is `answer` (pointing:
    `centre` (x, y) is the shape's, arena units)."""
    if family not in POINTING:
        return predicted.split() == answer.split()
    point = tokenizer.point_of(predicted)
    return point is not None and float(np.linalg.norm(point - np.asarray(centre))) <= radius


def per_family(families, hits) -> dict[str, dict]:
    """{family: {accuracy, n, ci95}} for examples of families (names) and hits (bools), plus
    "mean": the unweighted mean over the families present."""
    families, hits = np.asarray(families), np.asarray(hits, dtype=bool)
    out = {}
    for f in FAMILIES:
        sel = families == f
        n, k = int(sel.sum()), int(hits[sel].sum())
        if n:
            out[f] = dict(accuracy=k / n, n=n, ci95=list(wilson_interval(k, n)))
    out["mean"] = dict(accuracy=float(np.mean([v["accuracy"] for v in out.values()])))
    return out
