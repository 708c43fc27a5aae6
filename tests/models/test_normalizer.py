import io

import numpy as np
import pytest
import torch

from vla.models.state import Normalizer


def _fitted():
    norm = Normalizer(state_dim=4, action_dim=2)
    norm.set_stats([0.5, 0.5, 0.0, 0.1], [0.3, 0.2, 0.5, 0.4], [-0.8, -1.0], [1.0, 0.6])
    return norm


def test_action_round_trip_and_range():
    norm = _fitted()
    low, high = torch.tensor([[-0.8, -1.0]]), torch.tensor([[1.0, 0.6]])
    torch.testing.assert_close(norm.normalize_action(low), -torch.ones(1, 2))
    torch.testing.assert_close(norm.normalize_action(high), torch.ones(1, 2))
    a = low + torch.rand(100, 2) * (high - low)
    torch.testing.assert_close(norm.unnormalize_action(norm.normalize_action(a)), a)


def test_state_standardisation():
    norm = _fitted()
    s = torch.tensor([[0.8, 0.3, 0.5, 0.1]])
    torch.testing.assert_close(norm.normalize_state(s), torch.tensor([[1.0, -1.0, 1.0, 0.0]]))


def test_constant_dimensions_do_not_divide_by_zero():
    norm = Normalizer(2, 1)
    norm.set_stats([1.0, 2.0], [0.0, 1.0], [0.5], [0.5])
    out = norm.normalize_state(torch.tensor([[1.0, 2.0]]))
    assert torch.isfinite(out).all() and out.abs().max() == 0
    a = norm.normalize_action(torch.tensor([[0.5]]))
    assert torch.isfinite(a).all()
    torch.testing.assert_close(norm.unnormalize_action(a), torch.tensor([[0.5]]))


def test_stats_live_in_the_state_dict():
    norm = _fitted()
    buffer = io.BytesIO()
    torch.save(norm.state_dict(), buffer)
    buffer.seek(0)
    fresh = Normalizer(4, 2)
    fresh.load_state_dict(torch.load(buffer, weights_only=True))
    torch.testing.assert_close(fresh.action_high, torch.tensor([1.0, 0.6]))
    torch.testing.assert_close(fresh.state_std, torch.tensor([0.3, 0.2, 0.5, 0.4]))


def test_invalid_stats():
    norm = Normalizer(4, 2)
    with pytest.raises(ValueError, match="state_mean has 3 values, expected 4"):
        norm.set_stats([0, 0, 0], [1] * 4, [-1, -1], [1, 1])
    with pytest.raises(ValueError, match="action_high=.* is below action_low"):
        norm.set_stats([0] * 4, [1] * 4, [1, 1], [-1, -1])
    with pytest.raises(ValueError, match="state_std=.*NaN"):
        norm.set_stats([0] * 4, np.array([1, 1, np.nan, 1]), [-1, -1], [1, 1])
