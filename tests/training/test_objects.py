"""The object losses: matching is the minimum-cost assignment (checked against every
assignment), the pointer's label is the slot of the shape to reach now, the recipe adds both
with their weights, and a slot detector trained on real frames finds every shape."""

import itertools

import numpy as np
import pytest
import torch

from tests.builders import build_policy, random_batch
from vla import keys
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.models.objects import ObjectEncoder
from vla.training.module import BCModule
from vla.training.objects import match_slots, object_losses


def brute_force(slots_xy, centres):
    """Every one-to-one assignment of shapes to slots, scored one by one."""
    K, M = len(slots_xy), len(centres)
    best = min(
        itertools.permutations(range(K), M),
        key=lambda perm: sum(((slots_xy[k] - centres[m]) ** 2).sum() for m, k in enumerate(perm)),
    )
    return list(best)


def test_matching_is_the_cheapest_one_to_one_assignment():
    g = torch.Generator().manual_seed(0)
    slots, centres = torch.rand(50, 5, 2, generator=g), torch.rand(50, 3, 2, generator=g)
    slot, cost = match_slots(slots, centres)
    for b in range(50):
        assert slot[b].tolist() == brute_force(slots[b].numpy(), centres[b].numpy())
    torch.testing.assert_close(
        cost, (slots.gather(1, slot[..., None].expand(-1, -1, 2)) - centres).square().sum(-1)
    )
    # two shapes nearest the same slot still get different slots
    slot, _ = match_slots(
        torch.tensor([[[0.0, 0.0], [1.0, 1.0]]]), torch.tensor([[[0.1, 0], [0, 0.1]]])
    )
    assert sorted(slot[0].tolist()) == [0, 1]


def test_the_pointer_label_is_the_slot_holding_the_shape_to_reach():
    slots = torch.tensor([[[-0.5, -0.5], [0.5, 0.5], [0.0, 0.0]]])  # image units
    centres = torch.tensor([[[0.75, 0.75], [0.25, 0.25]]])  # arena: slot 1, then slot 0
    target = centres[:, 1]  # the shape at (0.25, 0.25) -> slot 0
    logits = torch.tensor([[5.0, 0.0, 0.0]])
    losses = object_losses(slots, logits, centres, target)
    assert losses["slot_mse"].item() == pytest.approx(0.0)
    assert losses["pointer_accuracy"].item() == 1.0
    expected = torch.nn.functional.cross_entropy(logits, torch.tensor([0]))
    torch.testing.assert_close(losses["pointer_ce"], expected)


def test_the_attribute_probes_are_scored_at_the_slot_matched_to_each_shape():
    slots = torch.tensor([[[-0.5, -0.5], [0.5, 0.5], [0.0, 0.0]]])  # image units
    centres = torch.tensor([[[0.75, 0.75], [0.25, 0.25]]])  # arena: slot 1, then slot 0
    labels = torch.tensor([[[2, 1], [0, 2]]])  # (colour, kind) of each shape
    colour = torch.zeros(1, 3, 4)
    colour[0, 1, 2] = colour[0, 0, 0] = 9.0  # right at both matched slots
    kind = torch.zeros(1, 3, 3)
    kind[0, 1, 1] = 9.0  # right at slot 1; slot 0 says kind 0, but shape 2 is kind 2
    kind[0, 0, 0] = 9.0
    losses = object_losses(slots, None, centres, centres[:, 0], (colour, kind, labels))
    assert losses["attribute_accuracy"].item() == 0.5  # one of the two shapes fully right
    ce = torch.nn.functional.cross_entropy
    expected = ce(colour[0, [1, 0]], labels[0, :, 0]) + ce(kind[0, [1, 0]], labels[0, :, 1])
    torch.testing.assert_close(losses["attribute_ce"], expected)


def test_the_recipe_adds_the_object_losses_with_their_weights():
    policy = build_policy("tiny", "model/objects=slots")
    batch = random_batch(policy)
    action_loss, _ = policy(batch)
    module = BCModule(policy, torch.optim.AdamW, object_slot_weight=0.5, pointer_weight=2.0)
    assert module.uses_target and module.uses_objects
    assert not BCModule(policy, torch.optim.AdamW).uses_objects
    loss, logs, enc = module.model_step(batch)
    xy, logits = enc.outputs["objects_xy"], enc.outputs["pointer_logits"]
    aux = object_losses(xy, logits, batch[keys.OBJECTS], batch[keys.TARGET])
    torch.testing.assert_close(loss, action_loss + 0.5 * aux["slot_mse"] + 2.0 * aux["pointer_ce"])
    assert xy.shape == (4, 6, 2) and logits.shape == (4, 6)
    module = BCModule(policy, torch.optim.AdamW, object_attribute_weight=3.0)
    batch[keys.OBJECT_PAIRS] = torch.tensor([[0, 4, 8]] * 4)  # red circle, green square, ...
    loss, logs, enc = module.model_step(batch)
    assert logs["attribute_ce"] > 0 and 0 <= logs["attribute_accuracy"] <= 1
    torch.testing.assert_close(loss, action_loss + 3.0 * logs["attribute_ce"])
    with pytest.raises(ConfigError, match=r"bc.pointer_weight=1.0 needs model.objects.pointer"):
        no_pointer = build_policy("tiny", "model/objects=slots", "model.objects.pointer=false")
        BCModule(no_pointer, torch.optim.AdamW, pointer_weight=1.0)
    with pytest.raises(ConfigError, match=r"need model/objects"):
        BCModule(build_policy("tiny"), torch.optim.AdamW, pointer_weight=1.0)
    with pytest.raises(ConfigError, match="bc.object_slot_weight=-1 must be >= 0"):
        BCModule(policy, torch.optim.AdamW, object_slot_weight=-1)


@pytest.mark.slow
def test_slots_trained_on_real_frames_find_every_shape():
    env = ReachEnv(image_size=48)
    images, centres = [], []
    for seed in range(256):
        obs, _ = env.reset(seed=seed)
        images.append(obs[keys.IMAGE])
        centres.append(env.object_centres.copy())
    images, centres = torch.from_numpy(np.stack(images)), torch.from_numpy(np.stack(centres))
    torch.manual_seed(0)
    enc = ObjectEncoder(image_size=48, num_slots=4, d_model=16, hidden=16, kernel_size=5)
    opt = torch.optim.Adam(enc.parameters(), lr=1e-2)
    for _ in range(150):
        b = torch.randint(0, 224, (32,))
        xy, _, _ = enc.slots(images[b])
        loss = object_losses(xy, None, centres[b], centres[b, 0])["slot_mse"]
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():  # held-out scenes: the typical shape has a slot on its centre
        xy, _, _ = enc.slots(images[224:])
        _, cost = match_slots(xy, 2 * centres[224:] - 1)
    distance = cost.sqrt() / 2  # image units -> arena units (untrained: ~0.2)
    assert distance.median().item() < 0.03, distance.median()
