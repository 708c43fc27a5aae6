"""The relational keypoint: its terms, its bias on keypoint 0, the reference it finds, and
the reference labels the data gives its training-only loss."""

import pytest
import torch

from tests.builders import build_policy, random_batch
from vla import keys
from vla.data.datamodule import reference_centres, reference_pairs
from vla.envs.grammar import PAIRS
from vla.errors import ConfigError
from vla.models.relations import RelationalKeypoint
from vla.training.module import BCModule, reference_keypoint_loss


def test_terms_are_each_pixels_offset_from_the_reference():
    rel = RelationalKeypoint(d_model=4, width=0.5)
    grid = torch.tensor([[0.0, 0.0], [1.0, -1.0]])  # [P=2,2]
    terms = rel.terms(grid, torch.tensor([[1.0, 0.0]]))  # [1,2,4]
    # offsets (-1, 0) and (0, -1): both 1 away squared, so both bumps are exp(-1 / (2 w^2))
    bump = torch.exp(torch.tensor(-1 / (2 * 0.5**2))).item()
    expected = torch.tensor([[[-1.0, 0.0, 1.0, bump], [0.0, -1.0, 1.0, bump]]])
    torch.testing.assert_close(terms, expected)


def test_nearest_with_the_bump_picks_the_closest_other_shape():
    """Scored -|d|^2 - 10 bump, the best of three shapes is the nearest one that is not the
    reference itself; without the bump it would be the reference."""
    rel = RelationalKeypoint(d_model=1, width=0.1)
    shapes = torch.tensor([[0.0, 0.0], [0.3, 0.0], [-0.8, 0.0]])  # reference, near, far
    with torch.no_grad():
        rel.to_coefficients.bias.copy_(torch.tensor([0.0, 0.0, -1.0, -10.0]))
    bias = rel(shapes, shapes[:1], torch.zeros(1, 1))  # [1,3]
    assert bias.argmax(-1).item() == 1
    with torch.no_grad():
        rel.to_coefficients.bias.copy_(torch.tensor([0.0, 0.0, -1.0, 0.0]))
    assert rel(shapes, shapes[:1], torch.zeros(1, 1)).argmax(-1).item() == 0


def test_the_reference_pools_the_words_and_ignores_pad():
    rel = RelationalKeypoint(d_model=2)
    words = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [9.0, 9.0]]])
    with torch.no_grad():
        rel.query.copy_(torch.tensor([100.0, 0.0]))  # all attention on the first word
    ref = rel.reference(words, torch.tensor([[False, False, True]]))
    torch.testing.assert_close(ref, torch.tensor([[1.0, 0.0]]), atol=1e-4, rtol=0)
    with pytest.raises(ConfigError, match="width"):
        RelationalKeypoint(d_model=2, width=0.0)


def test_the_bias_moves_keypoint_0_alone():
    policy = build_policy("tiny")
    kp = policy.keypoints
    h = kp.features(torch.randint(0, 256, (2, 32, 32, 3), dtype=torch.uint8))
    cond = torch.randn(2, policy.d_model)
    xy, _ = kp.locate(h, cond)
    bias = torch.zeros(2, h.shape[1])
    bias[:, 0] = 1e4  # everything on the first pixel
    biased, where = kp.locate(h, cond, bias=bias)
    torch.testing.assert_close(biased[:, 0], kp.grid_xy[0].expand(2, 2))
    torch.testing.assert_close(biased[:, 1:], xy[:, 1:])
    with pytest.raises(ValueError, match="one conditioning"):  # [B,N,D]: whose bias?
        kp.locate(h, cond[:, None].expand(-1, 3, -1), bias=bias)


