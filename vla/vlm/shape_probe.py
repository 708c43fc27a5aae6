"""A training-only probe: the eyes' feature at every shape's centre names its colour and shape.

    F [B,C,H,W] ─ the pixel under each shape's centre ─> [B,M,C] ─ LayerNorm ─ Linear ─> colour
                                                                 logits [B,M,4], shape [B,M,3]
    loss = cross-entropy of both against the scene's pairs, over the shapes drawn (pairs >= 0)

Why: a circle and a square of the same area differ only at their outlines, and what tells
them apart reaches the convolutions only through the answers' words, a Transformer and a
keypoint's glimpse away. Some seeds find the difference within stage 1's steps and some do not
(docs/vlm.md, round 29: three of five seeds name circles as squares). The probe hands the
convolutions the difference directly, from the scene the corpus drew; colour and shape apart,
never a pair, so a corpus that holds pairs out of its words teaches none of them here.
The probe reads each feature normalised over its channels, its direction and not its size:
read raw, it taught the shapes (captions 90-94% on two blind seeds, from 44-46%) by
multiplying F's scale about tenfold, which drowned the keypoints' places in their glimpses,
and pointing fell from 80-82% to 2-3% (docs/vlm.md, round 30).
The probe's weights live beside the policy (`VLMModule`), not in it: nothing it learns is
read at inference.
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import Tensor, nn

from vla.envs.grammar import COLOURS, PAIRS, SHAPES

# a pair index -> its colour and shape indices, and -1 (no shape) -> -1
_COLOUR = torch.tensor([list(COLOURS).index(c) for c, _ in PAIRS] + [-1])  # [P+1]
_SHAPE = torch.tensor([SHAPES.index(s) for _, s in PAIRS] + [-1])  # [P+1]


def centre_pixels(centres: Tensor, size: int) -> Tensor:
    """Arena centres [B,M,2] in [0,1] -> the flat index [B,M] of the pixel under each, in an
    image of side `size` (x along columns, as `pixel_coordinates`)."""
    col, row = (centres * size).long().clamp(0, size - 1).unbind(-1)  # [B,M] each
    return row * size + col  # [B,M]


class ShapeProbe(nn.Module):
    """Feature map F [B,C,H,W], the scene's shape centres [B,M,2] (arena [0,1]) and pairs [B,M]
    (indices into `PAIRS`, -1: no shape) -> the cross-entropy of colour plus that of shape,
    averaged over the shapes drawn (0 if none is)."""

    def __init__(self, channels: int):
        super().__init__()
        self.to_colour = nn.Linear(channels, len(COLOURS))  # [B,M,C] -> [B,M,4]
        self.to_shape = nn.Linear(channels, len(SHAPES))  # [B,M,C] -> [B,M,3]

    def forward(self, features: Tensor, centres: Tensor, pairs: Tensor) -> Tensor:
        C, W = features.shape[1], features.shape[-1]
        flat = rearrange(features, "b c h w -> b (h w) c")  # [B,H*W,C]
        idx = centre_pixels(centres, W)  # [B,M]
        at = torch.gather(flat, 1, idx[..., None].expand(-1, -1, C))  # [B,M,C]
        at = nn.functional.layer_norm(at, (C,))  # [B,M,C]: the probe cannot grow F's scale
        colour = _COLOUR.to(pairs.device)[pairs]  # [B,M]; pair -1 reads the last entry, -1
        shape = _SHAPE.to(pairs.device)[pairs]  # [B,M]
        drawn = (pairs >= 0).float()  # [B,M]
        ce = nn.functional.cross_entropy(
            rearrange(self.to_colour(at), "b m k -> b k m"), colour.clamp(min=0), reduction="none"
        ) + nn.functional.cross_entropy(
            rearrange(self.to_shape(at), "b m k -> b k m"), shape.clamp(min=0), reduction="none"
        )  # [B,M]
        return (ce * drawn).sum() / drawn.sum().clamp(min=1)  # 0 where no shape is drawn


def caption_keypoint_mse(xy: Tensor, centres: Tensor, pairs: Tensor, caption: Tensor) -> Tensor:
    """Keypoints xy [B,K,2] (image [-1,1]), the scene's centres [B,M,2] (arena [0,1]) and pairs
    [B,M] (-1: none), which examples are captions [B] -> the squared distance of keypoint k
    from the k-th shape a caption names (captions name them by pair index), averaged over the
    captions' shapes (0 if none). A caption asks about no one shape, so no other pull guides
    its keypoints; this one lays them on its shapes in the order its words come."""
    key = torch.where(pairs >= 0, pairs, torch.iinfo(pairs.dtype).max)  # no shape: last
    order = key.argsort(dim=1)  # [B,M]: the caption's order
    ordered = torch.gather(centres, 1, order[..., None].expand(-1, -1, 2))  # [B,M,2]
    named = (torch.gather(pairs, 1, order) >= 0) & caption[:, None]  # [B,M]
    M = min(pairs.shape[1], xy.shape[1])
    err = (xy[:, :M] - (2 * ordered[:, :M] - 1)).square().sum(-1)  # [B,M]
    w = named[:, :M].float()
    return (err * w).sum() / w.sum().clamp(min=1)
