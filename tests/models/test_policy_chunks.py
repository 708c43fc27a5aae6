"""The policy with action chunks: every head x chunk size trains and predicts; the queue of
`predict_action`; targets that do not fit the head are refused."""

import numpy as np
import pytest
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from vla import keys
from vla.models.heads import HEADS


def chunk_batch(policy, make_batch, batch_size=4):
    """A random batch whose actions are [B,K,A] chunks, the last step of the first padded."""
    batch = make_batch(policy, batch_size=batch_size)
    K = policy.chunk_size
    g = torch.Generator().manual_seed(1)
    batch[keys.ACTION] = torch.rand(batch_size, K, 2, generator=g) * 2 - 1
    batch[keys.ACTION_IS_PAD] = torch.zeros(batch_size, K, dtype=torch.bool)
    batch[keys.ACTION_IS_PAD][0, K - 1 :] = K > 1
    return batch


@pytest.mark.parametrize("chunk_size", [1, 4])
@pytest.mark.parametrize("head", HEADS)
def test_every_head_and_chunk_size_trains_and_predicts(make_policy, make_batch, head, chunk_size):
    n_steps = min(2, chunk_size)
    policy = make_policy(
        "tiny",
        f"model.head={head}",
        f"model.chunk_size={chunk_size}",
        f"model.n_action_steps={n_steps}",
        "model.flow_steps=3",
    )
    assert policy.chunk_size == chunk_size and policy.n_action_steps == n_steps
    batch = chunk_batch(policy, make_batch)

    def loss():
        torch.manual_seed(0)  # the flow head's times and noise: the same draws each time
        return policy(batch)

    before, logs = loss()
    assert torch.isfinite(before) and logs["action_mse"] >= 0
    opt = torch.optim.AdamW(policy.parameters(), lr=2e-3)
    for _ in range(8):
        opt.zero_grad()
        loss()[0].backward()
        opt.step()
    assert loss()[0] < before
    image, state, tokens = batch[keys.IMAGE], batch[keys.STATE], batch[keys.TOKENS]
    chunks = policy.predict_chunk_tensors(image, state, tokens)
    assert chunks.shape == (4, chunk_size, 2) and chunks.abs().max() <= 1
    one = policy.predict_action({"image": image[0], "state": state[0], "instruction": "go to the red circle"})  # fmt: skip
    assert one.shape == (2,) and np.isfinite(one).all()


def test_the_policy_loss_and_its_error_ignore_padded_steps(make_policy, make_batch):
    policy = make_policy("tiny", "model.head=continuous", "model.chunk_size=4")
    batch = chunk_batch(policy, make_batch)
    pad = batch[keys.ACTION_IS_PAD][..., None]  # [B,K,1]
    moved = dict(batch, **{keys.ACTION: torch.where(pad, 5.0, batch[keys.ACTION])})
    (loss, logs), (moved_loss, moved_logs) = policy(batch), policy(moved)
    assert torch.equal(loss, moved_loss) and torch.equal(logs["action_mse"], moved_logs["action_mse"])  # fmt: skip


def test_single_actions_and_one_step_chunks_give_the_same_loss(make_policy, make_batch):
    policy = make_policy("tiny")
    batch = make_batch(policy)
    chunked = dict(batch, **{keys.ACTION: batch[keys.ACTION][:, None]})  # [B,A] -> [B,1,A]
    assert torch.equal(policy(batch)[0], policy(chunked)[0])


def test_a_batch_that_does_not_fit_the_chunk_size_is_refused(make_policy, make_batch):
    policy = make_policy("tiny", "model.chunk_size=4")
    with pytest.raises(ValueError, match="chunks of 1 actions but the head predicts chunk_size=4"):
        policy(make_batch(policy))


def test_predict_action_executes_n_actions_of_each_chunk(make_policy, make_batch):
    policy = make_policy("tiny", "model.head=continuous", "model.chunk_size=4", "model.n_action_steps=3")  # fmt: skip
    batch = make_batch(policy, batch_size=4)
    texts = ["go to the red circle"] * 4
    obs = [
        {"image": batch[keys.IMAGE][i], "state": batch[keys.STATE][i], "instruction": texts[i]}
        for i in range(4)
    ]
    tokens = policy.tokenizer.encode(texts)
    chunks = policy.predict_chunk_tensors(batch[keys.IMAGE], batch[keys.STATE], tokens).numpy()
    policy.reset()
    got = [policy.predict_action(o) for o in obs]  # queries on obs 0 (steps 0-2), then obs 3
    np.testing.assert_allclose(got, [chunks[0, 0], chunks[0, 1], chunks[0, 2], chunks[3, 0]], atol=1e-6)  # fmt: skip
    assert policy.queued_actions == 2
    policy.reset()  # a new episode forgets the old chunk
    np.testing.assert_allclose(policy.predict_action(obs[1]), chunks[1, 0], atol=1e-6)
    with pytest.raises(ValueError, match="call reset"):
        policy.predict_action({k: batch[k] for k in (keys.IMAGE, keys.STATE)} | {"instruction": texts})  # fmt: skip


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.chunk_size=2", "model.n_action_steps=3"], "n_action_steps=3 must be between 1 and the head's chunk_size=2"),
        (["model.n_action_steps=0"], "n_action_steps=0 must be between 1 and the head's chunk_size=1"),
        (["model.chunk_size=0"], "chunk_size=0 must be >= 1"),
        (["model.head=flow", "model.flow_steps=0"], "flow_steps=0 must be >= 1"),
    ],
)  # fmt: skip
def test_bad_chunk_settings_fail_with_a_clear_message(compose_model_cfg, overrides, message):
    cfg = compose_model_cfg("tiny", overrides)
    with pytest.raises(InstantiationException) as info:
        instantiate(cfg.model.policy)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("experiment", "head"), [("chunked", "DiscreteHead"), ("flow", "FlowHead")]
)
def test_presets_set_the_model_and_the_data_alike(compose_cfg, tmp_path, experiment, head):
    cfg = compose_cfg("train", [f"experiment={experiment}", f"paths.output_dir={tmp_path}"])
    assert cfg.data.chunk_size == cfg.model.chunk_size == 4  # batches follow the model
    policy = instantiate(cfg.model.policy)
    assert type(policy.head).__name__ == head
    assert (policy.chunk_size, policy.n_action_steps) == (4, 2)
    assert compose_cfg("train", [f"paths.output_dir={tmp_path}"]).data.chunk_size == 1
