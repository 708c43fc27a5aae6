import inspect

import pytest
import torch
import torch.nn.functional as F
from einops import rearrange
from hydra.utils import get_class
from omegaconf import OmegaConf

from tests.builders import CONF_DIR
from vla.config import instantiate
from vla.errors import ConfigError
from vla.models.heads import AutoregressiveHead, ContinuousHead, DiscreteHead, FlowHead
from vla.models.heads.base import actions_to_bins, bins_to_actions
from vla.models.policy import SHARED_SIZES, build_part

HEADS = sorted(p.stem for p in (CONF_DIR / "model" / "head").glob("*.yaml"))


def head_from_config(kind: str, d_model: int, action_dim: int, **values):
    """The head `conf/model/head/<kind>.yaml` builds, with the model's shared sizes as given
    and `values` for the head's own arguments."""
    shared = dict(d_model=d_model, action_dim=action_dim, num_readouts=1, chunk_size=1)
    shared |= dict(n_heads=4, mlp_ratio=4, dropout=0.0, attn_impl="sdpa")
    shared |= {k: values.pop(k) for k in list(values) if k in shared}
    node = OmegaConf.load(CONF_DIR / "model" / "head" / f"{kind}.yaml")
    return build_part("head", instantiate(OmegaConf.merge(node, values)), shared)


@pytest.mark.parametrize(
    "config",
    [f"head/{h}" for h in HEADS] + ["keypoints/spatial_softmax", "film/patches"],
)
def test_every_config_group_file_states_every_constructor_argument(config):
    """...but the sizes the policy hands every part (SHARED_SIZES), which it must not state."""
    node = OmegaConf.load(CONF_DIR / "model" / f"{config}.yaml")
    cls = get_class(node._target_)
    arguments = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert set(node) - {"_target_", "_partial_"} == arguments - set(SHARED_SIZES)


def test_bins_round_trip_within_half_a_bin():
    N = 256
    x = torch.cat([torch.linspace(-1, 1, 1001), torch.rand(1000) * 2 - 1])
    bins = actions_to_bins(x, N)
    assert bins.min() == 0 and bins.max() == N - 1
    assert (bins_to_actions(bins, N) - x).abs().max() <= 1 / N + 1e-6  # half of width 2/N
    assert actions_to_bins(torch.tensor([-1.0, 1.0, -5.0, 5.0]), N).tolist() == [0, 255, 0, 255]
    head = DiscreteHead(16, 2, num_bins=N)
    assert torch.equal(head.encode(bins_to_actions(bins, N)[:2].reshape(1, 2)), bins[:2][None])


@pytest.mark.parametrize("chunk_size", [1, 4])
@pytest.mark.parametrize("kind", HEADS)
def test_common_interface(kind, chunk_size):
    torch.manual_seed(0)
    bins = {"num_bins": 16} if kind in ("discrete", "autoregressive") else {}
    head = head_from_config(kind, d_model=32, action_dim=2, num_readouts=2, chunk_size=chunk_size, **bins)  # fmt: skip
    features, target = torch.randn(5, 2, 32), torch.rand(5, chunk_size, 2) * 2 - 1
    is_pad = torch.zeros(5, chunk_size, dtype=torch.bool)
    is_pad[0, 1:] = True
    loss, logs = head.loss(features, target, is_pad)
    assert loss.dim() == 0 and loss.requires_grad
    assert all(v.dim() == 0 and not v.requires_grad for v in logs.values())
    pred = head.predict(features)
    assert pred.shape == (5, chunk_size, 2) and pred.abs().max() <= 1
    with pytest.raises(ValueError, match=rf"expected \[B,K,A\] = \(5, {chunk_size}, 2\)"):
        head.loss(features, target[:, 0] if chunk_size == 1 else target[:, :1])


@pytest.mark.parametrize("kind", HEADS)
def test_the_training_loss_never_samples_or_decodes(kind, monkeypatch):
    """`loss` is the training step's whole cost: it never calls `predict`, and the flow head
    draws exactly its noise and its times from the global generator, nothing more."""
    head = head_from_config(kind, d_model=16, action_dim=2, chunk_size=3)
    monkeypatch.setattr(head, "predict", lambda features: pytest.fail("loss called predict"))
    features, target = torch.randn(4, 1, 16), torch.rand(4, 3, 2) * 2 - 1
    torch.manual_seed(0)
    head.loss(features, target)
    after_loss = torch.randn(1)
    torch.manual_seed(0)
    if kind == "flow":  # the draws its loss makes
        torch.randn_like(target)
        head.sample_time(4, torch.device("cpu"))
    assert torch.equal(after_loss, torch.randn(1))


