import pytest
import torch

from vla.models.heads import (
    AutoregressiveHead,
    ContinuousHead,
    DiscreteHead,
    actions_to_bins,
    bins_to_actions,
    make_head,
)


def test_bins_round_trip_within_half_a_bin():
    N = 256
    x = torch.cat([torch.linspace(-1, 1, 1001), torch.rand(1000) * 2 - 1])
    bins = actions_to_bins(x, N)
    assert bins.min() == 0 and bins.max() == N - 1
    assert (bins_to_actions(bins, N) - x).abs().max() <= 1 / N + 1e-6  # half of width 2/N
    assert actions_to_bins(torch.tensor([-1.0, 1.0, -5.0, 5.0]), N).tolist() == [0, 255, 0, 255]
    head = DiscreteHead(16, 2, num_bins=N)
    assert torch.equal(head.encode(bins_to_actions(bins, N)[:2].reshape(1, 2)), bins[:2][None])


@pytest.mark.parametrize("kind", ["continuous", "discrete", "autoregressive"])
def test_common_interface(kind):
    torch.manual_seed(0)
    head = make_head(kind, d_model=32, action_dim=2, num_bins=16, num_readouts=2)
    features, target = torch.randn(5, 2, 32), torch.rand(5, 2) * 2 - 1
    loss, logs = head.loss(features, target)
    assert loss.dim() == 0 and loss.requires_grad
    assert all(v.dim() == 0 and not v.requires_grad for v in logs.values())
    pred = head.predict(features)
    assert pred.shape == (5, 2) and pred.abs().max() <= 1
    assert head.flops() > 0


def test_unknown_head():
    with pytest.raises(ValueError, match=r"unknown head 'foo' \(expected one of: continuous, discrete, autoregressive\)"):  # fmt: skip
        make_head("foo", d_model=32, action_dim=2)


def test_autoregressive_logits_never_see_later_tokens():
    torch.manual_seed(0)
    A = 4
    for attn_impl in ("sdpa", "naive"):
        head = AutoregressiveHead(32, A, num_bins=16, attn_impl=attn_impl).eval()
        features = torch.randn(3, 1, 32)
        prev = torch.randint(0, 16, (3, A - 1))
        logits = head(features, prev)
        assert logits.shape == (3, A, 16)
        for j in range(A - 1):  # change the input bin of dimension j ...
            changed = prev.clone()
            changed[:, j] = (changed[:, j] + 7) % 16
            new = head(features, changed)
            # ... logits of dimensions 0..j (which predict a_0..a_j) are untouched; later ones move
            assert torch.equal(new[:, : j + 1], logits[:, : j + 1])
            assert not torch.allclose(new[:, j + 1 :], logits[:, j + 1 :])


def test_autoregressive_greedy_decoding_follows_its_own_argmax():
    torch.manual_seed(0)
    head = AutoregressiveHead(32, 3, num_bins=16).eval()
    features = torch.randn(4, 1, 32)
    pred_bins = head.encode(head.predict(features))  # [B,A]
    logits = head(features, pred_bins[:, :-1])  # teacher-forced on its own choices
    assert torch.equal(logits.argmax(-1), pred_bins)


def test_continuous_head_fits_a_target():
    torch.manual_seed(0)
    head = ContinuousHead(16, 2)
    features, target = torch.randn(8, 1, 16), torch.rand(8, 2) * 2 - 1
    opt = torch.optim.Adam(head.parameters(), lr=1e-2)
    for _ in range(200):
        loss, _ = head.loss(features, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 1e-3


def test_invalid_head_arguments():
    with pytest.raises(ValueError, match="num_bins=1 must be >= 2"):
        DiscreteHead(16, 2, num_bins=1)
    with pytest.raises(ValueError, match="unknown loss 'l3'"):
        ContinuousHead(16, 2, loss="l3")
