"""The policy with action chunks: every head x chunk size trains and predicts; targets and
settings that do not fit are refused."""

import pytest
import torch

from tests.builders import CONF_DIR
from vla import keys
from vla.config import instantiate
from vla.errors import ConfigError

HEADS = sorted(p.stem for p in (CONF_DIR / "model" / "head").glob("*.yaml"))
TERMS = {"continuous": "mse_norm", "discrete": "ce", "autoregressive": "ce", "flow": "flow_mse"}


def chunk_batch(policy, make_batch, batch_size=4):
    """A random batch whose actions are [B,K,A] chunks, the last step of the first padded."""
    batch = make_batch(policy, batch_size=batch_size)
    K = policy.chunk_size
    g = torch.Generator().manual_seed(1)
    batch[keys.ACTION] = torch.rand(batch_size, K, 2, generator=g) * 2 - 1
    batch[keys.ACTION_IS_PAD] = torch.zeros(batch_size, K, dtype=torch.bool)
    batch[keys.ACTION_IS_PAD][0, K - 1 :] = K > 1
    return batch


def test_the_heads_are_the_config_groups_files():
    assert HEADS == ["autoregressive", "continuous", "discrete", "flow"]


@pytest.mark.parametrize("chunk_size", [1, 4])
@pytest.mark.parametrize("head", HEADS)
def test_every_head_and_chunk_size_trains_and_predicts(make_policy, make_batch, head, chunk_size):
    n_steps = min(2, chunk_size)
    policy = make_policy(
        "tiny",
        f"model/head={head}",
        f"model.chunk_size={chunk_size}",
        f"model.n_action_steps={n_steps}",
        *(["model.head.flow_steps=3"] if head == "flow" else []),
    )
    assert policy.chunk_size == chunk_size and policy.n_action_steps == n_steps
    batch = chunk_batch(policy, make_batch)

    def loss():
        torch.manual_seed(0)  # the flow head's times and noise: the same draws each time
        return policy(batch)

    before, logs = loss()
    assert torch.isfinite(before) and torch.equal(logs[TERMS[head]], before.detach())
    opt = torch.optim.AdamW(policy.parameters(), lr=2e-3)
    for _ in range(8):
        opt.zero_grad()
        loss()[0].backward()
        opt.step()
    assert loss()[0] < before
    image, state, tokens = batch[keys.IMAGE], batch[keys.STATE], batch[keys.TOKENS]
    chunks = policy.predict_chunk_tensors(image, state, tokens)
    assert chunks.shape == (4, chunk_size, 2) and chunks.abs().max() <= 1


def test_the_policy_loss_ignores_padded_steps(make_policy, make_batch):
    policy = make_policy("tiny", "model/head=continuous", "model.chunk_size=4")
    batch = chunk_batch(policy, make_batch)
    pad = batch[keys.ACTION_IS_PAD][..., None]  # [B,K,1]
    moved = dict(batch, **{keys.ACTION: torch.where(pad, 5.0, batch[keys.ACTION])})
    assert torch.equal(policy(batch)[0], policy(moved)[0])


def test_single_actions_and_one_step_chunks_give_the_same_loss(make_policy, make_batch):
    policy = make_policy("tiny")
    batch = make_batch(policy)
    chunked = dict(batch, **{keys.ACTION: batch[keys.ACTION][:, None]})  # [B,A] -> [B,1,A]
    assert torch.equal(policy(batch)[0], policy(chunked)[0])


def test_a_batch_that_does_not_fit_the_chunk_size_is_refused(make_policy, make_batch):
    policy = make_policy("tiny", "model.chunk_size=4")
    with pytest.raises(ValueError, match=r"target_norm has shape \(4, 1, 2\), expected \[B,K,A\] = \(4, 4, 2\)"):  # fmt: skip
        policy(make_batch(policy))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.chunk_size=2", "model.n_action_steps=3"], "n_action_steps=3 must be between 1 and chunk_size=2"),
        (["model.n_action_steps=0"], "n_action_steps=0 must be between 1 and chunk_size=1"),
        (["model.chunk_size=0"], "chunk_size=0 must be >= 1"),
        (["model/head=flow", "model.head.flow_steps=0"], "flow_steps=0 must be >= 1"),
    ],
)  # fmt: skip
def test_bad_chunk_settings_fail_with_a_clear_message(compose_model_cfg, overrides, message):
    cfg = compose_model_cfg("tiny", overrides)
    with pytest.raises(ConfigError, match=message):
        instantiate(cfg.model)


@pytest.mark.parametrize(
    ("experiment", "head"), [("chunked", "DiscreteHead"), ("flow", "FlowHead")]
)
def test_presets_set_chunks_and_the_steps_executed(compose_cfg, tmp_path, experiment, head):
    cfg = compose_cfg("train", [f"experiment={experiment}", f"paths.output_dir={tmp_path}"])
    policy = instantiate(cfg.model)
    assert type(policy.head).__name__ == head
    assert (policy.chunk_size, policy.n_action_steps) == (4, 2)
