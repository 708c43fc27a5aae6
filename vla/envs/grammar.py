"""The task's language: a small compositional grammar of reaching instructions.

    instruction := VERB "the" referent ("then the" referent)*
    referent    := COLOUR SHAPE                     name        "red circle"
                 | COLOUR "one" | SHAPE             attribute   "red one", "triangle"
                 | "shape" RELATION "the" referent  relation    "shape left of the blue square"
                 | SUPERLATIVE KIND                 relation    "leftmost circle", "topmost shape"

Instructions are data (`Instruction`, a verb and one referent per target in order) that
`text` writes and `parse` reads back; `vla.envs.referents` finds what a referent picks out in
a scene. The vocabulary (`vocabulary`) is derived from the grammar, so every word an
instruction can contain is known before any data exists, except the `UNKNOWN_VERBS`, which
exist to test what words a policy never saw do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# name -> RGB. Distinct in hue and brightness so a 48 px image separates them at a glance.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (230, 40, 40),
    "green": (40, 200, 60),
    "blue": (50, 90, 240),
    "yellow": (240, 220, 40),
}
SHAPES: tuple[str, ...] = ("circle", "square", "triangle")
# Every (colour, shape) pair, in a fixed order: the index of a pair is stable across runs.
PAIRS: tuple[tuple[str, str], ...] = tuple((c, s) for c in COLOURS for s in SHAPES)

# The phrasings: "{verb} the {referent}". The two-verb ones make the held-out ones (below)
# new arrangements of words that training phrasings already use.
VERBS: tuple[str, ...] = (
    "reach",
    "go to",
    "move to",
    "touch",
    "navigate to",
    "find",
    "go and touch",
    "find and reach",
    "go and reach",
    "find and touch",
)
UNKNOWN_VERBS: tuple[str, ...] = ("approach", "head to", "walk to")  # not in the vocabulary
RELATIONS: tuple[str, ...] = ("left of", "right of", "above", "below", "nearest")
SUPERLATIVES: tuple[str, ...] = ("leftmost", "rightmost", "topmost", "bottommost")
KINDS: tuple[str, ...] = (*SHAPES, "shape")  # what a superlative ranges over
RELATION_WORDS: tuple[str, ...] = (*RELATIONS, *SUPERLATIVES)  # what a relation turns on

# The default held-out split (see `vla.envs.families`): never in a training instruction.
HELD_OUT_PAIRS: tuple[int, ...] = (0, 4, 8)  # red circle, green square, blue triangle
HELD_OUT_VERBS: tuple[str, ...] = ("go and reach", "find and touch")
HELD_OUT_RELATIONS: tuple[str, ...] = (  # "relation:reference" (or "superlative:kind")
    "left of:yellow circle",
    "right of:red square",
    "above:green circle",
    "below:blue square",
    "nearest:yellow triangle",
    "leftmost:triangle",
    "topmost:circle",
)
MAX_CHAIN = 3  # the longest sequence the grammar is asked to produce (a held-out level)
_PUNCTUATION = re.compile(r"[^\w\s]")


class GrammarError(ValueError):
    """Text that the task's grammar does not produce."""


@dataclass(frozen=True)
class Name:
    colour: str
    shape: str


@dataclass(frozen=True)
class Colour:
    colour: str


@dataclass(frozen=True)
class Shape:
    shape: str


@dataclass(frozen=True)
class Relation:
    relation: str  # one of RELATIONS
    reference: Referent


@dataclass(frozen=True)
class Superlative:
    superlative: str  # one of SUPERLATIVES
    kind: str  # one of KINDS


Referent = Name | Colour | Shape | Relation | Superlative


@dataclass(frozen=True)
class Instruction:
    """A verb and the referents to reach, in order (one for every family but `sequence`)."""

    verb: str
    referents: tuple[Referent, ...]