PAD = torch.tensor([[False, False, True], [False, True, True], [False] * 3, [False] * 3])


@pytest.mark.parametrize("kind", ["continuous", "discrete", "autoregressive"])
def test_loss_ignores_padded_steps(kind):
    """Whatever the padded steps hold, the loss is the same; a real step does change it."""
    bins = {"num_bins": 16} if kind != "continuous" else {}
    head = head_from_config(kind, d_model=16, action_dim=2, chunk_size=3, **bins)
    features = torch.randn(4, 1, 16)
    target = torch.rand(4, 3, 2) * 2 - 1
    is_pad = PAD

    def loss_with(t):
        return head.loss(features, t, is_pad)[0]

    garbage = torch.where(is_pad[..., None], -target, target)  # flip only the padded entries
    torch.testing.assert_close(loss_with(garbage), loss_with(target), rtol=0, atol=0)
    real = target.clone()
    real[1, 0] = -real[1, 0]
    assert not torch.allclose(loss_with(real), loss_with(target))


def test_flow_loss_leaves_out_the_padded_velocity_errors():
    """pi0's recipe with the real steps' errors only. The padded steps (the data repeats the
    episode's last action there) still enter the denoiser's input, as pi0's action expert
    attends over the whole chunk: at inference there is no padding, only a whole chunk."""
    head = FlowHead(16, 2, chunk_size=3)
    features, target = torch.randn(4, 1, 16), torch.rand(4, 3, 2) * 2 - 1
    torch.manual_seed(0)
    loss = head.loss(features, target, PAD)[0]
    torch.manual_seed(0)  # the same draws as the loss: noise, then one time per sample
    noise, t = torch.randn_like(target), head.sample_time(4, torch.device("cpu"))
    x_t = t[:, None, None] * noise + (1 - t[:, None, None]) * target
    error = (head.velocity(x_t, t, features) - (noise - target)).square()  # [B,K,A]
    torch.testing.assert_close(loss, error[~PAD].mean())
    assert 0.001 <= t.min() and t.max() < 1


def test_continuous_loss_is_the_mean_over_real_entries():
    head = ContinuousHead(16, 2, chunk_size=3)
    features = torch.randn(2, 1, 16)
    target = torch.rand(2, 3, 2) * 2 - 1
    is_pad = torch.tensor([[False, False, True], [False, True, True]])
    pred = head(features).detach()
    real = [(0, 0), (0, 1), (1, 0)]
    expected = torch.stack([(pred[b, k] - target[b, k]).square() for b, k in real]).mean()
    torch.testing.assert_close(head.loss(features, target, is_pad)[0], expected)
    # no mask: the plain mean, exactly what a one-action head computed
    one = ContinuousHead(16, 2)
    single = torch.rand(2, 1, 2)
    assert torch.equal(one.loss(features, single)[0], F.mse_loss(one(features)[:, 0], single[:, 0]))


def test_autoregressive_stream_is_time_major():
    """The loss teacher-forces the tokens (step 0 dim 0, step 0 dim 1, step 1 dim 0, ...)."""
    torch.manual_seed(0)
    head = AutoregressiveHead(32, 2, num_bins=16, chunk_size=3).eval()
    features, target = torch.randn(4, 1, 32), torch.rand(4, 3, 2) * 2 - 1
    stream = head.encode(target).reshape(4, 6)  # [B,K,A] -> [B,K*A], row-major = time-major
    logits = head(features, stream[:, :-1])  # [B,6,N]
    expected = F.cross_entropy(rearrange(logits, "b t n -> (b t) n"), stream.reshape(-1))
    torch.testing.assert_close(head.loss(features, target)[0], expected)


def test_autoregressive_logits_never_see_later_tokens():
    torch.manual_seed(0)
    A, K = 2, 2
    T = A * K
    for attn_impl in ("sdpa", "naive"):
        head = AutoregressiveHead(32, A, num_bins=16, attn_impl=attn_impl, chunk_size=K).eval()
        features = torch.randn(3, 1, 32)
        prev = torch.randint(0, 16, (3, T - 1))
        logits = head(features, prev)
        assert logits.shape == (3, T, 16)
        for j in range(T - 1):  # change the input bin of token j ...
            changed = prev.clone()
            changed[:, j] = (changed[:, j] + 7) % 16
            new = head(features, changed)
            # ... logits of tokens 0..j (which predict t_0..t_j) are untouched; later ones move
            assert torch.equal(new[:, : j + 1], logits[:, : j + 1])
            assert not torch.allclose(new[:, j + 1 :], logits[:, j + 1 :])


