import pytest
import torch

from vla.errors import ConfigError
from vla.models.transformer import EncoderBlock, TransformerEncoder


def _encoder(attn_impl="sdpa"):
    torch.manual_seed(0)
    return TransformerEncoder(d_model=32, n_heads=4, depth=3, attn_impl=attn_impl).eval()


def test_shapes_and_per_layer_weights():
    enc = _encoder()
    x = torch.randn(2, 9, 32)
    out, weights = enc(x, need_weights=True)
    assert out.shape == (2, 9, 32)
    assert len(weights) == 3 and all(w.shape == (2, 4, 9, 9) for w in weights)
    for w in weights:
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 9))
    torch.testing.assert_close(enc(x), out, atol=1e-5, rtol=0)
    # the final LayerNorm: every token has zero mean and unit variance over channels
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, 9), atol=1e-5, rtol=0)


@pytest.mark.parametrize("attn_impl", ["sdpa", "naive"])
def test_extra_padding_does_not_change_real_tokens(attn_impl):
    enc = _encoder(attn_impl)
    x = torch.randn(2, 6, 32)
    out = enc(x, key_padding_mask=torch.zeros(2, 6, dtype=torch.bool))
    padded = torch.cat([x, 5 * torch.randn(2, 4, 32)], dim=1)  # 4 PAD tokens with junk in them
    mask = torch.zeros(2, 10, dtype=torch.bool)
    mask[:, 6:] = True
    out_padded = enc(padded, key_padding_mask=mask)
    torch.testing.assert_close(out_padded[:, :6], out, atol=1e-5, rtol=0)


def test_naive_and_sdpa_encoders_agree():
    x = torch.randn(3, 8, 32)
    mask = torch.zeros(3, 8, dtype=torch.bool)
    mask[1, 5:] = True
    torch.testing.assert_close(
        _encoder("sdpa")(x, mask), _encoder("naive")(x, mask), atol=1e-5, rtol=0
    )


def test_block_is_pre_norm_residual():
    torch.manual_seed(0)
    block = EncoderBlock(32, 4)
    # zero both residual branches' output projections: the block must then be the identity
    for layer in (block.attn.to_out, block.mlp.net[3]):
        torch.nn.init.zeros_(layer.weight)
        torch.nn.init.zeros_(layer.bias)
    x = torch.randn(2, 5, 32)
    torch.testing.assert_close(block(x), x)


def test_invalid_depth():
    with pytest.raises(ConfigError, match="depth=0 must be >= 1"):
        TransformerEncoder(32, 4, depth=0)
