"""VLAPolicy end to end: training loss, inference, masking, positions, its parts."""

import io

import pytest
import torch

from vla import keys
from vla.config import instantiate
from vla.errors import ConfigError


def _features(policy, batch, tokens=None):
    policy.eval()
    with torch.no_grad():
        return policy.encode(
            batch[keys.IMAGE],
            batch[keys.STATE],
            tokens if tokens is not None else batch[keys.TOKENS],
        ).features


@pytest.mark.parametrize("readout", ["self", "cross"])
@pytest.mark.parametrize("attn_impl", ["sdpa", "naive"])
def test_extra_padding_does_not_change_the_action(make_policy, make_batch, readout, attn_impl):
    policy = make_policy("tiny", f"model.readout.mode={readout}", f"model.attn_impl={attn_impl}")
    batch = make_batch(policy, batch_size=3)
    tokens = batch[keys.TOKENS]  # [B,8]: at most 5 real words, then PAD
    assert (tokens[:, 5:] == 0).all()
    short, long = _features(policy, batch, tokens[:, :5]), _features(policy, batch, tokens)
    torch.testing.assert_close(long, short, atol=1e-5, rtol=0)


@pytest.mark.parametrize("pos_emb", ["learned", "sinusoidal"])
def test_positions_make_the_readout_depend_on_patch_order(make_policy, make_batch, pos_emb):
    def readouts(kind):
        policy = make_policy(
            "tiny",
            "model.image_encoder.coord_features=false",
            "model/film=none",
            "model/keypoints=none",  # keypoints see the image's layout, positions or not
            f"model.pos_emb={kind}",
        )
        batch = make_batch(policy, batch_size=2)
        # rolling the image by one patch permutes the patch tokens and nothing else
        shift = policy.image_encoder.patch_size
        rolled = dict(batch, **{keys.IMAGE: batch[keys.IMAGE].roll(shift, dims=2)})
        return _features(policy, batch), _features(policy, rolled)

    same, rolled = readouts("none")  # control: without positions the encoder sees a set
    torch.testing.assert_close(same, rolled, atol=1e-5, rtol=0)
    same, rolled = readouts(pos_emb)
    assert (same - rolled).abs().max() > 1e-3


@pytest.mark.parametrize(
    ("head", "term"), [("continuous", "mse_norm"), ("discrete", "ce"), ("autoregressive", "ce")]
)
@pytest.mark.parametrize("readout", ["self", "cross"])
def test_every_parameter_gets_a_gradient(make_policy, make_batch, head, term, readout):
    policy = make_policy("tiny", f"model/head={head}", f"model.readout.mode={readout}")
    loss, logs = policy(make_batch(policy, batch_size=4))
    loss.backward()
    missing = [n for n, p in policy.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert not missing
    assert torch.equal(logs[term], loss.detach())  # the policy's loss is the head's own


def test_checkpoint_round_trip_and_vocab_mismatch(make_policy, make_batch):
    policy = make_policy("tiny")
    policy.set_normalization([0.5] * 4, [0.3] * 4, [-0.5, -0.5], [0.5, 0.5])
    buffer = io.BytesIO()
    torch.save(policy.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    fresh = make_policy("tiny", seed=1)
    fresh.load_state_dict(state)
    batch = make_batch(policy)
    torch.testing.assert_close(_features(fresh, batch), _features(policy, batch))
    torch.testing.assert_close(fresh.normalizer.action_high, torch.tensor([0.5, 0.5]))
    # a checkpoint whose vocabulary has a different size cannot be loaded silently
    state["tokenizer._extra_state"] = {"vocab": ["<pad>", "<unk>", "red"], "max_len": 8}
    state["text_encoder.embed.weight"] = torch.zeros(3, 64)
    with pytest.raises(RuntimeError, match="size mismatch for text_encoder.embed.weight"):
        make_policy("tiny").load_state_dict(state)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("+model.readout.d_model=32", "model.readout.d_model=32 is set by model.d_model"),
        ("+model.head.chunk_size=2", "model.head.chunk_size=2 is set by model.chunk_size"),
        ("+model.text_encoder.vocab_size=30", "model.text_encoder.vocab_size=30 is set by the policy"),
    ],
)  # fmt: skip
def test_a_part_cannot_restate_a_size_the_policy_gives_it(compose_model_cfg, override, message):
    with pytest.raises(ConfigError, match=message):
        instantiate(compose_model_cfg("tiny", [override]).model)
