"""VLAPolicy end to end: training loss, inference API, masking, positions, FLOPs, overfitting."""

import io

import gymnasium as gym
import numpy as np
import pytest
import torch
from einops import rearrange
from torch.utils.flop_counter import FlopCounterMode

import vla  # noqa: F401  (registers vla/Reach-v0)
from vla import keys
from vla.envs.expert import expert_action
from vla.errors import ConfigError


def _features(policy, batch, tokens=None):
    policy.eval()
    with torch.no_grad():
        return policy.encode(
            batch[keys.IMAGE],
            batch[keys.STATE],
            tokens if tokens is not None else batch[keys.TOKENS],
        )


@pytest.mark.parametrize("readout", ["self", "cross"])
@pytest.mark.parametrize("attn_impl", ["sdpa", "naive"])
def test_extra_padding_does_not_change_the_action(make_policy, make_batch, readout, attn_impl):
    policy = make_policy("tiny", f"model.readout={readout}", f"model.attn_impl={attn_impl}")
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
            "model.coord_features=false",
            "model.film=false",
            "model.keypoints=0",  # keypoints see the image's layout, positions or not
            "model.target_keypoint_weight=0",
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


@pytest.mark.parametrize("head", ["continuous", "discrete", "autoregressive"])
@pytest.mark.parametrize("readout", ["self", "cross"])
def test_every_parameter_gets_a_gradient(make_policy, make_batch, head, readout):
    policy = make_policy("tiny", f"model.head={head}", f"model.readout={readout}")
    loss, logs = policy(make_batch(policy, batch_size=4))
    loss.backward()
    missing = [n for n, p in policy.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert not missing
    assert logs["loss"] == loss.detach() and logs["action_mse"] >= 0


def _env_frames(n=32, image_size=32):
    """n (observation, expert action, target position) triples from short expert episodes
    of the real env."""
    env = gym.make("vla/Reach-v0", image_size=image_size)
    images, states, texts, actions, targets = [], [], [], [], []
    seed = 0
    while len(images) < n:
        obs, _ = env.reset(seed=seed)
        seed += 1
        for _ in range(4):
            action = expert_action(env.unwrapped)
            images.append(obs["image"])
            states.append(obs["state"])
            texts.append(obs["instruction"])
            actions.append(action)
            targets.append(env.unwrapped.target_position.astype(np.float32))
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
    env.close()
    return (
        np.stack(images[:n]),
        np.stack(states[:n]),
        texts[:n],
        np.stack(actions[:n]),
        np.stack(targets[:n]),
    )


def test_tiny_policy_overfits_real_env_frames(make_policy):
    images, states, texts, actions, targets = _env_frames()
    policy = make_policy("tiny")
    policy.set_normalization(states.mean(0), states.std(0), actions.min(0), actions.max(0))
    batch = {
        keys.IMAGE: torch.from_numpy(images),
        keys.STATE: torch.from_numpy(states),
        keys.TOKENS: policy.tokenizer.encode(texts),
        keys.ACTION: torch.from_numpy(actions),
        keys.TARGET: torch.from_numpy(targets),
    }
    opt = torch.optim.AdamW(policy.parameters(), lr=2e-3)
    policy.train()
    first = policy(batch)[1]["action_mse"].item()
    for _ in range(300):
        loss, logs = policy(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert logs["ce"].item() < 0.01, logs  # the action head's own loss
    assert logs["target_keypoint_mse"].item() < 0.1, logs  # keypoint 0 near the target
    assert logs["action_mse"].item() < 0.01 * first
    pred = policy.predict_action({"image": images, "state": states, "instruction": texts})
    assert np.abs(pred - actions).max() < 0.2


def test_predict_action_single_and_batched(make_policy):
    policy = make_policy("tiny")
    policy.train()
    images, states, texts, _, _ = _env_frames(n=3)
    one = policy.predict_action({"image": images[0], "state": states[0], "instruction": texts[0]})
    assert one.shape == (2,) and one.dtype == np.float32 and np.abs(one).max() <= 1
    many = policy.predict_action({"image": images, "state": states, "instruction": texts})
    assert many.shape == (3, 2) and many.dtype == np.float32
    np.testing.assert_allclose(many[0], one, atol=1e-5)
    assert policy.training  # restored after inference
    tensors = policy.predict_action_tensors(
        torch.from_numpy(images), torch.from_numpy(states), policy.tokenizer.encode(texts)
    )
    np.testing.assert_allclose(tensors.numpy(), many, atol=1e-6)
    torch_obs = {
        "image": torch.from_numpy(images),
        "state": torch.from_numpy(states),
        "instruction": tuple(texts),
    }
    np.testing.assert_allclose(policy.predict_action(torch_obs), many, atol=1e-6)


def test_predict_action_refuses_bad_input_and_maps_unknown_words(make_policy):
    policy = make_policy("tiny", "model.head=continuous")  # unquantised, so words show
    image, state = np.zeros((32, 32, 3), np.uint8), np.full(4, 0.5, np.float32)
    bad_state = state.copy()
    bad_state[1] = np.nan
    with pytest.raises(ValueError, match="state contains NaN or inf"):
        policy.predict_action({"image": image, "state": bad_state, "instruction": "reach"})
    bad_image = image.astype(np.float32)
    bad_image[0, 0, 0] = np.inf
    with pytest.raises(ValueError, match="image contains NaN or inf"):
        policy.predict_action({"image": bad_image, "state": state, "instruction": "reach"})
    with pytest.raises(ValueError, match="no 'instruction'"):
        policy.predict_action({"image": image, "state": state})
    # both unknown words become UNK, so the policy cannot tell them apart
    a = policy.predict_action(
        {"image": image, "state": state, "instruction": "reach the purple circle"}
    )
    b = policy.predict_action(
        {"image": image, "state": state, "instruction": "reach the mauve circle"}
    )
    c = policy.predict_action(
        {"image": image, "state": state, "instruction": "reach the red circle"}
    )
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


@pytest.mark.parametrize("readout", ["self", "cross"])
def test_attention_maps(make_policy, make_batch, readout):
    policy = make_policy("tiny", f"model.readout={readout}")
    batch = make_batch(policy, batch_size=2)
    weights, layout = policy.attention_maps(
        batch[keys.IMAGE], batch[keys.STATE], batch[keys.TOKENS]
    )
    T = policy.num_tokens()
    # 32 px in 16 px patches: 4 patches, then 8 keypoints, 8 words, the state (and readout)
    assert T == 4 + 8 + 8 + 1 + (1 if readout == "self" else 0)
    assert layout["image"] == slice(0, 4) and layout["keypoints"] == slice(4, 12)
    assert layout["text"] == slice(12, 20)
    assert len(weights) == 2 + (1 if readout == "cross" else 0)
    for w in weights:
        assert w.shape[:2] == (2, 4) and w.shape[-1] == layout["state"].stop + (readout == "self")
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
        pad = batch[keys.TOKENS] == 0  # [B,L]: PAD words get no attention from anyone
        assert (w[:, :, :, layout["text"]].permute(0, 3, 1, 2)[pad] == 0).all()


@pytest.mark.parametrize(
    "override",
    [
        "model.head=continuous",
        "model.head=discrete",
        "model.readout=cross",
        "model.head=autoregressive",
        "model.head=flow",
        "model.chunk_size=4",
        "model.keypoint_kernel=7",
    ],
)
def test_flops_match_a_counted_forward(make_policy, make_batch, override):
    policy = make_policy("tiny", override, "model.attn_impl=naive").eval()
    batch = make_batch(policy, batch_size=2)
    target = policy.normalizer.normalize_action(batch[keys.ACTION])[:, None]  # [B,1,A]
    target = target.expand(-1, policy.chunk_size, -1)  # [B,K,A]
    with FlopCounterMode(display=False) as encoder_counter:
        features = policy.encode(batch[keys.IMAGE], batch[keys.STATE], batch[keys.TOKENS])
    with FlopCounterMode(display=False) as head_counter:
        if override == "model.head=autoregressive":
            # what training runs: one teacher-forced pass over the K*A action tokens (its
            # loss also decodes greedily for a metric, which the FLOP estimate leaves out)
            bins = rearrange(policy.head.encode(target), "b k a -> b (k a)")  # time-major
            policy.head(features, bins[:, :-1])
        elif override == "model.head=flow":  # one denoiser pass, as a training step runs
            policy.head.velocity(target, torch.ones(2), features)
        else:
            policy.head.loss(features, target)
    enc = policy.image_encoder  # coordinate embedding: once per batch, not per sample
    per_batch = 2 * enc.num_patches * enc.patch_size**2 * 2 * enc.d_model
    head = head_counter.get_total_flops() / 2
    counted = (encoder_counter.get_total_flops() - per_batch) / 2 + head
    assert policy.head.flops() == pytest.approx(head, rel=0.01)  # the head alone: tiny share
    assert policy.flops_per_sample() == pytest.approx(counted, rel=0.01)


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


def test_policy_rejects_mismatched_parts(make_policy):
    from vla.models.text_encoder import TextEncoder

    policy = make_policy("tiny")
    parts = {
        n: getattr(policy, n)
        for n in [
            "tokenizer",
            "image_encoder",
            "text_encoder",
            "state_encoder",
            "encoder",
            "readout",
            "head",
            "normalizer",
            "film",
        ]
    }
    with pytest.raises(
        ConfigError, match="tokenizer.vocab_size=17 does not match text_encoder.vocab_size=30"
    ):
        type(policy)(
            **dict(parts, text_encoder=TextEncoder(64, vocab_size=30, max_len=8)), d_model=64
        )
    with pytest.raises(ConfigError, match="image_encoder.d_model=64 does not match d_model=32"):
        type(policy)(**parts, d_model=32)
