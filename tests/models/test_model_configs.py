"""conf/model/*.yaml compose, instantiate to a working VLAPolicy, and reject bad values clearly."""

import pytest
import torch

from vla.config import check_group_choices, instantiate
from vla.errors import ConfigError
from vla.models.policy import VLAPolicy


@pytest.mark.parametrize(
    ("name", "d_model", "depth", "min_params", "max_params"),
    [("tiny", 64, 2, 0.2e6, 0.3e6), ("small", 128, 4, 1.0e6, 1.2e6), ("base", 256, 6, 5e6, 6e6)],
)
def test_config_composes_instantiates_and_runs(
    compose_model_cfg, make_batch, name, d_model, depth, min_params, max_params
):
    cfg = compose_model_cfg(name, image_size=64)
    assert cfg.model.d_model == d_model and cfg.model.depth == depth
    assert cfg.model.image_size == 64  # wired to env.image_size
    policy = instantiate(cfg.model)
    assert isinstance(policy, VLAPolicy)
    assert len(policy.encoder.blocks) == depth and policy.film is not None
    assert policy.image_encoder.coord_features
    n_params = sum(p.numel() for p in policy.parameters())
    assert min_params < n_params < max_params
    loss, logs = policy(make_batch(policy, batch_size=2))
    assert torch.isfinite(loss) and torch.equal(logs["ce"], loss.detach())


@pytest.mark.parametrize(
    ("override", "check"),
    [
        ("model/film=none", lambda p: p.film is None),
        ("model/keypoints=none", lambda p: "keypoints" not in p.sources and "keypoints" not in p.token_layout()),
        ("model.keypoints.hidden=16", lambda p: p.sources["keypoints"].detect.out_channels == 16),
        ("model.image_encoder.coord_features=false", lambda p: not p.image_encoder.coord_features),
        ("model/head=continuous", lambda p: type(p.head).__name__ == "ContinuousHead"),
        ("model/head=autoregressive", lambda p: type(p.head).__name__ == "AutoregressiveHead"),
        ("model.readout.mode=cross", lambda p: p.readout.mode == "cross" and "readout" not in p.token_layout()),
        ("model.attn_impl=naive", lambda p: p.encoder.blocks[0].attn.attn_impl == "naive"),
        ("model.pos_emb=sinusoidal", lambda p: p.image_encoder.pos.kind == "sinusoidal"),
        ("model.head.num_bins=32", lambda p: p.head(torch.zeros(1, p.head.num_readouts, p.d_model)).shape == (1, 1, 2, 32)),
        ("model.head.hidden_dim=48", lambda p: p.head.action_head[0].out_features == 48),
        ("model.depth=1", lambda p: len(p.encoder.blocks) == 1),
    ],
)  # fmt: skip
def test_command_line_overrides(make_policy, make_batch, override, check):
    policy = make_policy("tiny", override)
    assert check(policy)
    assert not check(make_policy("tiny")), f"the default already satisfies {override}'s check"
    loss, _ = policy(make_batch(policy, batch_size=2))
    assert torch.isfinite(loss)


@pytest.mark.parametrize(
    ("overrides", "image_size", "message"),
    [
        (["model.d_model=100", "model.n_heads=3"], 32, "d_model=100 is not divisible by n_heads=3"),
        ([], 60, "image_size=60 is not divisible by patch_size=16"),
        (["model.readout.mode=both"], 32, "unknown readout 'both'"),
        (["model.pos_emb=sinusoidal", "model.d_model=66", "model.n_heads=3"], 32, "dim % 4 == 0"),
    ],
)  # fmt: skip
def test_bad_values_fail_with_a_clear_message(compose_model_cfg, overrides, image_size, message):
    cfg = compose_model_cfg("tiny", overrides, image_size=image_size)
    with pytest.raises(ConfigError) as info:
        instantiate(cfg.model)
    assert str(info.value).startswith(message) or message in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.head=flow"], "model.head='flow' sets a config group like a value: choose one with model/head=<autoregressive|continuous|discrete|flow>"),
        (["model.keypoints=0"], "model.keypoints=0 sets a config group like a value: choose one with model/keypoints=<none|spatial_softmax>"),
        (["model.film=false"], "model.film=False sets a config group like a value: choose one with model/film=<none|patches>"),
    ],
)  # fmt: skip
def test_a_group_set_like_a_value_names_the_group_choice(compose_cfg, overrides, message):
    """The old flat knobs (`model.head=flow`, `model.keypoints=0`) are group choices now."""
    with pytest.raises(ConfigError) as info:
        check_group_choices(compose_cfg("train", overrides))
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("overrides", "check"),
    [
        (["model/head=autoregressive", "model.head.depth=2"], lambda h: len(h.blocks) == 2),
        (["model/head=flow", "model.head.time_dim=16"], lambda h: h.time_dim == 16),
        (["model/head=flow", "model.head.seed=3"], lambda h: h.seed == 3),
        (["model/head=flow", "model.head.flow_steps=20"], lambda h: h.flow_steps == 20),
        (["model/head=continuous", "model.head.loss=smooth_l1"], lambda h: h.loss_kind == "smooth_l1"),
    ],
)  # fmt: skip
def test_every_head_argument_is_reachable(make_policy, overrides, check):
    assert check(make_policy("tiny", *overrides).head)


def test_an_argument_a_head_does_not_take_is_the_users_error(compose_model_cfg):
    cfg = compose_model_cfg("tiny", ["+model.head.depth=2"])  # the discrete head has no depth
    with pytest.raises(ConfigError, match="model.head: DiscreteHead takes no argument 'depth'"):
        instantiate(cfg.model)