def test_the_policy_finds_the_reference_with_keypoint_0_and_biases_the_target():
    torch.manual_seed(0)
    policy = build_policy("tiny", "model/relations=offset").eval()
    plain = build_policy("tiny").eval()
    plain.load_state_dict(policy.state_dict(), strict=False)
    image = torch.randint(0, 256, (2, 32, 32, 3), dtype=torch.uint8)
    tokens = policy.tokenizer.encode(["reach the shape nearest the red circle"] * 2)
    state = torch.zeros(2, 4)
    with torch.no_grad():
        enc = policy.encode(image, state, tokens)  # zero coefficients: keypoints as without
        torch.testing.assert_close(
            enc.keypoints_xy, plain.encode(image, state, tokens).keypoints_xy
        )
        words, pad = policy.text_encoder(tokens)
        hidden = policy.keypoints.features(image)
        ref_xy, _ = policy.keypoints.locate(hidden, policy.relations.reference(words, pad), num=1)
        torch.testing.assert_close(enc.reference_xy, ref_xy[:, 0])
        policy.relations.to_coefficients.bias.copy_(torch.tensor([0.0, 0.0, -50.0, 0.0]))
        pulled = policy.encode(image, state, tokens).keypoints_xy
    # a steep -|d|^2 pulls keypoint 0 onto the reference; the others stay
    assert (pulled[:, 0] - enc.reference_xy).norm(dim=-1).max() < 0.1
    torch.testing.assert_close(pulled[:, 1:], enc.keypoints_xy[:, 1:])
    with pytest.raises(ConfigError, match="model/relations"):
        build_policy("tiny", "model/relations=offset", "model/keypoints=none")


def test_reference_labels_come_from_the_instruction_and_the_scene():
    pairs = reference_pairs([
        "reach the shape nearest the red circle",  # a relation to a named pair
        "reach the red circle",  # no relation
        "reach the leftmost circle",  # a superlative names no reference
        "reach the shape left of the red circle then the blue square",  # a chain
        "approach the thing",  # outside the grammar
    ])  # fmt: skip
    red_circle = PAIRS.index(("red", "circle"))
    assert pairs.tolist() == [red_circle, -1, -1, -1, -1]
    episode = torch.tensor([0, 0, 1])
    centres = torch.tensor([[[0.1, 0.2], [0.3, 0.4]]]).expand(3, 2, 2)
    scene = torch.tensor([[5, red_circle], [red_circle, 5], [red_circle, 5]])
    xy, has = reference_centres(pairs[:2], episode, centres, scene)
    assert has.tolist() == [True, True, False]
    torch.testing.assert_close(xy, torch.tensor([[0.3, 0.4], [0.1, 0.2], [0.0, 0.0]]))


def test_the_reference_loss_is_the_recipes_and_needs_relations():
    policy = build_policy("tiny", "model/relations=offset")
    batch = random_batch(policy)
    B = len(batch[keys.ACTION])
    batch[keys.REFERENCE] = torch.rand(B, 2)
    batch[keys.HAS_REFERENCE] = torch.arange(B) % 2 == 0
    with torch.no_grad():  # a detector whose gain hears the words (zero at init)
        policy.keypoints.to_gain.weight.normal_()
    module = BCModule(policy, optimizer=torch.optim.AdamW, reference_keypoint_weight=0.5)
    assert module.uses_target
    loss, logs, encoding = module.model_step(batch)
    action_loss, _ = policy.action_loss(encoding.features, batch)
    ref = reference_keypoint_loss(
        encoding.reference_xy, batch[keys.REFERENCE], batch[keys.HAS_REFERENCE]
    )
    torch.testing.assert_close(loss, action_loss + 0.5 * ref)
    assert torch.equal(logs["reference_keypoint_mse"], ref.detach()) and ref > 0
    only_first = reference_keypoint_loss(
        torch.zeros(2, 2), torch.tensor([[1.0, 0.5], [0.0, 0.0]]), torch.tensor([True, False])
    )
    assert only_first.item() == pytest.approx(1.0)  # (1, 0) from the centre, squared
    module.model_step(batch)[0].backward()
    assert policy.relations.query.grad.abs().sum() > 0  # the loss teaches which words
    with pytest.raises(ConfigError, match="reference_keypoint_weight"):
        BCModule(build_policy("tiny"), optimizer=torch.optim.AdamW, reference_keypoint_weight=1.0)
