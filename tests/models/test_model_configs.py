"""conf/model/*.yaml compose, instantiate to a working VLAPolicy, and reject bad values clearly."""

import pytest
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate

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
    assert cfg.model.policy.image_encoder.image_size == 64  # wired to env.image_size
    policy = instantiate(cfg.model.policy)
    assert isinstance(policy, VLAPolicy)
    assert len(policy.encoder.blocks) == depth and policy.film is not None
    assert policy.image_encoder.coord_features
    n_params = sum(p.numel() for p in policy.parameters())
    assert min_params < n_params < max_params
    loss, logs = policy(make_batch(policy, batch_size=2))
    assert torch.isfinite(loss) and {"loss", "action_mse"} <= set(logs)


@pytest.mark.parametrize(
    ("override", "check"),
    [
        ("model.film=false", lambda p: p.film is None),
        ("model.coord_features=false", lambda p: not p.image_encoder.coord_features),
        ("model.head=continuous", lambda p: type(p.head).__name__ == "ContinuousHead"),
        ("model.head=autoregressive", lambda p: type(p.head).__name__ == "AutoregressiveHead"),
        ("model.readout=cross", lambda p: p.readout.mode == "cross" and "readout" not in p.token_layout()),
        ("model.attn_impl=naive", lambda p: p.encoder.blocks[0].attn.attn_impl == "naive"),
        ("model.pos_emb=sinusoidal", lambda p: p.image_encoder.pos.kind == "sinusoidal"),
        ("model.num_bins=32", lambda p: p.head(torch.zeros(1, p.head.num_readouts, p.d_model)).shape == (1, 1, 2, 32)),
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
        (["model.head=foo"], 32, "unknown head 'foo' (expected one of: continuous, discrete, autoregressive, flow)"),
        (["model.readout=both"], 32, "unknown readout 'both'"),
        (["model.pos_emb=sinusoidal", "model.d_model=66", "model.n_heads=3"], 32, "dim % 4 == 0"),
    ],
)  # fmt: skip
def test_bad_values_fail_with_a_clear_message(compose_model_cfg, overrides, image_size, message):
    cfg = compose_model_cfg("tiny", overrides, image_size=image_size)
    with pytest.raises(InstantiationException) as info:
        instantiate(cfg.model.policy)
    assert message in str(info.value)
