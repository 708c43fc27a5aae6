"""Answers scored: exact words, pointing within the radius; the eyes: keypoint 0 on the shape
(keypoint 1 on the anchor); the training-only pulls onto them."""

import functools

import numpy as np
import pytest
import torch

from tests.vlm.builders import inputs, small_policy
from vla.errors import ConfigError
from vla.vlm.data import (
    ACTION_FAMILY,
    ANCHOR,
    ANCHORED,
    CENTRE,
    FAMILY,
    HAS_STATE,
    IMAGE,
    STATE,
    SUFFIX,
    TARGETED,
    TARGETS,
    TOKENS,
)
from vla.vlm.module import VLMModule
from vla.vlm.questions import FAMILIES
from vla.vlm.scoring import correct, per_family, score_answers, score_grounding
from vla.vlm.vision import FiLMConvVision
from vla.vlm.vocab import VLMTokenizer

RELATIVE = functools.partial(
    FiLMConvVision, channels=4, num_keypoints=2, word_queries=True, relative=True
)


def test_pointing_is_right_within_the_radius_only():
    tok = VLMTokenizer(loc_bins=32)
    centre = np.array([0.5, 0.25])
    assert tok.point_of(tok.point_text(centre)) is not None
    assert correct("pointing", tok.point_text(centre), "", centre, tok)
    assert correct("pointing", tok.point_text([0.54, 0.25]), "", centre, tok)  # 0.04 + bin
    assert not correct("pointing", tok.point_text([0.6, 0.25]), "", centre, tok)  # 0.1 away
    assert not correct("pointing", "red circle", "", centre, tok)
    assert not correct("pointing", tok.point_text(centre) + " <loc_1>", "", centre, tok)


def test_words_must_match_exactly_and_rates_are_per_family():
    tok = VLMTokenizer()
    assert correct("caption", "blue square red circle", "blue square red circle", None, tok)
    assert not correct("caption", "red circle blue square", "blue square red circle", None, tok)
    assert not correct("count", "two", "three", None, tok)
    rates = per_family(["count", "count", "count", "spatial"], [True, True, False, False])
    assert rates["count"]["n"] == 3 and abs(rates["count"]["accuracy"] - 2 / 3) < 1e-9
    assert rates["spatial"]["accuracy"] == 0 and abs(rates["mean"]["accuracy"] - 1 / 3) < 1e-9


def test_keypoint_on_shape_counts_the_examples_about_a_shape_within_the_radius():
    policy = small_policy()
    image, state, tokens = inputs(policy)
    with torch.no_grad():
        _, _, out = policy.prefix(image, state, tokens, torch.zeros(3, dtype=torch.bool))
    seen = (out["keypoints_xy"][:, 0] + 1) / 2  # [3,2] where keypoint 0 is, arena units
    batch = {
        IMAGE: image, STATE: state, TOKENS: tokens, HAS_STATE: torch.zeros(3, dtype=torch.bool),
        FAMILY: torch.tensor([FAMILIES.index("pointing"), FAMILIES.index("relation"), ACTION_FAMILY]),
        CENTRE: seen + torch.tensor([[0.05, 0.0], [0.0, 0.07], [0.0, 0.0]]),
        TARGETED: torch.tensor([True, True, True]),
    }  # fmt: skip
    # within 0.06 / 0.07 away / a demonstration step (not a corpus example)
    assert score_grounding(policy, batch) == (["pointing", "relation"], [True, False])
    batch[TARGETED] = torch.tensor([False, True, True])  # e.g. a count question: no shape
    assert score_grounding(policy, batch) == (["relation"], [False])
    assert score_grounding(policy, batch, radius=0.08) == (["relation"], [True])


def test_keypoint_1_on_the_anchor_and_the_pull_onto_it():
    policy = small_policy(vision=RELATIVE)
    image, state, tokens = inputs(policy)
    no_state = torch.zeros(3, dtype=torch.bool)
    with torch.no_grad():
        _, _, out = policy.prefix(image, state, tokens, no_state)
    kp = (out["keypoints_xy"] + 1) / 2  # [3,2,2] arena units
    targets = torch.tensor([[5, 0], [6, 0], [7, 0]])  # any answer tokens
    batch = {
        IMAGE: image, STATE: state, TOKENS: tokens, HAS_STATE: no_state,
        SUFFIX: targets, TARGETS: targets,
        FAMILY: torch.full((3,), FAMILIES.index("relation")),
        CENTRE: kp[:, 0], TARGETED: torch.ones(3, dtype=torch.bool),
        ANCHOR: kp[:, 1] + torch.tensor([[0.0, 0.0], [0.1, 0.0], [0.0, 0.3]]),
        ANCHORED: torch.tensor([True, True, False]),  # the third has no anchor
    }  # fmt: skip
    assert score_grounding(policy, batch, anchor=True) == (["relation"] * 2, [True, False])
    _, _, eyes = score_answers(policy, batch, with_eyes=True)  # the eyes the answers came from
    assert score_grounding(policy, batch, anchor=True, eyes=eyes) == (
        ["relation"] * 2,
        [True, False],
    )
    module = VLMModule(policy, torch.optim.AdamW, keypoint_weight=1.0, anchor_weight=2.0)
    loss, logs = module.model_step(batch)
    # keypoint 0 sits on its centre; keypoint 1 is 0.1 arena units (0.2 image) off in one of two
    assert logs["keypoint_mse"] < 1e-10
    assert torch.isclose(logs["anchor_mse"], torch.tensor(0.2**2 / 2), atol=1e-5)
    plain = VLMModule(policy, torch.optim.AdamW, keypoint_weight=1.0)
    assert torch.isclose(loss - plain.model_step(batch)[0], 2 * logs["anchor_mse"], atol=1e-5)
    with pytest.raises(ConfigError, match="model.vision.relative=true or bc.anchor_weight=0"):
        VLMModule(small_policy(), torch.optim.AdamW, anchor_weight=1.0)
