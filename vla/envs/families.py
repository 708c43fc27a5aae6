"""Instruction families and the splits that hold parts of the grammar out of training.

    family     names its target(s) by                         example
    name       colour and shape                               "reach the red circle"
    attribute  the one attribute that is unique in the scene  "go to the red one", "touch the triangle"
    relation   another shape, or a superlative                "find the shape left of the blue square",
                                                              "touch the leftmost circle"
    sequence   two (or more) shapes, to reach in order        "reach the red circle then the blue square"

A split says which instructions a scene may get:

    train            no held-out pair is named or targeted, no held-out phrasing, no held-out
                     relation combination (the demonstrations are always this split)
    novel_pairs      a held-out pair is the target (name, attribute, sequence) or the shape a
                     relation refers to
    novel_verbs      a held-out phrasing, made of words the training phrasings use
    unknown_words    a phrasing with a word outside the vocabulary
    novel_relations  a relation with a reference (or a superlative with a kind) it never had

`candidates` lists every instruction of a family and split that names exactly one object (or
chain) in a scene, grouped by target, attribute or relation word. The env picks a group, then
an instruction in it, so the mix stays even: a relation word is drawn first (`relation_words`)
and scenes are drawn until one has an instruction with it, since "the shape left of ..."
resolves in fewer scenes than "the leftmost shape". `env.relation_words` keeps the draw to
some words (an evaluation of "nearest" alone, say).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vla.envs.grammar import (
    PAIRS,
    RELATION_WORDS,
    SHAPES,
    SUPERLATIVES,
    UNKNOWN_VERBS,
    VERBS,
    Colour,
    Name,
    Referent,
    Relation,
    Shape,
    Superlative,
    relation_key,
)
from vla.envs.grammar import RELATIONS as BINARY_RELATIONS
from vla.envs.referents import resolve

FAMILIES = ("name", "attribute", "relation", "sequence")
SPLITS = ("train", "novel_pairs", "novel_verbs", "unknown_words", "novel_relations")
Candidate = tuple[tuple[Referent, ...], tuple[int, ...]]  # (referents, target indices)


@dataclass(frozen=True)
class Split:
    """A split of the grammar, from the env's held-out sets."""

    name: str = "train"
    held_out_pairs: frozenset[int] = frozenset()
    held_out_verbs: tuple[str, ...] = ()
    held_out_relations: frozenset[str] = frozenset()
    chain_length: int = 2
    relation_words: tuple[str, ...] | None = None  # the only relation words asked (None: all)

    def verbs(self) -> tuple[str, ...]:
        if self.name == "novel_verbs":
            return self.held_out_verbs
        if self.name == "unknown_words":
            return UNKNOWN_VERBS
        return tuple(v for v in VERBS if v not in self.held_out_verbs)

    def allows_target(self, pair: int) -> bool:
        """Held-out pairs are targets only in novel_pairs, where they are the point."""
        return (pair in self.held_out_pairs) == (self.name == "novel_pairs")

    def allows_named(self, pair: int) -> bool:
        return pair not in self.held_out_pairs or self.name == "novel_pairs"

    def allows_relation(self, ref: Relation | Superlative) -> bool:
        return (relation_key(ref) in self.held_out_relations) == (self.name == "novel_relations")


def candidates(
    family: str, pairs: Sequence[int], centres: np.ndarray, split: Split
) -> dict[object, list[Candidate]]:
    """Every instruction of `family` allowed by `split` that names exactly one object (or
    chain) of the scene, by group; empty when the scene has none."""
    if family == "name":
        return {
            i: [((Name(*PAIRS[p]),), (i,))] for i, p in enumerate(pairs) if split.allows_target(p)
        }
    if family == "attribute":
        groups: dict[object, list[Candidate]] = {}
        for i, p in enumerate(pairs):
            colour, shape = PAIRS[p]
            for ref in (Colour(colour), Shape(shape)):
                if split.allows_target(p) and resolve(ref, pairs, centres) == i:
                    groups.setdefault(type(ref).__name__, []).append(((ref,), (i,)))
        return groups
    if family == "relation":
        return _relations(pairs, centres, split)
    if family == "sequence":
        chains = []
        for chain in itertools.permutations(range(len(pairs)), split.chain_length):
            named = [pairs[i] for i in chain]
            held = [p in split.held_out_pairs for p in named]
            if any(held) if split.name == "novel_pairs" else not any(held):
                chains.append((tuple(Name(*PAIRS[p]) for p in named), chain))
        return {"chain": chains} if chains else {}
    raise ValueError(f"unknown family {family!r}")


def relation_words(split: Split) -> list[str]:
    """The relation words a split's relation instructions can use (novel_pairs: only those
    that name a shape; novel_relations: only those with a held-out combination), kept to
    `split.relation_words` when it names some."""
    if split.name == "novel_relations":
        words = [
            w
            for w in RELATION_WORDS
            if any(k.startswith(f"{w}:") for k in split.held_out_relations)
        ]
    elif split.name == "novel_pairs":
        words = list(BINARY_RELATIONS)
    else:
        words = list(RELATION_WORDS)
    if split.relation_words is None:
        return words
    return [w for w in words if w in split.relation_words]


def relation_word(referents: tuple[Referent, ...]) -> str | None:
    """The word a relation instruction turns on ("nearest", "leftmost", ...); None for the
    other families."""
    if len(referents) != 1:
        return None
    (ref,) = referents
    if isinstance(ref, Relation):
        return ref.relation
    return ref.superlative if isinstance(ref, Superlative) else None


def _relations(
    pairs: Sequence[int], centres: np.ndarray, split: Split
) -> dict[object, list[Candidate]]:
    groups: dict[object, list[Candidate]] = {}
    refs: list[Relation | Superlative] = []
    for p in pairs:  # relations to a named shape (novel_pairs: a held-out one)
        if split.allows_target(p):
            refs += [Relation(r, Name(*PAIRS[p])) for r in BINARY_RELATIONS]
    if split.name != "novel_pairs":  # superlatives name no pair
        kinds = [s for s in SHAPES if sum(PAIRS[p][1] == s for p in pairs) >= 2] + ["shape"]
        refs += [Superlative(s, k) for s in SUPERLATIVES for k in kinds]
    for ref in refs:
        target = resolve(ref, pairs, centres)
        if target is None or not split.allows_relation(ref):
            continue
        if not split.allows_named(pairs[target]):
            continue
        word = ref.relation if isinstance(ref, Relation) else ref.superlative
        groups.setdefault(word, []).append(((ref,), (target,)))
    return groups


def named_pairs(ref: Referent) -> list[tuple[str, str]]:
    """The colour+shape pairs a referent names, nested references included."""
    if isinstance(ref, Name):
        return [(ref.colour, ref.shape)]
    if isinstance(ref, Relation):
        return named_pairs(ref.reference)
    return []


def family_of(referents: tuple[Referent, ...]) -> str:
    """The family an instruction's referents belong to."""
    if len(referents) > 1:
        return "sequence"
    (ref,) = referents
    if isinstance(ref, Name):
        return "name"
    if isinstance(ref, Colour | Shape):
        return "attribute"
    return "relation"
