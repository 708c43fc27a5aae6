"""Drawing a scene from the env's random generator: which colour+shape pairs appear, where the
targets sit, and where the effector starts. The order of draws is part of each seed's episode."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vla.envs.instructions import COLOURS, PAIRS
from vla.errors import ConfigError


def sample_pairs(
    rng: np.random.Generator,
    num_targets: int,
    shared_colours: bool,
    instructed_pairs: Sequence[int] | None,
) -> list[int]:
    """Distinct pairs (indices into PAIRS), one per target; colours distinct unless shared,
    and at least one pair among `instructed_pairs` when that is set."""
    if shared_colours:
        pairs = rng.choice(len(PAIRS), size=num_targets, replace=False)
    else:
        colours = rng.choice(len(COLOURS), size=num_targets, replace=False)
        shapes = rng.integers(len(PAIRS) // len(COLOURS), size=num_targets)
        pairs = colours * (len(PAIRS) // len(COLOURS)) + shapes
    pairs = [int(p) for p in pairs]
    if instructed_pairs is not None and not set(pairs) & set(instructed_pairs):
        # make one target an instructable pair, keeping the scene's colour rule
        choices = [
            p
            for p in instructed_pairs
            if p not in pairs[1:]
            and (shared_colours or PAIRS[p][0] not in {PAIRS[q][0] for q in pairs[1:]})
        ]
        pairs[0] = int(choices[int(rng.integers(len(choices)))])
    return pairs


def sample_centres(
    rng: np.random.Generator, num_targets: int, margin: float, min_separation: float
) -> np.ndarray:
    """Target centres [K,2] inside the margin, pairwise at least `min_separation` apart."""
    lo, hi = margin, 1.0 - margin
    for _ in range(1000):
        centres = rng.uniform(lo, hi, size=(num_targets, 2)).astype(np.float32)
        d = np.linalg.norm(centres[:, None] - centres[None], axis=-1)
        if np.all(d[np.triu_indices(num_targets, 1)] >= min_separation):
            return centres
    raise ConfigError("could not place the targets; lower env.min_separation")


def sample_start(rng: np.random.Generator, centres: np.ndarray, min_separation: float):
    """Effector start [2], at least `min_separation` from every target when there is room."""
    for _ in range(1000):
        pos = rng.uniform(0.05, 0.95, size=2).astype(np.float32)
        if np.all(np.linalg.norm(centres - pos, axis=-1) >= min_separation):
            return pos
    return pos  # crowded arena: any start is fine, the named target is still at a distance
