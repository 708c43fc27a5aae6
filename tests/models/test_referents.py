"""The first referent not yet reached: pooling per referent, the weights, and the policy with it."""

import math

import numpy as np
import pytest
import torch

from tests.builders import build_policy, random_batch
from vla import keys
from vla.envs.expert import expert_action
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.models.referents import ReferentSelector
from vla.models.tokenizer import Tokenizer
from vla.training.module import BCModule, referent_done_loss, referent_keypoint_loss


def test_each_referent_pools_its_own_words():
    selector = ReferentSelector(d_model=1, hidden=4)
    tokens = Tokenizer(max_len=14).encode(["reach the red circle then the blue square", "go"])
    words = torch.arange(tokens.shape[1], dtype=torch.float32).expand(2, -1)[..., None]
    refs, valid = selector.pool(words, tokens)  # word l's vector is l
    # "reach the red circle" are words 0-3, "then the blue square" words 4-7
    assert refs[0, :, 0].tolist() == [1.5, 5.5] and valid.tolist() == [[True, True], [True, False]]
    assert refs[1, 0, 0].item() == 0.0  # "go" alone: PAD is in no referent


def test_the_weights_pick_the_first_referent_not_done():
    done = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    valid = torch.ones(4, 3, dtype=torch.bool)
    w = ReferentSelector.weights(done, valid)
    assert w.tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]]  # all done: the last
    one = ReferentSelector.weights(torch.tensor([[0.7, 0.2]]), torch.tensor([[True, False]]))
    assert one.tolist() == [[1.0, 0.0]]  # one referent takes all, whatever its done
    soft = ReferentSelector.weights(torch.rand(64, 4), torch.rand(64, 4) < 2)
    torch.testing.assert_close(soft.sum(-1), torch.ones(64))


def test_the_policy_reads_done_off_the_image():
    """With the selector the policy gives done [B,R] per referent, read from the image: the
    same instruction before and after the first shape is reached (drawn dimmed) gives another
    done, and, through the referent it picks, other features."""
    torch.manual_seed(0)
    policy = build_policy(
        "tiny", "model/referents=first_undone", "model.text_encoder.referent_positions=true"
    ).eval()
    env = ReachEnv(image_size=32, families=["sequence"], num_targets=3)
    obs, info = env.reset(seed=3)
    before = obs["image"]
    while info["targets_reached"] == 0:  # the expert reaches the first shape: drawn dimmed
        obs, _, _, _, info = env.step(expert_action(env))
    after = obs["image"]
    image = torch.as_tensor(np.stack([before, after]))
    tokens = policy.tokenizer.encode([obs["instruction"]] * 2)
    state = torch.zeros(2, 4)
    with torch.no_grad():
        policy.referents.to_done.weight.normal_()  # a detector that reads something
        enc = policy.encode(image, state, tokens)
    assert enc.done_logits.shape == (2, obs["instruction"].count(" then ") + 1)
    assert not torch.allclose(enc.done_logits[0], enc.done_logits[1])
    assert not torch.allclose(enc.features[0], enc.features[1])


def test_done_is_read_at_each_maps_peak_or_pooled_by_it():
    features = torch.randn(2, 9, 4)  # [B,H*W,C]
    where = torch.softmax(torch.randn(2, 3, 9), -1)  # [B,R,H*W]
    peak = ReferentSelector(d_model=8, hidden=4, read="peak")
    with torch.no_grad():
        peak.to_done.weight.normal_()
    at = features[torch.arange(2)[:, None], where.argmax(-1)]  # [B,R,C]: each map's peak pixel
    torch.testing.assert_close(peak.done_logits(features, where), peak.to_done(at)[..., 0])
    pooled = ReferentSelector(d_model=8, hidden=4, read="map")
    pooled.load_state_dict(peak.state_dict())
    torch.testing.assert_close(
        pooled.done_logits(features, where), peak.to_done(where @ features)[..., 0]
    )


def test_keypoint_0_alone_is_the_first_of_all_keypoints():
    from vla.models.keypoints import KeypointEncoder

    torch.manual_seed(0)
    kp = KeypointEncoder(image_size=16, num_keypoints=4, d_model=8, hidden=6)
    with torch.no_grad():
        kp.to_gain.weight.normal_()
        kp.log_temperature.normal_()
    h = kp.features(torch.randint(0, 256, (2, 16, 16, 3), dtype=torch.uint8))
    cond = torch.randn(2, 3, 8)  # [B,N,D]
    xy, where = kp.locate(h, cond)
    xy0, where0 = kp.locate(h, cond, num=1)
    torch.testing.assert_close(where0, where[:, :, :1])
    torch.testing.assert_close(xy0, xy[:, :, :1])


