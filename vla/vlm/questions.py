"""The questions one scene can answer, one family at a time.

    family    question                                   answer
    caption   "what is in the scene"                     "blue square red circle yellow triangle"
    attribute "what colour is the circle"                "red"        (only a unique shape/colour)
              "what shape is the red one"                "circle"
    relation  "what is the shape left of the blue square" "red circle" (the grammar's referents)
              "what is the leftmost shape"
    spatial   "is the red circle above the blue square"  "yes" / "no" (only when clear by MARGIN)
    count     "how many circles are there"               "two"
    pointing  "where is the red circle"                  "<loc_x> <loc_y>" (any referent)
    chain     "where is the red circle then the blue square"  "<loc_x> <loc_y>" of the first one
              not yet reached (a reached shape is drawn dimmed, as the env draws it)

Relation and pointing questions reuse the instructions' own referent phrases
(`grammar.referent_text`), so the words that name a shape are the words an instruction uses.
Captions list the shapes by pair index, so each scene has one right caption.

`Holdout` is what a question may not touch: a pair it names or asks about (or, for a caption,
shows), a relation combination it asks. The full corpus holds nothing out; the control
corpus holds out what the demonstrations hold out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vla.envs.families import named_pairs
from vla.envs.grammar import (
    COLOURS,
    PAIRS,
    RELATIONS,
    SHAPES,
    SUPERLATIVES,
    Colour,
    Name,
    Relation,
    Shape,
    Superlative,
    referent_text,
    relation_key,
)
from vla.envs.referents import _DIRECTIONS, MARGIN, resolve
from vla.vlm.vocab import NUMBERS, PLURALS

FAMILIES = ("caption", "attribute", "relation", "spatial", "count", "pointing", "chain")
POINTING = ("pointing", "chain")  # answered by a point, right within a radius
SPATIAL = ("left of", "right of", "above", "below")
RELATION_WORDS = (*RELATIONS, *SUPERLATIVES)


@dataclass(frozen=True)
class Holdout:
    pairs: frozenset[int] = frozenset()
    relations: frozenset[str] = frozenset()

    def allows(self, pairs_touched, ref=None) -> bool:
        if any(p in self.pairs for p in pairs_touched):
            return False
        return (
            ref is None
            or not isinstance(ref, Relation | Superlative)
            or (relation_key(ref) not in self.relations)
        )


@dataclass(frozen=True)
class Question:
    family: str
    question: str
    answer: str  # words, or "point" for pointing (the tokenizer writes the loc tokens)
    target: int = -1  # the object asked about (-1: none)
    anchor: int = -1  # the object a relation is measured from: "nearest the X", "above the X"


def _name(pair: int) -> str:
    return " ".join(PAIRS[pair])


def _touched(ref, pairs, target) -> list[int]:
    """Pairs a question touches: the ones its referent names, and its target's."""
    named = [PAIRS.index(p) for p in named_pairs(ref)]
    return named + ([pairs[target]] if target >= 0 else [])


def caption(rng, pairs, centres, hold: Holdout) -> Question | None:
    if not hold.allows(pairs):
        return None
    return Question("caption", "what is in the scene", " ".join(_name(p) for p in sorted(pairs)))


def attribute(rng, pairs, centres, hold: Holdout) -> Question | None:
    options = []
    for i, p in enumerate(pairs):
        colour, shape = PAIRS[p]
        if hold.allows([p]) and resolve(Shape(shape), pairs, centres) == i:
            options.append(Question("attribute", f"what colour is the {shape}", colour, i))
        if hold.allows([p]) and resolve(Colour(colour), pairs, centres) == i:
            options.append(Question("attribute", f"what shape is the {colour} one", shape, i))
    return options[int(rng.integers(len(options)))] if options else None


def referents(pairs, centres, hold: Holdout, word: str | None = None) -> list:
    """(referent, target) of every relation referent that resolves and the holdout allows."""
    refs = [Relation(r, Name(*PAIRS[p])) for r in RELATIONS for p in pairs]
    refs += [Superlative(s, k) for s in SUPERLATIVES for k in (*SHAPES, "shape")]
    found = []
    for ref in refs:
        w = ref.relation if isinstance(ref, Relation) else ref.superlative
        if word is not None and w != word:
            continue
        target = resolve(ref, pairs, centres)
        if target is not None and hold.allows(_touched(ref, pairs, target), ref):
            found.append((ref, target))
    return found


