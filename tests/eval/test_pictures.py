import numpy as np
import pytest
import torch
from PIL import Image

from tests.builders import build_policy, random_batch
from vla import keys
from vla.checkpoint import load_policy
from vla.data.seeds import TEST_SEED_START
from vla.envs.reach import ReachEnv
from vla.eval.attention import (
    SCALE_W,
    TITLE_H,
    attention_figure,
    attention_maps,
    readout_attention,
)
from vla.eval.video import annotate, save_gif
from vla.eval.visualize import visualize


@pytest.mark.parametrize("readout", ["self", "cross"])
def test_attention_maps(readout):
    policy = build_policy("tiny", f"model.readout.mode={readout}")
    policy.train()
    batch = random_batch(policy, batch_size=2)
    weights, layout = attention_maps(
        policy, batch[keys.IMAGE], batch[keys.STATE], batch[keys.TOKENS]
    )
    assert policy.training  # the mode is restored after the query
    L = batch[keys.TOKENS].shape[1]  # the longest instruction of the batch
    T = policy.num_tokens(L)
    # 32 px in 16 px patches: 4 patches, then 8 keypoints, L words, the state (and readout)
    assert L == 5 and T == 4 + 8 + L + 1 + (1 if readout == "self" else 0)
    assert layout["image"] == slice(0, 4) and layout["keypoints"] == slice(4, 12)
    assert layout["text"] == slice(12, 12 + L)
    assert len(weights) == 2 + (1 if readout == "cross" else 0)
    for w in weights:
        assert w.shape[:2] == (2, 4) and w.shape[-1] == layout["state"].stop + (readout == "self")
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
        pad = batch[keys.TOKENS] == 0  # [B,L]: PAD words get no attention from anyone
        assert (w[:, :, :, layout["text"]].permute(0, 3, 1, 2)[pad] == 0).all()


def test_attention_picture_has_a_colour_scale_from_zero_to_the_layers_largest_weight():
    # 2 heads over a 2x2 patch grid and two words; head 1 puts 0.4 on the first patch, the
    # largest patch weight of the layer, so the scale runs 0..40% and that patch is drawn
    # in the scale's top colour; a patch with no weight keeps the (black) frame
    S, grid = 64, 2
    w = np.array(
        [
            [0.4, 0.1, 0.1, 0.0, 0.2, 0.2],  # head 1: patches 0..3, then the two words
            [0.2, 0.2, 0.2, 0.0, 0.3, 0.1],  # head 2
        ]
    )
    layout = {"image": slice(0, 4), "text": slice(4, 6)}
    frame = np.zeros((S, S, 3), np.uint8)
    picture = attention_figure(frame, [("layer 0", w)], layout, ["red", "circle"], grid, "go")
    assert picture.shape == (TITLE_H + S, 3 * S + SCALE_W + 192, 3)
    scale = picture[TITLE_H : TITLE_H + S, 3 * S : 3 * S + SCALE_W].astype(int)
    strip = scale[20:-20, 10].sum(-1)  # brightness down the middle of the colour strip
    assert strip[0] > 300 and strip[-1] < 30  # bright at 40% (top), dark at 0% (bottom)
    assert (np.diff(strip) <= 0).all()  # and darker all the way down
    head_1 = picture[TITLE_H : TITLE_H + S, S : 2 * S].astype(int)  # its patch 0 is at 40%
    np.testing.assert_allclose(head_1[S // 4 + 8, S // 4], scale[18, 10], atol=3)
    assert head_1[3 * S // 4, 3 * S // 4].sum() == 0  # patch 3: no weight, the frame itself
    # the mean over heads (0.3 on patch 0) is drawn on the same scale, at level 3/4: yellow
    # (255, 255 * 3/4, 0) laid over 3/4 * 3/4 of the black frame
    mean = picture[TITLE_H : TITLE_H + S, :S].astype(int)
    np.testing.assert_allclose(mean[S // 4 + 8, S // 4], [143, 107, 0], atol=2)
    # the two ends of the scale are labelled: a picture with another largest weight differs
    other = attention_figure(frame, [("layer 0", w * 0.5)], layout, ["red", "circle"], grid, "go")
    assert not np.array_equal(
        other[TITLE_H : TITLE_H + 16, 3 * S :], picture[TITLE_H : TITLE_H + 16, 3 * S :]
    )


def test_readout_attention_sums_to_one_over_keys(tiny_ckpt):
    policy, env = load_policy(tiny_ckpt)
    obs, _ = ReachEnv(**env).reset(seed=TEST_SEED_START)
    tokens = policy.tokenizer.encode([obs["instruction"]])
    rows, layout = readout_attention(
        policy, torch.from_numpy(obs["image"][None]), torch.from_numpy(obs["state"][None]), tokens
    )
    assert len(rows) == policy.encoder.depth
    for _, w in rows:
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
        assert w.shape[-1] == layout["readout"].stop


def test_visualize_writes_attention_pngs(tiny_ckpt, compose_cfg, tmp_path):
    cfg = compose_cfg(
        "visualize",
        [
            f"ckpt_path={tiny_ckpt}",
            "viz.num_episodes=2",
            "viz.steps=[0,1]",
            f"paths.output_dir={tmp_path}",
        ],
    )
    paths = visualize(cfg)
    # steps 0 and 1 of each episode (no episode ends in one step: shapes start 0.2 away)
    names = [f"attention_ep{e:02d}_t{t:02d}.png" for e in (0, 1) for t in (0, 1)]
    assert [p.name for p in paths] == names
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    for p in paths:
        picture = np.asarray(Image.open(p))
        assert picture.ndim == 3 and picture.shape[0] > 256 and picture.std() > 0


def test_gif_has_the_caption_and_the_outcome(tmp_path):
    frames = [np.full((256, 256, 3), 30, np.uint8) for _ in range(3)]
    annotated = annotate(frames, "go to the red circle", success=True)
    assert annotated[0].shape[0] > 256  # caption bar on top
    assert not np.array_equal(annotated[-1], annotated[-2])  # the outcome is marked
    path = save_gif(annotated, tmp_path / "a.gif")
    gif = Image.open(path)
    # the last frame held for 5 more frames' time (one frame, a longer duration)
    durations = [(gif.seek(i), gif.info["duration"])[1] for i in range(gif.n_frames)]
    assert durations == [100, 100, 600]  # 10 fps