def test_done_loss_asks_referent_r_once_more_than_r_shapes_were_reached():
    tokens = Tokenizer(max_len=14).encode(["reach the red circle then the blue square", "go"])
    count = ReferentSelector(d_model=1, hidden=1).count(tokens)
    assert count.tolist() == [2, 1]
    logits = torch.zeros(2, 2)  # P(done) = 0.5: every valid referent costs log 2
    assert referent_done_loss(logits, count, torch.tensor([1, 0])).item() == pytest.approx(
        math.log(2)
    )
    sure = torch.tensor([[20.0, -20.0], [-20.0, 20.0]])  # "go"'s second referent is no referent
    assert referent_done_loss(sure, count, torch.tensor([1, 0])).item() < 1e-6
    wrong = torch.tensor([[-20.0, -20.0], [-20.0, 20.0]])  # the first was reached: not "not done"
    assert referent_done_loss(wrong, count, torch.tensor([1, 0])).item() == pytest.approx(
        20 / 3, rel=1e-3
    )


def test_reached_keypoints_are_pulled_onto_the_shapes_reached_only():
    xy = torch.zeros(2, 3, 2)  # every referent's keypoint at the image centre
    reached_xy = torch.tensor([[[0.75, 0.25]], [[0.0, 0.0]]])  # [B,C=1,2] arena units
    # sample 0 reached one shape, at (0.75, 0.25): 2 * target - 1 = (0.5, -0.5), 0.5 away
    # squared; sample 1 reached none, so its row counts for nothing
    loss = referent_keypoint_loss(xy, reached_xy, torch.tensor([1, 0]))
    assert loss.item() == pytest.approx(0.5)
    assert referent_keypoint_loss(xy, reached_xy, torch.tensor([0, 0])).item() == 0.0
    # with the shape to reach now, referent r = reached is pulled onto it as well: sample 0's
    # referent 1 onto (0.5, 1.0), 1.0 away squared; sample 1's referent 0 onto (0.5, 0.5), 0
    target = torch.tensor([[0.5, 1.0], [0.5, 0.5]])
    loss = referent_keypoint_loss(xy, reached_xy, torch.tensor([1, 0]), target)
    assert loss.item() == pytest.approx((0.5 + 1.0 + 0.0) / 3)


def test_first_undone_supervises_done_and_the_loss_is_the_recipes(compose_cfg):
    cfg = compose_cfg("train", ["model=tiny", "model/referents=first_undone"])
    assert cfg.model.referents.read == "peak" and cfg.bc.referent_done_weight == 1.0
    assert cfg.bc.referent_keypoint_weight == 1.0
    policy = build_policy("tiny", "model/referents=first_undone")
    batch = random_batch(policy)
    B = len(batch[keys.ACTION])
    batch[keys.REACHED] = torch.arange(B) % 2
    batch[keys.REACHED_XY] = torch.rand(B, 1, 2)
    module = BCModule(
        policy,
        optimizer=torch.optim.AdamW,
        referent_done_weight=0.5,
        referent_keypoint_weight=0.25,
    )
    loss, logs, encoding = module.model_step(batch)
    action_loss, _ = policy.action_loss(encoding.features, batch)
    count = policy.referents.count(batch[keys.TOKENS])
    done = referent_done_loss(encoding.done_logits, count, batch[keys.REACHED])
    where = referent_keypoint_loss(
        encoding.referents_xy, batch[keys.REACHED_XY], batch[keys.REACHED]
    )
    torch.testing.assert_close(loss, action_loss + 0.5 * done + 0.25 * where)
    assert torch.equal(logs["referent_done_ce"], done.detach()) and where > 0
    with pytest.raises(ConfigError, match="referent_done_weight"):
        BCModule(build_policy("tiny"), optimizer=torch.optim.AdamW, referent_done_weight=1.0)


def test_the_selector_can_read_another_keypoint_than_the_targets():
    """keypoint=1: done and the referent's position come from keypoint 1's map, so keypoint 0
    is left to find the shape to reach; a keypoint the encoder lacks fails at construction, naming both keys."""
    torch.manual_seed(0)
    policy = build_policy(
        "tiny", "model/referents=first_undone", "model.referents.keypoint=1"
    ).eval()
    image = torch.randint(0, 256, (2, 32, 32, 3), dtype=torch.uint8)
    tokens = policy.tokenizer.encode(["reach the red circle then the blue square"] * 2)
    with torch.no_grad():
        policy.keypoints.to_gain.weight.normal_()
        enc = policy.encode(image, torch.zeros(2, 4), tokens)
        hidden = policy.keypoints.features(image)
        refs, _ = policy.referents.pool(policy.text_encoder(tokens)[0], tokens)
        xy, _ = policy.keypoints.locate(hidden, refs)  # [B,R,K,2]
    torch.testing.assert_close(enc.referents_xy, xy[:, :, 1])
    assert not torch.allclose(enc.referents_xy, xy[:, :, 0])
    with pytest.raises(ConfigError, match="num_keypoints"):
        build_policy("tiny", "model/referents=first_undone", "model.referents.keypoint=99")


