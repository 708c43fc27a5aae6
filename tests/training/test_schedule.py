"""The learning-rate schedule at known steps: linear warmup, half cosine, floor."""

import math

import pytest
import torch

from vla.training.schedule import warmup_cosine


def _lrs(total_steps: int, steps: int, **kwargs) -> list[float]:
    """The learning rate used at each of `steps` optimizer steps, for a base lr of 1."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = warmup_cosine(optimizer, total_steps, **kwargs)
    lrs = []
    for _ in range(steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return lrs


def test_known_values():
    lr = _lrs(110, 130, warmup_steps=10, min_lr_ratio=0.05)
    assert lr[:3] == pytest.approx([0.1, 0.2, 0.3])  # warmup: (step + 1) / 10
    assert lr[9] == pytest.approx(1.0) and lr[10] == pytest.approx(1.0)  # the peak
    assert lr[60] == pytest.approx(0.05 + 0.95 * 0.5)  # halfway through the cosine
    assert lr[35] == pytest.approx(0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi / 4)))
    assert lr[110] == pytest.approx(0.05) and lr[129] == pytest.approx(0.05)  # the floor
    assert all(a >= b for a, b in zip(lr[10:], lr[11:], strict=False))  # never rises again


def test_warmup_is_capped_at_half_of_a_short_run():
    lr = _lrs(10, 10, warmup_steps=200, min_lr_ratio=0.0)
    assert lr[:5] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert lr[5] == pytest.approx(1.0) and lr[9] == pytest.approx(
        0.5 * (1 + math.cos(math.pi * 0.8))
    )


def test_zero_steps_is_refused():
    with pytest.raises(ValueError, match="total_steps=0"):
        _lrs(0, 1)
