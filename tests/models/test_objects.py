"""Object tokens and the pointer: positions are spatial-softmax expectations, the token's
where-features let one attention score be a squared distance, and the pointer's position is
the softmax-weighted slot position."""

import pytest
import torch

from vla.errors import ConfigError
from vla.models.objects import ObjectEncoder, where_features
from vla.models.vision import pixel_coordinates


def test_slots_are_expected_pixel_coordinates_and_tokens_have_the_right_shape():
    torch.manual_seed(0)
    enc = ObjectEncoder(image_size=16, num_slots=5, d_model=32, hidden=8, kernel_size=5)
    image = torch.randint(0, 256, (3, 16, 16, 3), dtype=torch.uint8)
    xy, what, where = enc.slots(image)
    assert xy.shape == (3, 5, 2) and what.shape == (3, 5, 8) and where.shape == (3, 5, 256)
    torch.testing.assert_close(where.sum(-1), torch.ones(3, 5))
    grid = pixel_coordinates(16).reshape(256, 2)
    torch.testing.assert_close(xy, torch.einsum("bkp,pc->bkc", where, grid))
    tokens, outputs = enc(image, torch.zeros(3, 32))
    assert tokens.shape == (3, 5, 32) and torch.equal(xy, outputs["objects_xy"])
    assert torch.equal(outputs["object_tokens"], tokens)


def test_a_single_bright_pixel_draws_every_slot_to_it_as_the_temperature_rises():
    enc = ObjectEncoder(image_size=16, num_slots=2, d_model=8, hidden=4, kernel_size=1)
    with torch.no_grad():  # a detector that scores red, sharply
        for conv in (enc.features[0], enc.features[2]):
            conv.weight.zero_()
            conv.bias.zero_()
        enc.features[0].weight[:, 0] = 1.0  # every hidden channel = the red channel
        enc.features[2].weight[:, :, 1, 1] = torch.eye(4)
        enc.to_scores.weight.fill_(1.0)
        enc.log_temperature.fill_(4.0)
    image = torch.zeros(1, 16, 16, 3, dtype=torch.uint8)
    image[0, 4, 11, 0] = 255  # row 4, column 11
    xy, _, _ = enc.slots(image)
    expected = pixel_coordinates(16)[4, 11]  # (x, y) of that pixel
    torch.testing.assert_close(xy[0], expected.expand(2, 2), atol=1e-3, rtol=0)


def test_one_attention_score_over_where_features_is_minus_a_squared_distance():
    p = torch.tensor([[0.3, -0.2], [-0.5, 0.4], [0.9, 0.9]])
    f = where_features(p)  # [3,3]: x, y, x^2 + y^2
    torch.testing.assert_close(f[:, 2], p.square().sum(-1))
    q = torch.cat([2 * p[0], torch.tensor([-1.0])])  # the query of object 0
    scores = f @ q  # = |p0|^2 - |p0 - pj|^2
    expected = p[0].square().sum() - (p[0] - p).square().sum(-1)
    torch.testing.assert_close(scores, expected)


def test_the_pointer_points_at_the_position_of_the_object_it_scores_highest():
    torch.manual_seed(0)
    pointer = ObjectEncoder(image_size=8, num_slots=3, d_model=4, hidden=2, kernel_size=1)
    with torch.no_grad():
        pointer.to_q.weight.copy_(torch.eye(4) * 100)
        pointer.to_q.bias.zero_()
        pointer.to_k.weight.copy_(torch.eye(4))
        pointer.to_k.bias.zero_()
        pointer.to_feature.weight.copy_(torch.tensor([[1.0, 0], [0, 1], [0, 0], [0, 0]]))
        pointer.to_feature.bias.zero_()
    objects = torch.eye(4)[None, :3]  # three objects, one-hot
    readout = torch.eye(4)[None, None, 1]  # asks for object 1
    xy = torch.tensor([[[0.1, 0.2], [-0.7, 0.5], [0.3, 0.3]]])
    outputs = {"objects_xy": xy}
    features = pointer.read(readout, objects, outputs)  # [1,1,4]
    assert outputs["pointer_logits"].argmax(-1).item() == 1
    torch.testing.assert_close(
        features[0, 0] - readout[0, 0], torch.tensor([-0.7, 0.5, 0, 0]), atol=1e-4, rtol=0
    )


def test_bad_sizes_are_refused_naming_the_value():
    with pytest.raises(ConfigError, match="kernel_size=4 must be odd"):
        ObjectEncoder(image_size=16, num_slots=2, d_model=8, hidden=4, kernel_size=4)
    with pytest.raises(ConfigError, match="num_slots=0"):
        ObjectEncoder(image_size=16, num_slots=0, d_model=8, hidden=4, kernel_size=3)
