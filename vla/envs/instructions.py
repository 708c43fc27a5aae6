"""The task's language: target colours, shapes, and the instruction phrasings.

The grammar is closed and small, so the tokenizer's vocabulary is derived from it (see
`vocabulary`): every word an instruction can contain is known before any data exists.
"""

from __future__ import annotations

import numpy as np

# name -> RGB. Distinct in hue and brightness so a 64 px image separates them at a glance.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (230, 40, 40),
    "green": (40, 200, 60),
    "blue": (50, 90, 240),
    "yellow": (240, 220, 40),
}
SHAPES: tuple[str, ...] = ("circle", "square", "triangle")

# Each phrasing names the target with "{colour} {shape}".
TEMPLATES: tuple[str, ...] = (
    "reach the {colour} {shape}",
    "go to the {colour} {shape}",
    "move to the {colour} {shape}",
    "touch the {colour} {shape}",
    "navigate to the {colour} {shape}",
    "find the {colour} {shape}",
)

# Every (colour, shape) pair, in a fixed order: the index of a pair is stable across runs.
PAIRS: tuple[tuple[str, str], ...] = tuple((c, s) for c in COLOURS for s in SHAPES)


def instruction(colour: str, shape: str, template: int) -> str:
    """The instruction text that names the (colour, shape) target with phrasing `template`."""
    return TEMPLATES[template].format(colour=colour, shape=shape)


def sample_instruction(rng: np.random.Generator, colour: str, shape: str) -> str:
    return instruction(colour, shape, int(rng.integers(len(TEMPLATES))))


def vocabulary() -> list[str]:
    """All words the grammar can produce, sorted so the list (and token ids) never change."""
    words = {w for t in TEMPLATES for w in t.split() if not w.startswith("{")}
    return sorted(words | set(COLOURS) | set(SHAPES))


def max_words() -> int:
    """Length in words of the longest instruction the grammar produces."""
    return max(len(t.split()) for t in TEMPLATES)
