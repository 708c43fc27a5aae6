"""Drawing a scene from the env's random generator: which colour+shape pairs appear, where they
sit, what the instruction names and where the effector starts. The order of draws is part of
each seed's episode."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vla.envs.families import Split, candidates, family_of, relation_word, relation_words
from vla.envs.grammar import COLOURS, PAIRS, GrammarError, Instruction, parse, text
from vla.envs.referents import resolve
from vla.errors import ConfigError

MAX_SCENE_DRAWS = 500  # scenes drawn for an instruction before giving up


def centre_margin(target_size: float) -> float:
    """How far inside the arena shape centres stay: half a shape, and a little floor."""
    return target_size / 2 + 0.02


@dataclass(frozen=True)
class Layout:
    """How a scene's shapes are laid out (the env's values)."""

    num_targets: int
    shared_colours: bool
    margin: float  # centres stay this far inside the arena
    min_separation: float


@dataclass(frozen=True)
class Scene:
    pairs: list[int]  # indices into PAIRS, one per shape
    centres: np.ndarray  # [K,2] arena units
    targets: tuple[int, ...]  # the shapes to reach, in order (none: the text names nothing)
    text: str  # the instruction
    family: str  # its family ("typed" if outside the grammar)
    relation: str | None = None  # the relation word of a relation instruction


def instructed_scene(rng: np.random.Generator, family: str, split: Split, layout: Layout) -> Scene:
    """Draws scenes until `family` has an instruction for one under `split`, then draws one
    of its instructions (a relation word first, so every word is as common; see
    `vla.envs.families`) and a phrasing."""
    words = relation_words(split) if family == "relation" else None
    word = words[int(rng.integers(len(words)))] if words else None
    for _ in range(MAX_SCENE_DRAWS):
        pairs, centres = _layout(rng, layout)
        groups = candidates(family, pairs, centres, split)
        keys = [word] if word in groups else [] if word else list(groups)
        if keys:
            group = groups[keys[int(rng.integers(len(keys)))]]
            referents, targets = group[int(rng.integers(len(group)))]
            verbs = split.verbs()
            phrase = text(Instruction(verbs[int(rng.integers(len(verbs)))], referents))
            return Scene(pairs, centres, targets, phrase, family, relation_word(referents))
    raise ConfigError(
        f"no scene in {MAX_SCENE_DRAWS} draws has a {family} instruction of split "
        f"{split.name!r} with num_targets={layout.num_targets}"
    )


def typed_scene(rng: np.random.Generator, typed: str, layout: Layout) -> Scene:
    """Draws scenes until what a typed instruction names is there (any scene, with nothing to
    reach, for text outside the grammar)."""
    try:
        referents = parse(typed).referents
    except GrammarError:
        referents = ()
    for _ in range(MAX_SCENE_DRAWS):
        pairs, centres = _layout(rng, layout)
        targets = [resolve(r, pairs, centres) for r in referents]
        if None not in targets and len(set(targets)) == len(targets):
            family = family_of(referents) if referents else "typed"
            relation = relation_word(referents)
            return Scene(pairs, centres, tuple(targets), typed, family, relation)
    raise ConfigError(f"no scene in {MAX_SCENE_DRAWS} draws has what {typed!r} names")


def _layout(rng: np.random.Generator, layout: Layout) -> tuple[list[int], np.ndarray]:
    pairs = sample_pairs(rng, layout.num_targets, layout.shared_colours)
    centres = sample_centres(rng, layout.num_targets, layout.margin, layout.min_separation)
    return pairs, centres


def sample_pairs(rng: np.random.Generator, num_targets: int, shared_colours: bool) -> list[int]:
    """Distinct pairs (indices into PAIRS), one per shape; colours distinct unless shared."""
    if shared_colours:
        pairs = rng.choice(len(PAIRS), size=num_targets, replace=False)
    else:
        colours = rng.choice(len(COLOURS), size=num_targets, replace=False)
        shapes = rng.integers(len(PAIRS) // len(COLOURS), size=num_targets)
        pairs = colours * (len(PAIRS) // len(COLOURS)) + shapes
    return [int(p) for p in pairs]


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
