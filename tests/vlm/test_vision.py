"""The VLM's eyes: token shapes, keypoints as the spatial softmax's expected position, glimpses
as its expected features, the words' FiLM starting as the identity, and word queries that
start at zero and then steer each keypoint by the word it attends to."""

import functools

import pytest
import torch
from einops import rearrange

from tests.vlm.builders import small_policy
from vla.errors import ConfigError
from vla.models.language import masked_mean
from vla.vlm.vision import FiLMConvVision


def pooled(words):
    """One word standing for the pooled words [B,D] -> words [B,1,D], no PAD, positions alike."""
    words = words[:, None]  # [B,1,D]
    return words, torch.zeros(words.shape[:2], dtype=torch.bool), words


def test_tokens_keypoints_and_glimpses_follow_the_spatial_softmax():
    torch.manual_seed(0)
    eyes = FiLMConvVision(image_size=16, d_model=8, channels=4, num_keypoints=3)
    image = torch.zeros(2, 16, 16, 3, dtype=torch.uint8)
    image[0, 2:5, 11:14] = 255  # a white blob top right in the first image only
    words = torch.randn(2, 8)
    group = eyes(image, *pooled(words))
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
    seen = lambda words: eyes(image, *pooled(words)).tokens  # noqa: E731
    assert torch.equal(seen(a), seen(b))  # FiLM: zero at init
    torch.nn.init.normal_(eyes.to_gamma_beta.weight)
    assert not torch.allclose(seen(a), seen(b))


def test_a_keypoint_sits_on_its_maps_peak_and_glimpses_the_features_there():
    eyes = FiLMConvVision(image_size=16, d_model=8, channels=4, num_keypoints=1)
    f = torch.zeros(1, 4, 16, 16)
    f[0, :, 3, 12] = torch.tensor([5.0, 1.0, 2.0, 3.0])  # one bright pixel: row 3, column 12
    eyes.features = lambda image, words: f  # the map itself, whatever the convolutions do
    with torch.no_grad():
        eyes.to_scores.weight.copy_(torch.tensor([1.0, 0, 0, 0]).reshape(1, 4, 1, 1))
        eyes.log_temperature.fill_(4.0)  # x55: the softmax is all on the peak
    group = eyes(torch.zeros(1, 16, 16, 3, dtype=torch.uint8), *pooled(torch.zeros(1, 8)))
    x, y = (12 + 0.5) / 16 * 2 - 1, (3 + 0.5) / 16 * 2 - 1  # the pixel's centre in [-1,1]
    assert torch.allclose(group.outputs["keypoints_xy"][0, 0], torch.tensor([x, y]), atol=1e-4)
    glimpse = f[0, :, 3, 12]
    expected = eyes.where(torch.tensor([x, y])) + eyes.what(glimpse) + eyes.ids[0]
    assert torch.allclose(group.tokens[0, 0], expected, atol=1e-3)