def relation(rng, pairs, centres, hold: Holdout) -> Question | None:
    word = RELATION_WORDS[int(rng.integers(len(RELATION_WORDS)))]  # a word first: even mix
    found = referents(pairs, centres, hold, word) or referents(pairs, centres, hold)
    if not found:
        return None
    ref, target = found[int(rng.integers(len(found)))]
    anchor = resolve(ref.reference, pairs, centres) if isinstance(ref, Relation) else -1
    text = f"what is the {referent_text(ref)}"
    return Question("relation", text, _name(pairs[target]), target, anchor)


def spatial(rng, pairs, centres, hold: Holdout) -> Question | None:
    want = bool(rng.integers(2))
    options = []
    for i in range(len(pairs)):
        for j in range(len(pairs)):
            if i == j or not hold.allows([pairs[i], pairs[j]]):
                continue
            for rel in SPATIAL:
                if not hold.allows([], Relation(rel, Name(*PAIRS[pairs[j]]))):
                    continue  # "is X left of Y" asks the held-out combination "left of:Y"
                axis, sign = _DIRECTIONS[rel]
                delta = sign * (centres[i, axis] - centres[j, axis])
                if (delta > MARGIN) if want else (delta < -MARGIN):
                    options.append((i, j, rel))
    if not options:
        return None
    i, j, rel = options[int(rng.integers(len(options)))]
    text = f"is the {_name(pairs[i])} {rel} the {_name(pairs[j])}"
    return Question("spatial", text, "yes" if want else "no", i, j)


def count(rng, pairs, centres, hold: Holdout) -> Question | None:
    kinds = [*SHAPES, "shape", *COLOURS]
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind in COLOURS:
        n = sum(PAIRS[p][0] == kind for p in pairs)
        return Question("count", f"how many {kind} shapes are there", NUMBERS[n])
    n = sum(kind in ("shape", PAIRS[p][1]) for p in pairs)
    return Question("count", f"how many {PLURALS[kind]} are there", NUMBERS[n])


def pointing(rng, pairs, centres, hold: Holdout) -> Question | None:
    """Where a referent is: a named shape half the time, else a unique attribute or a
    relation (the grounding the instructions need, as data)."""
    options = [(Name(*PAIRS[p]), i) for i, p in enumerate(pairs)]
    if rng.random() < 0.5:
        for i, p in enumerate(pairs):
            for ref in (Colour(PAIRS[p][0]), Shape(PAIRS[p][1])):
                if resolve(ref, pairs, centres) == i:
                    options.append((ref, i))
        options += referents(pairs, centres, hold)
        options = options[len(pairs) :] or options
    options = [(r, t) for r, t in options if hold.allows(_touched(r, pairs, t), r)]
    if not options:
        return None
    ref, target = options[int(rng.integers(len(options)))]
    return Question("pointing", f"where is the {referent_text(ref)}", "point", target)


def chain(rng, pairs, centres, hold: Holdout, reached=frozenset()) -> Question | None:
    """Where a sequence instruction goes now: "the X then the Y" is X until X is reached (drawn
    dimmed), then Y. The scene's reached shape, if any, is X: the env's chains go in order."""
    named = [i for i, p in enumerate(pairs) if resolve(Name(*PAIRS[p]), pairs, centres) == i]
    order = [(i, j) for i in named for j in named if i != j and (not reached or i in reached)]
    order = [(i, j) for i, j in order if hold.allows([pairs[i], pairs[j]])]
    if not order:
        return None
    i, j = order[int(rng.integers(len(order)))]
    text = f"where is the {_name(pairs[i])} then the {_name(pairs[j])}"
    return Question("chain", text, "point", j if i in reached else i)


ASK = dict(
    caption=caption,
    attribute=attribute,
    relation=relation,
    spatial=spatial,
    count=count,
    pointing=pointing,
    chain=chain,
)


def ask(
    rng: np.random.Generator, family: str, pairs, centres, hold: Holdout, reached=frozenset()
) -> Question | None:
    """One question of `family` about the scene (`reached`: the shape drawn dimmed, if any),
    or None when it has none the holdout allows."""
    extra = {"reached": frozenset(reached)} if family == "chain" else {}
    return ASK[family](rng, list(pairs), np.asarray(centres), hold, **extra)
