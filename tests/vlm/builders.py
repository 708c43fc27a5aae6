"""A small VLMPolicy for the tests (random weights, seeded)."""

import functools

import torch

from vla.vlm.model import VLMPolicy
from vla.vlm.vision import FiLMConvVision
from vla.vlm.vocab import VLMTokenizer


def small_policy(seed: int = 0, chunk_size: int = 2, **kw) -> VLMPolicy:
    torch.manual_seed(seed)
    values = dict(
        tokenizer=functools.partial(VLMTokenizer, loc_bins=16, action_bins=32),
        vision=functools.partial(FiLMConvVision, channels=4, num_keypoints=2),
        image_size=48, state_dim=4, action_dim=2, d_model=32, n_heads=4, depth=2,
        chunk_size=chunk_size, n_action_steps=1,
    )  # fmt: skip
    return VLMPolicy(**(values | kw)).eval()


def inputs(policy: VLMPolicy, B: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    image = torch.randint(0, 256, (B, 48, 48, 3), generator=g, dtype=torch.uint8)
    state = torch.rand(B, 4, generator=g)
    tokens = policy.tokenizer.encode(["what is the red circle", "reach the blue square", "is"])
    return image, state, tokens[:B]
