import numpy as np
import pytest

from vla.envs import grammar
from vla.envs.grammar import (
    Colour,
    GrammarError,
    Instruction,
    Name,
    Relation,
    Shape,
    Superlative,
    parse,
    text,
)
from vla.envs.referents import MARGIN, resolve

# red circle, green square, blue triangle, yellow circle (indices into PAIRS)
RC, GS, BT, YC = 0, 4, 8, 9


@pytest.mark.parametrize(
    "instruction, words",
    [
        (Instruction("reach", (Name("red", "circle"),)), "reach the red circle"),
        (Instruction("go to", (Colour("red"),)), "go to the red one"),
        (Instruction("touch", (Shape("triangle"),)), "touch the triangle"),
        (
            Instruction("find", (Relation("left of", Name("blue", "square")),)),
            "find the shape left of the blue square",
        ),
        (
            Instruction("go and touch", (Relation("nearest", Colour("green")),)),
            "go and touch the shape nearest the green one",
        ),
        (Instruction("reach", (Superlative("leftmost", "circle"),)), "reach the leftmost circle"),
        (
            Instruction("move to", (Name("red", "circle"), Name("blue", "square"))),
            "move to the red circle then the blue square",
        ),
    ],
)
def test_text_and_parse_are_inverse(instruction, words):
    assert text(instruction) == words
    assert parse(words) == instruction
    assert parse(words.upper() + "!") == instruction  # as the tokenizer reads text


def test_any_verb_parses_and_nonsense_is_refused():
    assert parse("approach the red circle").verb == "approach"
    for bad in ("reach red circle", "reach the purple circle", "reach the shape left the red one"):
        with pytest.raises(GrammarError, match="reach"):
            parse(bad)


def test_vocabulary_is_the_grammars_and_leaves_out_the_unknown_verbs():
    vocab = set(grammar.vocabulary())
    for phrase in (*grammar.VERBS, *grammar.RELATIONS, *grammar.SUPERLATIVES, *grammar.COLOURS):
        assert set(phrase.split()) <= vocab
    for verb in grammar.UNKNOWN_VERBS:
        assert set(verb.split()) - vocab, verb


def test_held_out_phrasings_are_made_of_words_training_phrasings_use():
    training = [v for v in grammar.VERBS if v not in grammar.HELD_OUT_VERBS]
    trained_words = {w for v in training for w in v.split()}
    for verb in grammar.HELD_OUT_VERBS:
        assert set(verb.split()) <= trained_words and verb not in training


def test_max_words_is_the_longest_instruction():
    longest_chain = Instruction("go and touch", tuple(Name("red", "circle") for _ in range(3)))
    assert len(text(longest_chain).split()) == grammar.max_words() == 14


def scene(*objects):
    """pairs and centres [K,2] of (pair, x, y) objects."""
    return [p for p, _, _ in objects], np.array([[x, y] for _, x, y in objects], np.float32)


def test_relations_pick_the_one_object_they_describe():
    pairs, centres = scene((RC, 0.2, 0.5), (GS, 0.5, 0.5), (BT, 0.8, 0.2))
    green_square = Name("green", "square")
    assert resolve(Relation("left of", green_square), pairs, centres) == 0
    assert resolve(Relation("right of", green_square), pairs, centres) == 2
    assert resolve(Relation("above", green_square), pairs, centres) == 2  # y grows downwards
    assert resolve(Relation("below", green_square), pairs, centres) is None  # nothing below
    assert resolve(Relation("nearest", Name("blue", "triangle")), pairs, centres) == 1
    assert resolve(Superlative("rightmost", "shape"), pairs, centres) == 2
    assert resolve(Superlative("topmost", "shape"), pairs, centres) == 2
    assert resolve(Superlative("leftmost", "circle"), pairs, centres) == 0  # the only circle
    assert resolve(Relation("left of", Name("yellow", "circle")), pairs, centres) is None


def test_a_relation_that_is_not_clear_by_the_margin_names_nothing():
    level = MARGIN / 2
    pairs, centres = scene((RC, 0.2, 0.5), (GS, 0.5, 0.5), (YC, 0.5 + level, 0.2))
    # the yellow circle is just right of the green square: not clearly "right of" it, and
    # clearly not left of it
    assert resolve(Relation("right of", Name("green", "square")), pairs, centres) is None
    assert resolve(Relation("left of", Name("green", "square")), pairs, centres) == 0
    assert resolve(Superlative("rightmost", "shape"), pairs, centres) is None
    assert resolve(Superlative("rightmost", "circle"), pairs, centres) == 2  # two circles
    near = scene((RC, 0.5, 0.5), (GS, 0.7, 0.5), (BT, 0.5, 0.7 + MARGIN / 2))
    assert resolve(Relation("nearest", Name("red", "circle")), *near) is None


def test_colour_and_shape_attributes_need_a_unique_object():
    pairs, centres = scene((RC, 0.2, 0.2), (YC, 0.5, 0.5), (GS, 0.8, 0.8))
    assert resolve(Shape("circle"), pairs, centres) is None  # two circles
    assert resolve(Shape("square"), pairs, centres) == 2
    assert resolve(Colour("yellow"), pairs, centres) == 1
