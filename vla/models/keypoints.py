"""Spatial-softmax keypoints: where each learned feature map peaks, as (x, y) tokens.

    image uint8 [B,H,W,3] ─ [-1,1] ─ conv kxk (3 -> C) ─ GELU ─ (x (1 + gain(instruction)))
        ─ conv 1x1 (C -> K) ─> scores [B,K,H,W]
        ─ standardise each map over its pixels, x learned temperature
        ─ softmax over the H*W pixels of each map ─> where [B,K,H*W]
        ─ expected pixel coordinates ─> xy [B,K,2] in [-1,1]
        ─ Linear(2 -> D) + keypoint id embedding [K,D] ─> tokens [B,K,D]

A patch token says *what* a patch shows and, through its position code, roughly where the
patch is; the target's exact position has to be decoded from that by attention, which is
slow to learn even with a single target (docs/learning-speed.md). A spatial softmax (Levine et al. 2016, "End-to-End Training of Deep Visuomotor
Policies"; the pooling of Diffusion Policy's ResNet) turns a per-pixel detector, e.g. "red
pixels", straight into the coordinates of what it detects, so position arrives as a number
from the first step. With `film`, the instruction scales the detector's hidden channels (a
zero-initialised gain, FiLM without the shift: a shift of a channel moves every pixel's score
alike, and standardising the map cancels it), so a keypoint can follow "the named object"
rather than a fixed colour.

Each score map is standardised over its pixels before the softmax. Raw scores of a freshly
initialised detector differ by a fraction of a unit, and a softmax over the thousands of
pixels of an image of such scores is nearly uniform: every keypoint starts at the image
centre, hardly moves between images, and its gradient is as small. Standardised, the few
pixels where a map stands out from the flat background (the objects) carry most of the
weight from the first step, so keypoints start on objects and follow them.
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.image_encoder import normalize_pixels
from vla.models.positions import pixel_coordinates
from vla.models.sources import TokenGroup, TokenSource


class KeypointEncoder(TokenSource):
    """Image [B,H,W,3] (uint8) -> K keypoint tokens [B,K,D].

    Args:
        image_size: side of the square input image in pixels.
        num_keypoints: K, feature maps each reduced to one (x, y).
        d_model: token width.
        hidden: C, channels of the detector layer.
        kernel_size: its odd side k, in pixels. A feature that tells shapes of one colour
            apart (a corner, a slanted edge) needs a window wider than 3 px.
        film: scale the detector's hidden channels by a gain computed from a vector [B,D]
            (the instruction).
    """

    def __init__(
        self,
        image_size: int,
        num_keypoints: int,
        d_model: int,
        hidden: int = 32,
        film: bool = True,
        kernel_size: int = 7,
    ):
        super().__init__()
        if num_keypoints < 1 or hidden < 1:
            raise ConfigError(f"num_keypoints={num_keypoints} and hidden={hidden} must be >= 1")
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ConfigError(f"kernel_size={kernel_size} must be odd and >= 1")
        self.image_size, self.num_tokens, self.film = image_size, num_keypoints, film
        # [B,3,H,W] -> [B,C,H,W]
        self.detect = nn.Conv2d(3, hidden, kernel_size, padding=kernel_size // 2)
        # no bias: standardising each map over its pixels would cancel it
        self.to_scores = nn.Conv2d(hidden, num_keypoints, kernel_size=1, bias=False)  # [B,K,H,W]
        if film:
            self.to_gain = nn.Linear(d_model, hidden)  # [B,D] -> [B,C]
            nn.init.zeros_(self.to_gain.weight)
            nn.init.zeros_(self.to_gain.bias)
        grid_xy = rearrange(pixel_coordinates(image_size), "h w two -> (h w) two")  # [H*W,2]
        self.register_buffer("grid_xy", grid_xy, persistent=False)
        self.log_temperature = nn.Parameter(torch.zeros(num_keypoints, 1))  # [K,1]: x 1 at init
        self.to_token = nn.Linear(2, d_model)  # [B,K,2] -> [B,K,D]
        self.ids = nn.Parameter(torch.randn(num_keypoints, d_model) * 0.02)  # [K,D]

    def keypoints(self, image: Tensor, cond: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """
        Args:
            image: uint8 (or float in [0,255]) [B,H,W,3].
            cond: conditioning vector [B,D] (required with `film`).

        Returns:
            xy [B,K,2] in [-1,1] and the spatial softmax [B,K,H*W] (each row sums to 1).
        """
        B, H, W, C = image.shape
        if (H, W) != (self.image_size, self.image_size):
            raise ValueError(
                f"image of shape {tuple(image.shape)} does not match [B,{self.image_size},"
                f"{self.image_size},3]"
            )
        x = rearrange(normalize_pixels(image), "b h w c -> b c h w")  # [0,255] -> [-1,1]
        h = nn.functional.gelu(self.detect(x))  # [B,3,H,W] -> [B,C,H,W]
        h = rearrange(h, "b c h w -> b (h w) c")  # [B,H*W,C]
        weight = rearrange(self.to_scores.weight, "k c 1 1 -> 1 c k")  # [1,C,K]
        if self.film:
            if cond is None:
                raise ValueError("KeypointEncoder(film=True) needs `cond` [B,D]")
            # to_scores(h * (1 + gain)), with the gain folded into each sample's 1x1 weights
            weight = weight * (1 + self.to_gain(cond)[..., None])  # [B,C,1] -> [B,C,K]
        scores = (h @ weight).transpose(-1, -2)  # [B,H*W,C] @ [B,C,K] -> [B,K,H*W]
        std, mean = torch.std_mean(scores, dim=-1, keepdim=True)  # [B,K,1]
        scores = (scores - mean) / (std + 1e-5) * self.log_temperature.exp()  # [B,K,H*W]
        where = scores.softmax(dim=-1)  # [B,K,H*W]
        return where @ self.grid_xy, where  # [B,K,H*W] @ [H*W,2] -> [B,K,2]

    def forward(self, image: Tensor, instruction: Tensor) -> TokenGroup:
        """image [B,H,W,3], pooled instruction [B,D] -> keypoint tokens [B,K,D], with their
        positions as outputs["keypoints_xy"] [B,K,2] (the target-keypoint loss reads it)."""
        xy, _ = self.keypoints(image, instruction)  # [B,K,2]
        tokens = self.to_token(xy) + self.ids  # [B,K,2] -> [B,K,D]: where, and which keypoint
        return TokenGroup(tokens, {"keypoints_xy": xy})