def test_word_queries_start_at_zero_and_then_steer_each_keypoint_by_the_word_it_reads():
    torch.manual_seed(0)
    off = FiLMConvVision(image_size=16, d_model=8, channels=4, num_keypoints=2)
    on = FiLMConvVision(image_size=16, d_model=8, channels=4, num_keypoints=2, word_queries=True)
    on.load_state_dict(off.state_dict(), strict=False)  # the same eyes plus the queries
    image = torch.randint(0, 256, (2, 16, 16, 3), dtype=torch.uint8)
    words, text = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    no_word = torch.tensor([[False, False, True], [False, True, True]])  # PAD at the end
    tokens = on(image, words, no_word, text).tokens
    assert torch.equal(tokens, off(image, words, no_word, text).tokens)
    # the directions written out: each query's softmax over the unpadded words, projected
    torch.nn.init.normal_(on.to_direction.weight)
    logits = torch.einsum("kd,bld->bkl", on.queries, on.to_keys(text)) / 8**0.5  # [2,2,3]
    attn = torch.stack([logits[0, :, :2].softmax(-1), logits[1, :, :2] * 0], dim=0)  # [2,2,2]
    attn[1, :, 0] = 1.0  # one word: all attention on it
    expected = on.to_direction(attn @ text[:, :2])  # [2,2,C]
    assert torch.allclose(on.to_direction(on.read(text, no_word)), expected, atol=1e-5)
    # each keypoint's score map written out: the 1x1 conv plus its direction over F's channels
    f = on.features(image, masked_mean(words, no_word))  # [2,C,16,16]
    s = on.to_scores(f) + torch.einsum("bkc,bchw->bkhw", expected, f)  # [2,2,16,16]
    s = rearrange(s, "b k h w -> b k (h w)")
    w = ((s - s.mean(-1, keepdim=True)) / (s.std(-1, keepdim=True) + 1e-5)).softmax(-1)
    xy = on(image, words, no_word, text).outputs["keypoints_xy"]
    assert torch.allclose(xy, w @ on.grid_xy, atol=1e-5)
    # the scores follow them, and the order of the words counts: the same two words in the
    # other order (positions stay where they are) move the keypoints; their mean would not
    pos = torch.randn(3, 8)  # [L,D]
    swapped = words[:, [1, 0, 2]]
    both = torch.zeros(2, 3, dtype=torch.bool)
    xy = on(image, words, both, words + pos).outputs["keypoints_xy"]  # [2,2,2]
    assert not torch.allclose(xy, on(image, swapped, both, swapped + pos).outputs["keypoints_xy"])
    torch.nn.init.normal_(off.to_gamma_beta.weight)  # FiLM by the mean: the order is lost
    assert torch.allclose(
        off(image, words, both, words + pos).outputs["keypoints_xy"],
        off(image, swapped, both, swapped + pos).outputs["keypoints_xy"], atol=1e-6,
    )  # fmt: skip


def test_an_instruction_of_pad_alone_reads_nothing():
    eyes = FiLMConvVision(image_size=16, d_model=8, channels=4, num_keypoints=2, word_queries=True)
    torch.nn.init.normal_(eyes.to_direction.weight)
    text = torch.randn(1, 3, 8)
    u = eyes.to_direction(eyes.read(text, torch.ones(1, 3, dtype=torch.bool)))  # [1,2,C]
    assert torch.allclose(u, eyes.to_direction.bias.expand_as(u)) and not u.isnan().any()


def test_relative_eyes_start_as_the_word_query_eyes_and_then_pick_the_shape_nearest_keypoint_1():
    torch.manual_seed(0)
    plain = FiLMConvVision(16, 8, channels=4, num_keypoints=2, word_queries=True)
    eyes = FiLMConvVision(16, 8, channels=4, num_keypoints=2, word_queries=True, relative=True)
    eyes.load_state_dict(plain.state_dict(), strict=False)  # the same eyes plus to_relative
    image = torch.randint(0, 256, (1, 16, 16, 3), dtype=torch.uint8)
    words, no_word = torch.randn(1, 3, 8), torch.zeros(1, 3, dtype=torch.bool)
    assert torch.equal(
        eyes(image, words, no_word, words).tokens, plain(image, words, no_word, words).tokens
    )

    # two equal shapes in channel 0 (rows 3 and 12, column 8) and an anchor in channel 1
    def place(anchor_row):
        f = torch.zeros(1, 4, 16, 16)
        f[0, 0, 3, 8] = f[0, 0, 12, 8] = 5.0
        f[0, 1, anchor_row, 2] = 5.0
        eyes.features = lambda image, words: f
        return eyes(image, words, no_word, words).outputs["keypoints_xy"][0]  # [2,2]

    with torch.no_grad():
        eyes.to_scores.weight.zero_()
        eyes.to_scores.weight[0, 0] = eyes.to_scores.weight[1, 1] = 1.0  # keypoint k: channel k
        eyes.log_temperature.fill_(4.0)
        eyes.to_direction.weight.zero_()
    row = lambda r: (r + 0.5) / 16 * 2 - 1  # noqa: E731  (a pixel's centre in [-1,1])
    xy = place(anchor_row=2)
    assert torch.allclose(xy[0, 1], torch.tensor((row(3) + row(12)) / 2), atol=1e-3)  # between
    with torch.no_grad():
        eyes.to_relative.bias.copy_(torch.tensor([0.0, 0.0, -1.0, 0.0]))  # the nearer, higher
    xy = place(anchor_row=2)
    assert torch.allclose(xy[1], torch.tensor([row(2), row(2)]), atol=1e-3)  # keypoint 1
    assert torch.allclose(xy[0], torch.tensor([row(8), row(3)]), atol=1e-3)  # the upper shape
    xy = place(anchor_row=13)
    assert torch.allclose(xy[0], torch.tensor([row(8), row(12)]), atol=1e-3)  # the lower one