def test_the_selector_can_have_a_detector_of_its_own():
    """detector=own: each referent's map and done come from the selector's own detector, not
    the policy's keypoints, and the keypoint loss then also pulls the referent to reach now
    onto the target; keypoint must be 0 with it."""
    torch.manual_seed(0)
    policy = build_policy("tiny", "model/referents=first_undone", "model.referents.detector=own")
    own = policy.referents.detector
    assert own is not None and own.num_keypoints == 1 and not hasattr(own, "to_token")
    image = torch.randint(0, 256, (2, 32, 32, 3), dtype=torch.uint8)
    tokens = policy.tokenizer.encode(["reach the red circle then the blue square"] * 2)
    with torch.no_grad():
        own.to_gain.weight.normal_()
        enc = policy.eval().encode(image, torch.zeros(2, 4), tokens)
        refs, _ = policy.referents.pool(policy.text_encoder(tokens)[0], tokens)
        xy, _ = own.locate(own.features(image), refs)  # [B,R,1,2]
    torch.testing.assert_close(enc.referents_xy, xy[:, :, 0])
    batch = random_batch(policy.train())
    B = len(batch[keys.ACTION])
    batch[keys.REACHED] = torch.arange(B) % 2
    batch[keys.REACHED_XY] = torch.rand(B, 1, 2)
    module = BCModule(policy, optimizer=torch.optim.AdamW, referent_keypoint_weight=1.0)
    _, logs, encoding = module.model_step(batch)
    with_target = referent_keypoint_loss(
        encoding.referents_xy, batch[keys.REACHED_XY], batch[keys.REACHED], batch[keys.TARGET]
    )
    torch.testing.assert_close(logs["referent_keypoint_mse"], with_target.detach())
    module.model_step(batch)[0].backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in own.parameters())
    with pytest.raises(ConfigError, match="'shared' or 'own'"):
        ReferentSelector(d_model=8, hidden=4, detector="bogus")
    with pytest.raises(ConfigError, match="detector=own"):
        build_policy(
            "tiny",
            "model/referents=first_undone",
            "model.referents.detector=own",
            "model.referents.keypoint=1",
        )


@pytest.mark.parametrize("detach", [False, True])
def test_detached_words_take_nothing_from_the_maps_losses(detach):
    """detach=true: what is computed from the referents' maps (their positions, done) sends no
    gradient into the words, which still condition vision; without it, it does."""
    torch.manual_seed(0)
    policy = build_policy(
        "tiny",
        "model/referents=first_undone",
        "model.referents.detector=own",
        f"model.referents.detach={str(detach).lower()}",
    )
    torch.nn.init.normal_(policy.referents.to_done.weight)
    torch.nn.init.normal_(policy.referents.detector.to_gain.weight)  # zero at the start
    image = torch.randint(0, 256, (2, 32, 32, 3), dtype=torch.uint8)
    tokens = policy.tokenizer.encode(["reach the red circle then the blue square"] * 2)
    enc = policy.encode(image, torch.zeros(2, 4), tokens)
    (enc.referents_xy.sum() + enc.done_logits.sum()).backward()
    embedding = policy.text_encoder.embed.weight.grad
    assert (embedding is not None and embedding.abs().sum() > 0) != detach
    assert policy.referents.detector.to_gain.weight.grad.abs().sum() > 0


def test_done_can_be_read_from_the_images_colour_at_each_maps_peak():
    """read=pixel: done is a linear read of the image's RGB (in [0,1]) where each referent's map
    peaks, so a dimmed shape reads darker whatever its size; a read the selector lacks fails."""
    torch.manual_seed(0)
    policy = build_policy(
        "tiny",
        "model/referents=first_undone",
        "model.referents.detector=own",
        "model.referents.read=pixel",
    ).eval()
    own, selector = policy.referents.detector, policy.referents
    assert selector.to_done.in_features == 3
    image = torch.randint(0, 256, (2, 32, 32, 3), dtype=torch.uint8)
    tokens = policy.tokenizer.encode(["reach the red circle then the blue square"] * 2)
    with torch.no_grad():
        own.to_gain.weight.normal_()
        selector.to_done.weight.normal_()
        enc = policy.encode(image, torch.zeros(2, 4), tokens)
        refs, _ = selector.pool(policy.text_encoder(tokens)[0], tokens)
        _, where = own.locate(own.features(image), refs)  # [B,R,1,H*W]
        assert where.shape[-1] == 32 * 32  # the maps are at the image's resolution
        peak = where[:, :, 0].argmax(-1)  # [B,R]
        colour = image.reshape(2, -1, 3)[torch.arange(2)[:, None], peak].float() / 255
        torch.testing.assert_close(enc.done_logits, selector.to_done(colour)[..., 0])
    with pytest.raises(ConfigError, match="'peak', 'map' or 'pixel'"):
        ReferentSelector(d_model=8, hidden=4, read="bogus")
