"""Keypoint tokens and the instruction's conditioning of vision: known values, identity at
initialisation, and gradients through a whole policy."""

import pytest
import torch

from vla.errors import ConfigError
from vla.models.vision import KeypointEncoder


def test_a_spatial_softmax_keypoint_lands_on_the_pixel_its_detector_fires_on():
    enc = KeypointEncoder(
        image_size=48, num_keypoints=2, d_model=16, hidden=4, film=False, kernel_size=3
    )
    with torch.no_grad():
        enc.detect.weight.zero_()
        enc.detect.bias.zero_()
        enc.detect.weight[0, 0, 1, 1] = 1.0  # hidden 0 = the red channel at the pixel itself
        enc.to_scores.weight.zero_()
        enc.to_scores.weight[0, 0] = 60.0  # keypoint 0 scores red pixels; keypoint 1 is flat
    image = torch.zeros(1, 48, 48, 3, dtype=torch.uint8)
    image[0, 10, 30] = torch.tensor([255, 0, 0])  # row 10, column 30
    xy, where = enc.keypoints(image)
    expected = torch.tensor([(30 + 0.5) / 48 * 2 - 1, (10 + 0.5) / 48 * 2 - 1])
    torch.testing.assert_close(xy[0, 0], expected, atol=1e-3, rtol=0)
    torch.testing.assert_close(xy[0, 1], torch.zeros(2), atol=1e-5, rtol=0)  # uniform: centre
    torch.testing.assert_close(where.sum(-1), torch.ones(1, 2))
    tokens, outputs = enc(image, torch.zeros(1, 16))
    assert tokens.shape == (1, 2, 16)
    torch.testing.assert_close(outputs["keypoints_xy"], xy)


def test_the_instruction_gain_scales_the_detector_channels():
    """The gain folded into per-sample 1x1 weights equals scaling the hidden channels."""
    torch.manual_seed(0)
    enc = KeypointEncoder(image_size=24, num_keypoints=3, d_model=16, hidden=5)
    torch.nn.init.normal_(enc.to_gain.weight)
    image = torch.randint(0, 256, (2, 24, 24, 3), dtype=torch.uint8)
    cond = torch.randn(2, 16)
    xy, where = enc.keypoints(image, cond)

    x = image.float().permute(0, 3, 1, 2) / 127.5 - 1  # [B,3,H,W]
    h = torch.nn.functional.gelu(enc.detect(x)) * (1 + enc.to_gain(cond))[:, :, None, None]
    scores = enc.to_scores(h).flatten(2)  # [B,K,H*W]
    scores = (scores - scores.mean(-1, keepdim=True)) / (scores.std(-1, keepdim=True) + 1e-5)
    expected = (scores * enc.log_temperature.exp()).softmax(-1)
    torch.testing.assert_close(where, expected)
    torch.testing.assert_close(xy, expected @ enc.grid_xy)


def test_keypoints_refuse_a_wrong_image_and_bad_arguments():
    enc = KeypointEncoder(48, 3, 16)
    with pytest.raises(ValueError, match=r"does not match \[B,48,48,3\]"):
        enc(torch.zeros(1, 32, 32, 3), torch.zeros(1, 16))
    with pytest.raises(ValueError, match="needs `cond`"):
        enc.keypoints(torch.zeros(1, 48, 48, 3))
    with pytest.raises(ConfigError, match="num_keypoints=-1"):
        KeypointEncoder(48, -1, 16)
    with pytest.raises(ConfigError, match="kernel_size=4 must be odd"):
        KeypointEncoder(48, 2, 16, kernel_size=4)


def test_conditioning_starts_as_the_identity():
    torch.manual_seed(0)
    image = torch.randint(0, 256, (2, 48, 48, 3), dtype=torch.uint8)
    cond = torch.randn(2, 16)
    enc = KeypointEncoder(48, 4, 16, film=True)
    plain = KeypointEncoder(48, 4, 16, film=False)
    plain.load_state_dict(enc.state_dict(), strict=False)
    torch.testing.assert_close(enc(image, cond).tokens, plain(image, cond).tokens)


@pytest.mark.parametrize("readout", ["self", "cross"])
def test_every_conditioning_parameter_gets_a_gradient(make_policy, make_batch, readout):
    policy = make_policy(
        "tiny",
        "model.keypoints.num_keypoints=4",
        f"model.readout.mode={readout}",
    )
    assert "keypoints" in policy.token_layout()
    loss, _ = policy(make_batch(policy, batch_size=4))
    loss.backward()
    missing = [n for n, p in policy.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert not missing
