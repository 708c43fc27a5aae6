"""The shape probe reads the pixel under each drawn shape's centre and scores its colour and
shape; corpus batches carry every shape of their scene, demonstrations none."""

import numpy as np
import torch

from tests.vlm.builders import inputs, small_policy
from vla.envs.grammar import COLOURS, PAIRS, SHAPES
from vla.vlm.corpus import CorpusConfig, generate
from vla.vlm.data import SCENE_CENTRES, SCENE_PAIRS, CorpusTensors, collate
from vla.vlm.module import VLMModule
from vla.vlm.shape_probe import ShapeProbe, caption_keypoint_mse, centre_pixels


def test_the_probe_scores_the_pixel_under_each_drawn_shape_as_a_loop_does():
    torch.manual_seed(0)
    probe = ShapeProbe(channels=5)
    features = torch.randn(2, 5, 48, 48)
    centres = torch.tensor(
        [[[0.1, 0.9], [0.5, 0.25], [0.0, 0.0]], [[0.99, 0.01], [0.3, 0.3], [0, 0]]]
    )
    pairs = torch.tensor([[0, 7, -1], [11, -1, -1]])  # -1: no shape in that slot
    terms = []
    for b, m in [(0, 0), (0, 1), (1, 0)]:
        col, row = int(centres[b, m, 0] * 48), int(centres[b, m, 1] * 48)
        f = torch.nn.functional.layer_norm(features[b, :, row, col], (5,))  # [C]
        colour, shape = PAIRS[int(pairs[b, m])]
        c = torch.log_softmax(probe.to_colour(f), -1)[list(COLOURS).index(colour)]
        s = torch.log_softmax(probe.to_shape(f), -1)[SHAPES.index(shape)]
        terms.append(-(c + s))
    expected = torch.stack(terms).mean()
    assert torch.isclose(probe(features, centres, pairs), expected, atol=1e-6)
    elsewhere = features.clone()
    elsewhere[:, :, 20, 20] += 10  # no shape's pixel
    assert torch.isclose(probe(elsewhere, centres, pairs), expected, atol=1e-6)
    assert probe(features, centres, torch.full_like(pairs, -1)) == 0  # nothing drawn
    # it reads the features' directions: no gain from growing F (which would drown the places)
    assert torch.isclose(probe(10 * features, centres, pairs), expected, atol=1e-5)


def test_the_pixel_under_a_centre_is_the_shape_drawn_there():
    cfg = CorpusConfig(num_scenes=30, seed=5, background_p=0.0, noise_p=0.0, reached_scenes=0.0)
    corpus = generate(cfg)
    idx = centre_pixels(torch.from_numpy(corpus["centres"]), 48).numpy()  # [N,M]
    rgb = corpus["image"].reshape(len(idx), -1, 3)  # [N,H*W,3]
    drawn = corpus["pairs"] >= 0
    seen = np.take_along_axis(rgb, idx[..., None], 1)  # [N,M,3]
    expected = np.array([COLOURS[PAIRS[p][0]] for p in corpus["pairs"][drawn]])
    assert drawn.sum() > 60
    np.testing.assert_array_equal(seen[drawn], expected)


def test_corpus_batches_carry_their_scenes_shapes_and_the_loss_adds_the_probe():
    policy = small_policy()
    corpus = CorpusTensors(generate(CorpusConfig(num_scenes=8, seed=1)), policy.tokenizer)
    part = corpus.batch(torch.arange(6))
    assert torch.equal(part[SCENE_PAIRS], corpus.pairs[corpus.scene[:6]])
    demo_like = part | {SCENE_PAIRS: torch.full((6, 0), -1), SCENE_CENTRES: torch.zeros(6, 0, 2)}
    batch = collate([part, demo_like])  # a co-fine-tuning batch: demonstrations draw no shapes
    assert batch[SCENE_PAIRS].shape == (12, 4) and (batch[SCENE_PAIRS][6:] == -1).all()
    assert batch[SCENE_CENTRES].shape == (12, 4, 2)
    batch["image"] = inputs(policy, B=1)[0].expand(12, -1, -1, -1)
    plain = VLMModule(policy, torch.optim.AdamW)
    probed = VLMModule(policy, torch.optim.AdamW, shape_weight=2.0)
    loss, logs = probed.model_step(batch)
    assert logs["shape_ce"] > 0 and "shape_ce" not in plain.model_step(batch)[1]
    assert torch.isclose(loss - plain.model_step(batch)[0], 2 * logs["shape_ce"], atol=1e-5)
    assert not any(k.startswith("shape_probe") for k in probed.policy.state_dict())


def test_the_caption_pull_lays_keypoint_k_on_the_kth_shape_a_caption_names():
    xy = torch.zeros(2, 3, 2)  # every keypoint at the image's centre
    centres = torch.tensor([[[0.5, 1.0], [0.5, 0.5], [0, 0]], [[1.0, 0.5], [0.0, 0.5], [0, 0]]])
    pairs = torch.tensor([[7, 2, -1], [3, 1, -1]])  # the caption names pair 2, then pair 7
    caption = torch.tensor([True, False])  # the second example is another family's
    # keypoint 0 on pair 2's centre (0.5, 0.5): 0; keypoint 1 one unit from pair 7's (0, 1)
    assert caption_keypoint_mse(xy, centres, pairs, caption) == 0.5
    xy[0, 1] = torch.tensor([0.0, 1.0])
    assert caption_keypoint_mse(xy, centres, pairs, caption) == 0.0
    assert caption_keypoint_mse(xy, centres, pairs, torch.tensor([False, False])) == 0.0
