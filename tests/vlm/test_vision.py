"""The VLM's eyes: token shapes, keypoints as the spatial softmax's expected position, glimpses
as its expected features, and the words' FiLM starting as the identity."""

import torch
from einops import rearrange

from vla.vlm.vision import FiLMConvVision


def test_tokens_keypoints_and_glimpses_follow_the_spatial_softmax():
    torch.manual_seed(0)
    eyes = FiLMConvVision(image_size=16, d_model=8, channels=4, num_keypoints=3)
    image = torch.zeros(2, 16, 16, 3, dtype=torch.uint8)
    image[0, 2:5, 11:14] = 255  # a white blob top right in the first image only
    words = torch.randn(2, 8)
    group = eyes(image, words)
    assert group.tokens.shape == (2, 3 + 2, 8) and eyes.num_tokens == 5
    xy = group.outputs["keypoints_xy"]  # [2,3,2]
    assert xy.shape == (2, 3, 2) and xy.abs().max() <= 1
    # the same computation written out: standardised scores, softmax, expectations
    f = eyes.features(image, words)  # [2,C,16,16]
    s = rearrange(eyes.to_scores(f), "b k h w -> b k (h w)")
    w = ((s - s.mean(-1, keepdim=True)) / (s.std(-1, keepdim=True) + 1e-5)).softmax(-1)
    assert torch.allclose(xy, w @ eyes.grid_xy, atol=1e-5)
    glimpse = w @ rearrange(f, "b c h w -> b (h w) c")  # [2,3,C]
    expected = eyes.where(xy) + eyes.what(glimpse) + eyes.ids
    assert torch.allclose(group.tokens[:, :3], expected, atol=1e-5)
    assert not torch.allclose(group.tokens[0], group.tokens[1])  # the blob is seen


def test_the_words_change_nothing_at_the_start_and_gate_channels_once_trained():
    torch.manual_seed(0)
    eyes = FiLMConvVision(image_size=16, d_model=8, channels=4, num_keypoints=2)
    image = torch.randint(0, 256, (1, 16, 16, 3), dtype=torch.uint8)
    a, b = torch.randn(1, 8), torch.randn(1, 8)
    assert torch.equal(eyes(image, a).tokens, eyes(image, b).tokens)  # FiLM: zero at init
    torch.nn.init.normal_(eyes.to_gamma_beta.weight)
    assert not torch.allclose(eyes(image, a).tokens, eyes(image, b).tokens)


def test_a_keypoint_sits_on_its_maps_peak_and_glimpses_the_features_there():
    eyes = FiLMConvVision(image_size=16, d_model=8, channels=4, num_keypoints=1)
    f = torch.zeros(1, 4, 16, 16)
    f[0, :, 3, 12] = torch.tensor([5.0, 1.0, 2.0, 3.0])  # one bright pixel: row 3, column 12
    eyes.features = lambda image, words: f  # the map itself, whatever the convolutions do
    with torch.no_grad():
        eyes.to_scores.weight.copy_(torch.tensor([1.0, 0, 0, 0]).reshape(1, 4, 1, 1))
        eyes.log_temperature.fill_(4.0)  # x55: the softmax is all on the peak
    group = eyes(torch.zeros(1, 16, 16, 3, dtype=torch.uint8), torch.zeros(1, 8))
    x, y = (12 + 0.5) / 16 * 2 - 1, (3 + 0.5) / 16 * 2 - 1  # the pixel's centre in [-1,1]
    assert torch.allclose(group.outputs["keypoints_xy"][0, 0], torch.tensor([x, y]), atol=1e-4)
    glimpse = f[0, :, 3, 12]
    expected = eyes.where(torch.tensor([x, y])) + eyes.what(glimpse) + eyes.ids[0]
    assert torch.allclose(group.tokens[0, 0], expected, atol=1e-3)