def test_features_are_the_convolutions_of_pixels_and_coordinates_laid_out_plane_by_plane():
    torch.manual_seed(0)
    eyes = FiLMConvVision(image_size=16, d_model=8, channels=4, num_keypoints=3)
    torch.nn.init.normal_(eyes.to_gamma_beta.weight)  # a FiLM that does something
    image = torch.randint(0, 256, (2, 16, 16, 3), dtype=torch.uint8)
    words = torch.randn(2, 8)
    # the reference: [B,5,H,W] contiguous plane by plane, coordinates as 2 * p - 1 of centres
    pixels = image.permute(0, 3, 1, 2).float() / 127.5 - 1  # [B,3,H,W]
    lin = (torch.arange(16) + 0.5) / 16 * 2 - 1
    ys, xs = torch.meshgrid(lin, lin, indexing="ij")
    x = torch.cat([pixels, torch.stack([xs, ys])[None].expand(2, -1, -1, -1)], 1).contiguous()
    h = eyes.conv2(torch.nn.functional.gelu(eyes.conv1(x)))
    gamma, beta = eyes.to_gamma_beta(words).chunk(2, dim=-1)  # [B,C] each
    expected = torch.nn.functional.gelu(h * (1 + gamma[..., None, None]) + beta[..., None, None])
    torch.testing.assert_close(eyes.features(image, words), expected, atol=1e-5, rtol=1e-5)


def test_the_vlm_names_a_vision_argument_its_eyes_do_not_take():
    """A config (a checkpoint's, too) with an argument the eyes lack, e.g. an option that left
    the code, is refused naming it; one that restates a size the policy gives is refused too."""
    with pytest.raises(
        ConfigError, match="model.vision: FiLMConvVision takes no argument 'offset'"
    ):
        small_policy(vision=functools.partial(FiLMConvVision, num_keypoints=2, offset=False))
    with pytest.raises(ConfigError, match="model.vision.d_model=16 is set by the policy"):
        small_policy(vision=functools.partial(FiLMConvVision, num_keypoints=2, d_model=16))


@pytest.mark.parametrize("dilation, reach", [(1, 2), (2, 3)])
def test_a_feature_sees_pixels_as_far_as_its_receptive_field_and_no_further(dilation, reach):
    """Two 3x3 convolutions see 5x5 pixels (2 each side); with the second dilated by 2, 7x7."""
    torch.manual_seed(0)
    eyes = FiLMConvVision(image_size=16, d_model=8, channels=4, num_keypoints=3, dilation=dilation)
    image = torch.zeros(1, 16, 16, 3, requires_grad=True)  # float pixels, to take gradients
    f = eyes.features(image, torch.zeros(1, 8))  # [1,C,16,16]
    f[0, :, 8, 8].sum().backward()
    seen = image.grad[0].abs().sum(-1) > 0  # [16,16]: the pixels feature (8, 8) depends on
    rows, cols = torch.nonzero(seen, as_tuple=True)
    assert rows.min() == cols.min() == 8 - reach and rows.max() == cols.max() == 8 + reach
