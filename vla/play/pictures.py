"""What the playground draws for one step: the frame with where the readout looks and where
the chunk goes, the per-layer attention figure of `vla.eval.attention`, and text (the chunk's
numbers, the status line). Plain numpy and PIL, so the tests read them without a browser."""

from __future__ import annotations

import math

import numpy as np
from einops import rearrange
from PIL import Image, ImageDraw

from vla.eval.attention import attention_figure, heatmap_on_frame
from vla.play.episode import Query, Step
from vla.vlm.figure import keypoint_figure, keypoints_on_frame

PATH_COLOUR = (80, 200, 255)  # the chunk's path: cyan, apart from the heat's red to yellow
GAP = 8  # white pixels between the frame and its heat


def chunk_path(position: np.ndarray, actions: np.ndarray, max_step: float) -> np.ndarray:
    """Where actions [n,A] take the effector from `position` [2]: [n+1,2] arena units,
    clipped to the arena as the env clips each step."""
    points = [np.asarray(position, dtype=np.float64)]
    for a in np.clip(actions, -1.0, 1.0):
        points.append(np.clip(points[-1] + a * max_step, 0.0, 1.0))
    return np.stack(points)


def remaining(step: Step) -> np.ndarray:
    """The actions of the chunk in effect still to execute from this step on ([0,A] at the
    end of the episode, where nothing more is executed)."""
    if step.done:
        return step.query.chunk[:0]
    return step.query.chunk[step.t - step.query.step :]


def grid_of(query: Query) -> int:
    """Patches per image side, from the query's layout (the patches form a square grid)."""
    patches = query.layout["image"]
    return math.isqrt(patches.stop - patches.start)


def step_picture(step: Step, max_step: float) -> np.ndarray:
    """uint8 [S, 2S+GAP, 3]: the step's frame as rendered, and beside it the same frame under
    the heat of the readout's attention on the image patches (last layer, mean over heads;
    a VLM's keypoints, sized by their share); on both, the path the rest of the chunk would
    take from the effector.

    The heat runs from the least attended patch (none) to the most (brightest): an untrained
    or undecided readout spreads its weight almost evenly, which from 0 would light up every
    patch alike. It is drawn beside the frame, not on it, since it turns red to yellow."""
    _, weights = step.query.attention[-1]  # [H,T_keys]
    if step.query.keypoints is not None:  # a VLM: where its keypoints are, sized by share
        share = weights[:, step.query.layout["keypoints"]].mean(0)  # [K]
        heated = np.asarray(keypoints_on_frame(step.frame, step.query.keypoints, share))
    else:
        patches = weights[:, step.query.layout["image"]].mean(0)  # [Np]
        patches = rearrange(patches - patches.min(), "(gh gw) -> gh gw", gh=grid_of(step.query))
        heated = heatmap_on_frame(step.frame, patches, float(patches.max()))
    size = step.frame.shape[0]
    points = chunk_path(step.position, remaining(step), max_step) * size
    panels = []
    for frame in (step.frame, heated):
        panel = Image.fromarray(frame)
        draw = ImageDraw.Draw(panel)
        if len(points) > 1:
            draw.line([tuple(p) for p in points], fill=PATH_COLOUR, width=2)
        for x, y in points[1:]:
            draw.ellipse([x - 2, y - 2, x + 2, y + 2], fill=PATH_COLOUR)
        panels.append(np.asarray(panel))
    gap = np.full((size, GAP, 3), 255, np.uint8)
    return np.concatenate([panels[0], gap, panels[1]], axis=1)


def query_figure(step: Step) -> np.ndarray:
    """The attention figure of the query in effect: every layer, head and word
    (`vla.eval.attention.attention_figure`), drawn on the frame that query saw."""
    q = step.query
    note = f"query of step {q.step}" + (" (its chunk runs now)" if step.t > q.step else "")
    note = f"query of step {q.step}, the last one" if step.done else note
    if q.keypoints is not None:  # a VLM (`vla.vlm.figure`)
        title = f'"{step.instruction}"  {note}'
        return keypoint_figure(q.frame, q.keypoints, q.attention, q.layout, q.words, title)
    return attention_figure(
        q.frame, q.attention, q.layout, q.words, grid_of(q), step.instruction, note
    )


def chunk_markdown(step: Step) -> str:
    """The chunk in effect as a table, one row per action (x, y velocity in [-1,1]), the one
    executed at this step marked."""
    now = None if step.done else step.t - step.query.step
    ended = " (the episode has ended)" if step.done else ""
    rows = [f"**Action chunk** of the query at step {step.query.step}{ended}", ""]
    rows += ["| # | x | y | executed |", "|---|---|---|---|"]
    for i, (x, y) in enumerate(step.query.chunk):
        mark = "" if now is None or i > now else "now" if i == now else "yes"
        rows.append(f"| {i} | {x:+.2f} | {y:+.2f} | {mark} |")
    return "\n".join(rows)


def status_markdown(step: Step, unknown: list[str], ablate: tuple[str, ...]) -> str:
    """One line for the episode so far: the step, the outcome once it ends, what was ablated
    and the words the tokenizer did not know."""
    parts = [f"step **{step.t}** of at most {step.limit}"]
    if step.done:
        outcome = "success" if step.success else "no success"
        parts.append(f"**{outcome}** after {step.t} steps")
    if step.info.get("targets") == 0:
        parts.append("the instruction names nothing this task can reach")
    parts.append("ablated: " + (", ".join(ablate) if ablate else "nothing"))
    known = ", ".join(f"`{w}`" for w in unknown) if unknown else "none"
    parts.append(f"unknown words: {known}")
    return " · ".join(parts)
