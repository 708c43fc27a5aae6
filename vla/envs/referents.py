"""What a referent picks out in a scene: exactly one object, or nothing.

A scene is its objects' pairs (indices into `grammar.PAIRS`) and centres [K,2] in arena units
(x to the right, y downwards, as in the image). A referent resolves only when it leaves no
doubt: "left of X" holds for a shape more than `MARGIN` left of X and fails for one level
with X or right of it, and a scene with a shape just left of X (by less than the margin)
gets no "left of X" at all; likewise the nearest shape must be nearer than the next by the
margin, and a superlative's winner must lead the runner-up by it.
Scene samplers draw until the instruction they generate resolves, which is how every
generated instruction names exactly one object.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vla.envs.grammar import PAIRS, Colour, Name, Referent, Relation, Shape, Superlative

MARGIN = 0.1  # arena units a spatial comparison must win by (targets are 0.14 wide)

# relation / superlative -> (axis, sign): sign * (coordinate - reference) > 0 means "it holds"
_DIRECTIONS = {
    "left of": (0, -1),
    "right of": (0, 1),
    "above": (1, -1),
    "below": (1, 1),
    "leftmost": (0, -1),
    "rightmost": (0, 1),
    "topmost": (1, -1),
    "bottommost": (1, 1),
}


def matches(ref: Name | Colour | Shape | Superlative, pair: int) -> bool:
    """Whether an object of `pair` fits a referent's description (a superlative: its kind)."""
    colour, shape = PAIRS[pair]
    if isinstance(ref, Name):
        return (colour, shape) == (ref.colour, ref.shape)
    if isinstance(ref, Colour):
        return colour == ref.colour
    if isinstance(ref, Shape):
        return shape == ref.shape
    return ref.kind in ("shape", shape)


def resolve(ref: Referent, pairs: Sequence[int], centres: np.ndarray) -> int | None:
    """The index of the one object `ref` names in the scene, or None (none, or not clearly one)."""
    if isinstance(ref, Relation):
        return _relation(ref, pairs, centres)
    fits = [i for i, p in enumerate(pairs) if matches(ref, p)]
    if not isinstance(ref, Superlative):
        return fits[0] if len(fits) == 1 else None
    if not fits:
        return None
    axis, sign = _DIRECTIONS[ref.superlative]
    score = sign * centres[fits, axis]  # [n]: the largest wins
    order = np.argsort(-score)
    if len(fits) > 1 and score[order[0]] - score[order[1]] < MARGIN:
        return None
    return fits[int(order[0])]


def _relation(ref: Relation, pairs: Sequence[int], centres: np.ndarray) -> int | None:
    anchor = resolve(ref.reference, pairs, centres)
    if anchor is None:
        return None
    others = [i for i in range(len(pairs)) if i != anchor]
    if not others:
        return None
    if ref.relation == "nearest":
        d = np.linalg.norm(centres[others] - centres[anchor], axis=-1)  # [n]
        order = np.argsort(d)
        if len(others) > 1 and d[order[1]] - d[order[0]] < MARGIN:
            return None
        return others[int(order[0])]
    axis, sign = _DIRECTIONS[ref.relation]
    delta = sign * (centres[others, axis] - centres[anchor, axis])  # [n]: > 0 means it holds
    unclear = (delta > 0) & (delta <= MARGIN)
    if unclear.any() or np.sum(delta > MARGIN) != 1:
        return None
    return others[int(np.argmax(delta))]
