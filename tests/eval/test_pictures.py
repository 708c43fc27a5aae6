import numpy as np
import pytest
import torch
from PIL import Image

from tests.builders import build_policy, random_batch
from vla import keys
from vla.checkpoint import load_policy
from vla.data.seeds import TEST_SEED_START
from vla.envs.reach import ReachEnv
from vla.eval.attention import attention_maps, readout_attention
from vla.eval.video import annotate, save_gif
from vla.eval.visualize import visualize


@pytest.mark.parametrize("readout", ["self", "cross"])
def test_attention_maps(readout):
    policy = build_policy("tiny", f"model.policy.readout.mode={readout}")
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
    assert len(paths) >= 2
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
    assert gif.n_frames >= 3 and path.stat().st_size > 0
