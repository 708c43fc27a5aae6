"""The first referent not yet reached: pooling per referent, the weights, and the policy with it."""

import numpy as np
import torch

from tests.builders import build_policy
from vla.envs.expert import expert_action
from vla.envs.reach import ReachEnv
from vla.models.referents import ReferentSelector
from vla.models.tokenizer import Tokenizer


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
    assert enc.referents_done.shape == (2, obs["instruction"].count(" then ") + 1)
    assert not torch.allclose(enc.referents_done[0], enc.referents_done[1])
    assert not torch.allclose(enc.features[0], enc.features[1])
