"""The optimizer every recipe builds: AdamW's fused kernel where nothing rules it out, taking
the same steps as the loop over tensors it replaces."""

import functools

import pytest
import torch

from vla.training.optimizer import build_optimizer, param_groups


def adamw(**chosen):
    return functools.partial(torch.optim.AdamW, lr=1e-2, weight_decay=0.05, **chosen)


def net():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(6, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 2)
    )


@pytest.mark.parametrize(
    ("chosen", "precision", "fused"),
    [
        ({}, "32-true", True),
        ({}, "bf16-true", True),
        ({}, "bf16-mixed", False),  # Lightning refuses to clip for an optimizer that unscales
        ({}, "16-mixed", False),
        ({"foreach": False}, "32-true", False),  # the config's own choice stands
        ({"fused": False}, "32-true", False),
    ],
)
def test_fused_unless_mixed_precision_or_chosen_otherwise(chosen, precision, fused):
    optimizer = build_optimizer(adamw(**chosen), param_groups(net()), precision)
    assert bool(optimizer.defaults["fused"]) is fused


def test_an_optimizer_without_a_fused_kernel_is_built_as_configured():
    sgd = functools.partial(torch.optim.Adagrad, lr=0.1)  # no `fused` argument
    assert isinstance(build_optimizer(sgd, param_groups(net())), torch.optim.Adagrad)


def test_fused_steps_equal_the_loop_over_tensors():
    nets = [net(), net()]
    fused = build_optimizer(adamw(), param_groups(nets[0]))
    loop = adamw(foreach=False)(param_groups(nets[1]))
    x, y = torch.randn(32, 6), torch.randn(32, 2)
    for _ in range(20):
        for model, optimizer in zip(nets, (fused, loop), strict=True):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
    start = net()
    for a, b, s in zip(nets[0].parameters(), nets[1].parameters(), start.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
        assert not torch.equal(a, s)  # both moved


def test_groups_decay_matrices_only():
    model = net()
    decay, no_decay = param_groups(model)
    assert [p.ndim for p in decay["params"]] == [2, 2] and "weight_decay" not in decay
    assert all(p.ndim == 1 for p in no_decay["params"]) and no_decay["weight_decay"] == 0.0
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))
