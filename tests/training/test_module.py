"""The behavior-cloning recipe: the target-keypoint loss lives here and only here, the
training step never samples or decodes, validation measures the predicted chunks, and a
small policy overfits real frames."""

import numpy as np
import pytest
import torch

from tests.builders import build_policy, env_frames, random_batch
from vla import keys
from vla.errors import ConfigError
from vla.eval.runner import PolicyRunner
from vla.models.heads.base import mean_over_real_steps
from vla.training.module import BCModule, image_mse


def module_for(policy, weight=0.0) -> BCModule:
    return BCModule(policy, optimizer=torch.optim.AdamW, target_keypoint_weight=weight)


def test_the_target_keypoint_loss_is_added_by_the_recipe_alone():
    policy = build_policy("tiny")
    batch = random_batch(policy)
    action_loss, _ = policy(batch)  # the policy knows nothing of the target
    loss, logs, encoding = module_for(policy, weight=0.5).model_step(batch)
    aux = image_mse(encoding.outputs["keypoints_xy"][:, 0], batch)
    torch.testing.assert_close(loss, action_loss + 0.5 * aux, rtol=0, atol=1e-6)
    assert torch.equal(logs["target_keypoint_mse"], aux.detach())
    # keypoint 0 at the image's centre (0, 0) and a target at the arena's (0.75, 0.25):
    # 2 * target - 1 = (0.5, -0.5), a squared distance of 0.5
    xy = torch.zeros(1, 2)
    assert image_mse(xy, {keys.TARGET: torch.tensor([[0.75, 0.25]])}).item() == pytest.approx(0.5)
    without = {k: v for k, v in batch.items() if k != keys.TARGET}  # off: no TARGET needed
    loss, logs, _ = module_for(policy).model_step(without)
    assert torch.equal(loss, action_loss) and "target_keypoint_mse" not in logs


def test_keypoints_none_turns_the_target_loss_off_and_asking_for_both_fails(compose_cfg):
    cfg = compose_cfg("train", ["model=tiny", "model/keypoints=none"])
    assert cfg.model.keypoints is None and cfg.bc.target_keypoint_weight == 0
    assert compose_cfg("train", ["model=tiny"]).bc.target_keypoint_weight == 1.0
    policy = build_policy("tiny", "model/keypoints=none")
    assert not module_for(policy).uses_target
    with pytest.raises(ConfigError) as info:
        module_for(policy, weight=1.0)
    message = str(info.value)
    assert "\n" not in message
    assert "bc.target_keypoint_weight=1.0" in message and "model/keypoints=none" in message
    with pytest.raises(ConfigError, match="bc.target_keypoint_weight=-1 must be >= 0"):
        module_for(build_policy("tiny"), weight=-1)


def test_the_target_position_probe_is_the_recipes_and_reads_the_readout():
    policy = build_policy("tiny", "model/keypoints=none")
    batch = random_batch(policy)
    action_loss, _ = policy(batch)
    module = BCModule(policy, optimizer=torch.optim.AdamW, target_position_weight=2.0)
    assert module.uses_target
    loss, logs, encoding = module.model_step(batch)
    guess = module.target_probe(encoding.features.flatten(1))  # [B,R*D] -> [B,2]
    aux = (guess - (2 * batch[keys.TARGET] - 1)).square().sum(-1).mean()
    torch.testing.assert_close(loss, action_loss + 2.0 * aux, rtol=0, atol=1e-6)
    assert torch.equal(logs["target_position_mse"], aux.detach())
    aux.backward()  # it trains what the readout carries...
    assert policy.readout.queries.grad is not None and policy.readout.queries.grad.abs().sum() > 0
    assert not any("probe" in k for k in policy.state_dict())  # ...and no rollout sees it
    with pytest.raises(ConfigError, match="bc.target_position_weight=-1 must be >= 0"):
        BCModule(policy, optimizer=torch.optim.AdamW, target_position_weight=-1)


@pytest.mark.parametrize("head", ["discrete", "continuous", "autoregressive", "flow"])
def test_training_never_predicts_and_validation_measures_the_prediction(head, monkeypatch):
    policy = build_policy("tiny", f"model/head={head}", "model.chunk_size=2")
    module = module_for(policy, weight=1.0)
    batch = random_batch(policy, batch_size=3)
    batch[keys.ACTION] = torch.rand(3, 2, 2) * 2 - 1  # [B,K,A] chunks
    batch[keys.ACTION_IS_PAD] = torch.tensor([[False, True], [False, False], [False, False]])
    calls = []
    predict = policy.head.predict
    monkeypatch.setattr(policy.head, "predict", lambda f: calls.append(f) or predict(f))
    policy.train()
    assert torch.isfinite(module.training_step(batch, 0))
    assert calls == []  # no sampling, no decoding in a training step
    policy.eval()
    with torch.no_grad():
        module.validation_step(batch, 0)
        assert len(calls) == 1
        policy.head.reset()
        features = policy.encode(batch[keys.IMAGE], batch[keys.STATE], batch[keys.TOKENS])
        error = (policy.predict_chunk(features.features) - batch[keys.ACTION]).square()
        expected = mean_over_real_steps(error, batch[keys.ACTION_IS_PAD])
        policy.head.reset()
        assert torch.equal(module.action_mse(features.features, batch), expected)
        moved = dict(batch)  # whatever the padded step holds, the metric is the same
        moved[keys.ACTION] = torch.where(batch[keys.ACTION_IS_PAD][..., None], 5.0, batch[keys.ACTION])  # fmt: skip
        policy.head.reset()
        assert torch.equal(module.action_mse(features.features, moved), expected)


@pytest.mark.slow
def test_tiny_policy_overfits_real_env_frames():
    images, states, texts, actions, targets = env_frames()
    policy = build_policy("tiny")
    policy.set_normalization(states.mean(0), states.std(0), actions.min(0), actions.max(0))
    batch = {
        keys.IMAGE: torch.from_numpy(images),
        keys.STATE: torch.from_numpy(states),
        keys.TOKENS: policy.tokenizer.encode(texts),
        keys.ACTION: torch.from_numpy(actions),
        keys.TARGET: torch.from_numpy(targets),
    }
    module = module_for(policy, weight=1.0)

    def action_mse():
        with policy.inference():
            return module.action_mse(policy.encode(*(batch[k] for k in (keys.IMAGE, keys.STATE, keys.TOKENS))).features, batch).item()  # fmt: skip

    first = action_mse()
    opt = torch.optim.AdamW(policy.parameters(), lr=2e-3)
    policy.train()
    for _ in range(150):  # all four bounds hold from ~110 steps on
        loss, logs, _ = module.model_step(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert logs["ce"].item() < 0.01, logs  # the action head's own loss
    assert logs["target_keypoint_mse"].item() < 0.1, logs  # keypoint 0 near the target
    assert action_mse() < 0.01 * first
    pred = PolicyRunner(policy, num_envs=len(images)).act(
        {keys.IMAGE: images, keys.STATE: states, keys.INSTRUCTION: texts}
    )
    assert np.abs(pred - actions).max() < 0.2