def referent_text(ref: Referent) -> str:
    if isinstance(ref, Name):
        return f"{ref.colour} {ref.shape}"
    if isinstance(ref, Colour):
        return f"{ref.colour} one"
    if isinstance(ref, Shape):
        return ref.shape
    if isinstance(ref, Relation):
        return f"shape {ref.relation} the {referent_text(ref.reference)}"
    return f"{ref.superlative} {ref.kind}"


def text(instruction: Instruction) -> str:
    """ "reach the red circle", "go to the red circle then the blue square", ..."""
    referents = " then the ".join(referent_text(r) for r in instruction.referents)
    return f"{instruction.verb} the {referents}"


def relation_key(ref: Relation | Superlative) -> str:
    """How held-out relation combinations are named: "left of:blue square", "leftmost:circle"."""
    if isinstance(ref, Superlative):
        return f"{ref.superlative}:{ref.kind}"
    return f"{ref.relation}:{referent_text(ref.reference)}"


def parse_relation_key(key: str) -> Relation | Superlative:
    """The inverse of `relation_key`; raises GrammarError for anything else."""
    relation, _, ref = str(key).partition(":")
    if relation in SUPERLATIVES and ref in KINDS:
        return Superlative(relation, ref)
    if relation in RELATIONS:
        return Relation(relation, _referent(ref.split(), key))
    raise GrammarError(f"{key!r} is not 'relation:referent' or 'superlative:kind'")


def split_words(text: str) -> list[str]:
    """Lowercase, drop punctuation, split on whitespace (as the tokenizer reads text)."""
    return _PUNCTUATION.sub(" ", text.lower()).split()


def parse(text: str) -> Instruction:
    """Reads any instruction of the grammar, with any verb (known or not) before the first
    "the"; raises GrammarError naming the part it cannot read."""
    words = split_words(text)
    if "the" not in words[1:]:
        raise GrammarError(f"{text!r}: expected '<verb> the <referent>'")
    first = words.index("the", 1)
    parts, current = [], []
    for i, w in enumerate(words[first + 1 :], start=first + 1):
        if w == "then" and words[i + 1 : i + 2] == ["the"]:
            parts.append(current)
            current = []
        elif not (w == "the" and words[i - 1] == "then"):
            current.append(w)
    parts.append(current)
    return Instruction(" ".join(words[:first]), tuple(_referent(p, text) for p in parts))


def _referent(words: list[str], text: str) -> Referent:
    if len(words) == 2 and words[0] in COLOURS and words[1] in SHAPES:
        return Name(words[0], words[1])
    if len(words) == 2 and words[0] in COLOURS and words[1] == "one":
        return Colour(words[0])
    if len(words) == 1 and words[0] in SHAPES:
        return Shape(words[0])
    if len(words) == 2 and words[0] in SUPERLATIVES and words[1] in KINDS:
        return Superlative(words[0], words[1])
    if words[:1] == ["shape"]:
        for relation in sorted(RELATIONS, key=len, reverse=True):
            n = len(relation.split())
            if words[1 : 1 + n] == relation.split() and words[1 + n : 2 + n] == ["the"]:
                return Relation(relation, _referent(words[2 + n :], text))
    raise GrammarError(f"{text!r}: cannot read the referent {' '.join(words)!r}")


def vocabulary() -> list[str]:
    """Every word the grammar produces (UNKNOWN_VERBS excepted), sorted so that the list and
    the token ids never change."""
    words = {"the", "then", "one", "shape", *COLOURS, *SHAPES, *SUPERLATIVES}
    for phrase in (*VERBS, *RELATIONS):
        words |= set(phrase.split())
    return sorted(words)


def max_words() -> int:
    """Words in the longest instruction the grammar produces: the longest verb with the
    longest of a relation (to a named shape) and a chain of MAX_CHAIN named shapes."""
    verb = max(len(v.split()) for v in (*VERBS, *UNKNOWN_VERBS))
    relation = 1 + max(len(r.split()) for r in RELATIONS) + 1 + 2  # shape REL the C S
    chain = 2 * MAX_CHAIN + 2 * (MAX_CHAIN - 1)  # C S (then the C S)*
    return verb + 1 + max(relation, chain)
