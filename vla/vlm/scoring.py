"""Scoring answers: exact words for every family but pointing and chain, right when the decoded
point lies within `radius` of the shape's centre (the env's success radius: a point that
close is one the effector would count as reached); a policy's greedy answers to batches of
corpus examples, where its keypoints land, and its actions against the demonstrated ones."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from vla.eval.stats import wilson_interval
from vla.models.language import PAD_ID
from vla.vlm.data import (
    ACTION_FAMILY,
    ANCHOR,
    ANCHORED,
    CENTRE,
    FAMILY,
    HAS_STATE,
    IMAGE,
    STATE,
    TARGETED,
    TARGETS,
    TOKENS,
)
from vla.vlm.model import VLMPolicy
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


def greedy_answers(policy: VLMPolicy, batch: dict[str, Tensor]) -> tuple[list[str], dict]:
    """The answers (text) the policy decodes greedily to a batch of corpus examples, and the
    eyes' outputs (keypoints_xy [B,K,2]) from the same pass over the prefix."""
    with policy.inference():
        x, pad, eyes = policy.prefix(batch[IMAGE], batch[STATE], batch[TOKENS], batch[HAS_STATE])
        ids = policy.decode(x, pad, policy.max_answer + 1, actions=False)
    return [policy.tokenizer.answer_text(row) for row in ids.tolist()], eyes


@torch.no_grad()
def score_answers(policy: VLMPolicy, batch: dict[str, Tensor], with_eyes: bool = False):
    """Greedy answers to a batch's corpus examples, scored: (family names, hits), and with
    `with_eyes` the eyes' outputs on those examples too (for `score_grounding`)."""
    keep = batch[FAMILY] != ACTION_FAMILY
    if not keep.any():
        return ([], [], {}) if with_eyes else ([], [])
    tok = policy.tokenizer
    preds, eyes = greedy_answers(
        policy, {k: batch[k][keep] for k in (IMAGE, STATE, TOKENS, HAS_STATE)}
    )
    families = [FAMILIES[f] for f in batch[FAMILY][keep].tolist()]
    refs = [
        tok.answer_text([i for i in row if i != PAD_ID]) for row in batch[TARGETS][keep].tolist()
    ]
    centres = batch[CENTRE][keep].numpy()
    hits = [
        correct(f, p, r, c, tok) for f, p, r, c in zip(families, preds, refs, centres, strict=True)
    ]
    return (families, hits, eyes) if with_eyes else (families, hits)


@torch.no_grad()
def score_grounding(
    policy: VLMPolicy, batch: dict[str, Tensor], radius: float = POINT_RADIUS, anchor: bool = False,
    eyes: dict | None = None,
) -> tuple[list[str], list[bool]]:  # fmt: skip
    """Whether keypoint 0 lies within `radius` of the shape each corpus example is about (the
    examples that have one): (family names, hits). Beside the answers it tells eyes that do
    not find the shape from a read-out that does not put what they found into words.
    anchor: keypoint 1 and the shape a relation or spatial question is measured from.
    eyes: the eyes' outputs on the batch's corpus examples (`score_answers(with_eyes=True)`);
    None runs the eyes."""
    k, centre, has = (1, ANCHOR, ANCHORED) if anchor else (0, CENTRE, TARGETED)
    corpus = batch[FAMILY] != ACTION_FAMILY
    if not corpus.any():
        return [], []
    if eyes is None:
        with policy.inference():
            _, _, eyes = policy.prefix(
                *(batch[key][corpus] for key in (IMAGE, STATE, TOKENS, HAS_STATE))
            )
    keep = batch[has][corpus]  # [n] of the corpus examples, those about a shape
    if "keypoints_xy" not in eyes or not keep.any():
        return [], []
    xy = (eyes["keypoints_xy"][keep, k] + 1) / 2  # [m,2] image [-1,1] -> arena [0,1]
    hits = (xy - batch[centre][corpus][keep]).norm(dim=-1) <= radius  # [m]
    return [FAMILIES[f] for f in batch[FAMILY][corpus][keep].tolist()], hits.tolist()


@torch.no_grad()
def action_mse(policy: VLMPolicy, batch: dict[str, Tensor]) -> Tensor | None:
    """Squared error of the greedy chunks' first step against the demonstrated action."""
    keep = batch[FAMILY] == ACTION_FAMILY
    if not keep.any():
        return None
    chunk = policy.predict_chunk_tensors(
        batch[IMAGE][keep], batch[STATE][keep], batch[TOKENS][keep]
    )
    first = batch[TARGETS][keep][:, : policy.action_dim]  # [n,A] tokens of step 0
    target = policy.action_bins.from_tokens(first, policy.tokenizer.action_start)[:, 0]  # [n,A]
    return (chunk[:, 0] - target).square().sum(-1).mean()
