"""The VLM's attention picture reads the keys where they are: a batch pads shorter
instructions, so the state sits after every word slot, not after each instruction's words."""

import numpy as np
import torch

from tests.vlm.builders import small_policy
from vla.keys import IMAGE, INSTRUCTION, STATE
from vla.vlm.figure import bos_attention, vlm_attention_figures


def test_the_layout_finds_the_state_and_words_of_a_padded_batch():
    policy = small_policy()
    texts = ["reach the red circle", "reach the blue square then the green triangle"]
    tokens = policy.tokenizer.encode(texts)  # [2,8]: the first padded after 4 words
    image = torch.randint(0, 256, (2, 48, 48, 3), dtype=torch.uint8)
    rows, layout, xy = bos_attention(policy, image, torch.rand(2, 4), tokens)
    assert xy.shape == (2, 2, 2) and ((xy >= 0) & (xy <= 1)).all()  # K=2 keypoints, arena units
    for _, w in rows:  # [B,H,T_keys]
        assert w.shape[-1] == layout["bos"].stop
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:2]))
        assert (w[:, :, layout["state"]] > 0).all()  # the state is read by every head
        text = w[:, :, layout["text"]]
        assert (text[0, :, 4:] == 0).all() and (text[0, :, :4] > 0).all()  # PAD gets nothing
        assert (text[1] > 0).all()


def test_a_figure_per_observation_with_a_panel_per_layer():
    policy = small_policy()
    frames = [np.zeros((64, 64, 3), np.uint8)] * 2
    obs = {
        IMAGE: np.zeros((2, 48, 48, 3), np.uint8),
        STATE: np.zeros((2, 4), np.float32),
        INSTRUCTION: ["reach the red circle", "reach the blue square"],
    }
    figures = vlm_attention_figures(policy, obs, frames)
    assert [f.shape for f in figures] == [(18 + 64 + 46, 64 * len(policy.blocks), 3)] * 2