def test_autoregressive_greedy_decoding_follows_its_own_argmax():
    torch.manual_seed(0)
    head = AutoregressiveHead(32, 3, num_bins=16, chunk_size=2).eval()
    features = torch.randn(4, 1, 32)
    pred_bins = head.encode(head.predict(features)).reshape(4, 6)  # [B,K*A], time-major
    logits = head(features, pred_bins[:, :-1])  # teacher-forced on its own choices
    assert torch.equal(logits.argmax(-1), pred_bins)


def test_continuous_head_fits_a_target():
    torch.manual_seed(0)
    head = ContinuousHead(16, 2, chunk_size=4)
    features, target = torch.randn(8, 1, 16), torch.rand(8, 4, 2) * 2 - 1
    opt = torch.optim.Adam(head.parameters(), lr=1e-2)
    for _ in range(200):
        loss, _ = head.loss(features, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 1e-3


def test_flow_head_is_reproducible_under_its_seed():
    torch.manual_seed(0)
    head = FlowHead(16, 2, chunk_size=4, flow_steps=5).eval()
    features = torch.randn(3, 1, 16)
    first, second = head.predict(features), head.predict(features)
    assert first.shape == (3, 4, 2)
    assert not torch.equal(first, second)  # the noise stream moves on between queries
    head.reset()
    assert torch.equal(head.predict(features), first)  # and restarts on reset
    other = FlowHead(16, 2, chunk_size=4, flow_steps=5, seed=1)
    other.load_state_dict(head.state_dict())
    assert not torch.equal(other.predict(features), first)  # another seed, other noise


def test_flow_head_integrates_the_velocity_from_t1_to_t0():
    """With flow_steps=2 the sample is noise - 0.5 v(noise, 1) - 0.5 v(x_half, 0.5)."""
    torch.manual_seed(0)
    head = FlowHead(8, 1, chunk_size=2, flow_steps=2)
    features, noise = torch.randn(2, 1, 8), torch.randn(2, 2, 1)
    ones = torch.ones(2)
    x_half = noise - 0.5 * head.velocity(noise, ones, features)
    expected = x_half - 0.5 * head.velocity(x_half, 0.5 * ones, features)
    torch.testing.assert_close(head.sample(features, noise), expected)


def test_flow_head_keeps_both_modes_that_regression_averages():
    """The same input is labelled -1 or +1 with equal probability. Regression learns the mean
    (about 0); flow matching learns the distribution, so its samples land near both modes."""
    torch.manual_seed(0)
    features = torch.randn(1, 1, 16).expand(256, -1, -1)
    flow = FlowHead(16, 1, hidden_dim=64, flow_steps=10)
    regression = ContinuousHead(16, 1)
    for head in (flow, regression):
        opt = torch.optim.Adam(head.parameters(), lr=3e-3)
        for _ in range(300):
            label = (torch.randint(0, 2, (256, 1, 1)) * 2 - 1).float()
            loss, _ = head.loss(features, label)
            opt.zero_grad()
            loss.backward()
            opt.step()
    flow.reset()
    samples = torch.cat([flow.predict(features) for _ in range(4)]).flatten()  # 1024 samples
    near_plus = ((samples - 1).abs() < 0.25).float().mean().item()
    near_minus = ((samples + 1).abs() < 0.25).float().mean().item()
    assert near_plus >= 0.35 and near_minus >= 0.35, (near_plus, near_minus)
    assert regression.predict(features[:1]).abs().item() < 0.1


def test_invalid_head_arguments():
    with pytest.raises(ConfigError, match="num_bins=1 must be >= 2"):
        DiscreteHead(16, 2, num_bins=1)
    with pytest.raises(ConfigError, match="unknown loss 'l3'"):
        ContinuousHead(16, 2, loss="l3")
    with pytest.raises(ConfigError, match="chunk_size=0 must be >= 1"):
        head_from_config("discrete", 16, 2, chunk_size=0)
    with pytest.raises(ConfigError, match="flow_steps=0 must be >= 1"):
        head_from_config("flow", 16, 2, flow_steps=0)
    with pytest.raises(ConfigError, match="depth=0 must be >= 1"):
        head_from_config("autoregressive", 16, 2, depth=0)
    with pytest.raises(ConfigError, match="time_dim=3 must be even"):
        head_from_config("flow", 16, 2, time_dim=3)
