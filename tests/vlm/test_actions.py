"""Action values <-> bins <-> tokens."""

import torch

from vla.vlm.actions import ActionBins


def test_tokens_round_trip_to_bins_and_values_to_bin_centres():
    bins = ActionBins(action_dim=2, num_bins=8)  # span [-1,1]: width 0.25
    tokens = torch.arange(100, 116).reshape(1, 16)  # every bin of both dims, start 100
    tokens = torch.stack([tokens[0, :8], tokens[0, 8:] - 8], -1).reshape(1, 16)
    values = bins.from_tokens(tokens, 100)  # [1,8,2]
    assert torch.equal(bins.to_tokens(values, 100), tokens)
    assert torch.allclose(values[0, :, 0], torch.linspace(-0.875, 0.875, 8))
    x = torch.tensor([[[-1.0, 0.99], [0.1, -0.3]]])  # [1,2,2]
    assert torch.equal(bins.to_tokens(x, 0), torch.tensor([[0, 7, 4, 2]]))
    assert (bins.from_tokens(bins.to_tokens(x, 0), 0) - x).abs().max() <= 0.125


def test_span_is_the_1st_to_99th_percentile_of_training_actions():
    bins = ActionBins(action_dim=1, num_bins=4)
    bins.fit(torch.arange(101.0)[:, None])  # 0..100
    assert torch.allclose(bins.low, torch.tensor([1.0])) and torch.allclose(
        bins.high, torch.tensor([99.0])
    )
    assert bins.to_bins(torch.tensor([[-50.0], [500.0]])).flatten().tolist() == [0, 3]
