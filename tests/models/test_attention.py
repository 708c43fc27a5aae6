import math

import pytest
import torch
from einops import rearrange
from torch import nn

from vla.errors import ConfigError
from vla.models.attention import MultiHeadAttention, scaled_dot_product


def test_worked_example():
    q = torch.tensor([[1.0, 0.0]])  # [Tq=1, Dk=2]
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # [Tk=3, 2]
    v = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]])  # [Tk=3, 2]
    out, weights = scaled_dot_product(q, k, v)
    torch.testing.assert_close(weights, torch.tensor([[0.401, 0.198, 0.401]]), atol=1e-3, rtol=0)
    torch.testing.assert_close(out, torch.tensor([[1.604, 0.797]]), atol=1e-3, rtol=0)


def test_shape_chain_single_head_and_head_split():
    torch.manual_seed(0)
    B, T, D, H = 32, 4, 64, 8
    x = torch.randn(B, T, D)
    to_q, to_k, to_v = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
    q, k, v = to_q(x), to_k(x), to_v(x)
    assert q.shape == k.shape == v.shape == (32, 4, 64)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    assert scores.shape == (32, 4, 4)
    out, weights = scaled_dot_product(q, k, v)
    assert weights.shape == (32, 4, 4) and out.shape == (32, 4, 64)
    torch.testing.assert_close(weights, scores.softmax(-1))

    heads = rearrange(q, "b t (h d) -> b h t d", h=H)
    assert heads.shape == (32, 8, 4, 8)
    assert torch.equal(rearrange(heads, "b h t d -> b t (h d)"), q)
    # head 1 holds channels 8..15 of every token
    assert torch.equal(heads[:, 1], q[:, :, 8:16])


def _inputs(B=3, Tq=5, Tk=7, D=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x_q, x_kv = torch.randn(B, Tq, D, generator=g), torch.randn(B, Tk, D, generator=g)
    pad = torch.zeros(B, Tk, dtype=torch.bool)
    pad[0, -2:] = True
    pad[2, -4:] = True
    return x_q, x_kv, pad


@pytest.mark.parametrize(
    ("cross", "use_pad", "causal"),
    [(False, False, False), (False, True, False), (False, False, True), (False, True, True),
     (True, False, False), (True, True, False)],
)  # fmt: skip
def test_naive_and_sdpa_agree(cross, use_pad, causal):
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4, attn_impl="sdpa")
    x_q, x_kv, pad = _inputs(Tq=7)
    x_kv = x_kv if cross else None
    kwargs = dict(key_padding_mask=pad if use_pad else None, causal=causal)
    fast = mha(x_q, x_kv, **kwargs)
    mha.attn_impl = "naive"
    slow = mha(x_q, x_kv, **kwargs)
    slow_w, weights = mha(x_q, x_kv, need_weights=True, **kwargs)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=0)
    torch.testing.assert_close(slow_w, slow)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 7))
    if causal:
        assert torch.all(weights.triu(diagonal=1) == 0)


def test_attn_mask_matches_equivalent_padding_mask():
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4)
    x_q, x_kv, pad = _inputs()
    blocked = pad[:, None, :].expand(3, 5, 7)  # [B,Tq,Tk], True = blocked
    torch.testing.assert_close(
        mha(x_q, x_kv, attn_mask=blocked), mha(x_q, x_kv, key_padding_mask=pad), atol=1e-6, rtol=0
    )


@pytest.mark.parametrize("cross", [False, True])
def test_matches_torch_multihead_attention(cross):
    torch.manual_seed(0)
    D, H = 32, 4
    ours = MultiHeadAttention(D, H, attn_impl="naive")
    ref = nn.MultiheadAttention(D, H, batch_first=True)
    with torch.no_grad():
        ours.to_q.weight.copy_(ref.in_proj_weight[:D])
        ours.to_q.bias.copy_(ref.in_proj_bias[:D])
        ours.to_kv.weight.copy_(ref.in_proj_weight[D:])
        ours.to_kv.bias.copy_(ref.in_proj_bias[D:])
        ours.to_out.weight.copy_(ref.out_proj.weight)
        ours.to_out.bias.copy_(ref.out_proj.bias)
    x_q, x_kv, pad = _inputs(Tq=7, D=D)
    x_kv = x_kv if cross else x_q
    out, weights = ours(x_q, x_kv, key_padding_mask=pad, need_weights=True)
    ref_out, ref_w = ref(x_q, x_kv, x_kv, key_padding_mask=pad, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
    torch.testing.assert_close(weights, ref_w, atol=1e-6, rtol=0)
    ours.attn_impl = "sdpa"
    torch.testing.assert_close(ours(x_q, x_kv, key_padding_mask=pad), ref_out, atol=1e-5, rtol=0)


def test_pad_keys_get_exactly_zero_weight_and_do_not_leak():
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4)
    x_q, x_kv, pad = _inputs()
    out, weights = mha(x_q, x_kv, key_padding_mask=pad, need_weights=True)
    assert torch.all(weights[0, :, :, -2:] == 0) and torch.all(weights[2, :, :, -4:] == 0)
    assert torch.all(weights[1] > 0)
    # whatever the PAD keys hold, the outputs stay the same
    noisy = x_kv.clone()
    noisy[pad] = 1e3 * torch.randn(int(pad.sum()), 32)
    for impl in ("naive", "sdpa"):
        mha.attn_impl = impl
        torch.testing.assert_close(mha(x_q, noisy, key_padding_mask=pad), out, atol=1e-5, rtol=0)


def test_cross_attention_output_follows_the_queries():
    torch.manual_seed(0)
    mha = MultiHeadAttention(64, 4)
    queries, seq = torch.randn(8, 2, 64), torch.randn(8, 30, 64)
    out, weights = mha(queries, seq, need_weights=True)
    assert out.shape == (8, 2, 64)
    assert weights.shape == (8, 4, 2, 30)


def test_invalid_arguments_fail_at_construction():
    with pytest.raises(ConfigError, match="d_model=100 is not divisible by n_heads=3"):
        MultiHeadAttention(100, 3)
    with pytest.raises(ConfigError, match="unknown attn_impl 'flash'"):
        MultiHeadAttention(64, 4, attn_impl="flash")
    with pytest.raises(ValueError, match="causal attention needs Tq == Tk"):
        MultiHeadAttention(64, 4)(torch.randn(1, 2, 64), torch.randn(1, 3, 64), causal=True)


@pytest.mark.parametrize("attn_impl", ["naive", "sdpa"])
def test_torch_counts_the_textbook_flops_of_self_attention(attn_impl):
    """Four D x D projections (8TD^2) and two T x T x D products (4T^2 D). Torch counts
    nothing for the CPU's fused kernel, so an sdpa layer is counted on its written-out path."""
    from torch.utils.flop_counter import FlopCounterMode

    from vla.benchmark.flops import naive_attention

    T, D = 10, 64
    mha = MultiHeadAttention(D, 4, attn_impl=attn_impl)
    with FlopCounterMode(display=False) as counter, torch.no_grad(), naive_attention(mha):
        mha(torch.randn(1, T, D))
    assert mha.attn_impl == attn_impl
    assert counter.get_total_flops() == 8 * T * D * D + 4 * T * T * D
