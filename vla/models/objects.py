"""Object tokens: K slots, each what a detector found (pooled features) and where (x, y).

    image uint8 [B,H,W,3] ─ [-1,1], + x, y channels ─> [B,5,H,W]
        ─ conv kxk (5 -> C) ─ GELU ─ conv 3x3 (C -> C) ─ GELU ─> features h [B,C,H,W]
        ─ conv 1x1 (C -> K) ─ standardise each map, x temperature ─ softmax over pixels
                                                        ─> where [B,K,H*W]
        xy   = where @ pixel coordinates                 [B,K,2]   in [-1,1]
        what = where @ h                                 [B,K,C]   features at the slot
        token = Linear(what) + Linear(x, y, x^2 + y^2)   [B,K,D]

Unlike the keypoint detector (`vla.models.vision.KeypointEncoder`), nothing here hears the instruction:
the detector finds *every* shape, and choosing one is left to attention between words and
objects in the encoder. A relation needs what each object is, where it is and how far it is
from another: the token carries the pooled features (colour, shape, dimmed or not) and
(x, y, x^2 + y^2), from which one attention score q.k can be a squared distance,
2 x_i x_j + 2 y_i y_j - |p_j|^2 = |p_i|^2 - |p_i - p_j|^2, so "nearest" is a softmax away.

Slots are found, not told: during training a loss matches the K slots to the scene's shape
centres (`vla.training.objects`), one slot per shape; at rollout the policy sees only pixels.

With `pointer`, the readout then says which object it means, and where that is joins its
features (an action is mostly "from here towards that object"):

    readout [B,R,D] ─ mean over R ─ to_q ─> q [B,D] ─┐
    objects after the encoder [B,K,D] ─ to_k ─> k ─ q.k / sqrt(D) ─> logits [B,K]
    softmax(logits) @ xy [B,K,2] ─> pointed (x, y) [B,2] ─ Linear ─> [B,D] added to the readout
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.vision import (
    TokenGroup,
    TokenSource,
    check_image,
    normalize_pixels,
    pixel_coordinates,
)


def where_features(xy: Tensor) -> Tensor:
    """(x, y) [...,2] -> (x, y, x^2 + y^2) [...,3]: enough for attention to score distances."""
    return torch.cat([xy, xy.square().sum(-1, keepdim=True)], dim=-1)


class ObjectEncoder(TokenSource):
    """Image [B,H,W,3] (uint8) -> K object tokens [B,K,D] and their positions [B,K,2].

    Args:
        image_size: side of the square input image in pixels.
        num_slots: K, object slots (at least the most shapes a scene holds).
        d_model: token width.
        hidden: C, channels of the two convolutions.
        kernel_size: odd side of the first convolution, in pixels.
        pointer: a pointer from the readout over the objects, whose pointed position is added
            to the readout features.
    """

    def __init__(
        self,
        image_size: int,
        num_slots: int,
        d_model: int,
        hidden: int,
        kernel_size: int,
        pointer: bool = True,
    ):
        super().__init__()
        if num_slots < 1 or hidden < 1:
            raise ConfigError(f"num_slots={num_slots} and hidden={hidden} must be >= 1")
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ConfigError(f"kernel_size={kernel_size} must be odd and >= 1")
        self.image_size, self.num_tokens, self.pointer = image_size, num_slots, pointer
        coords = pixel_coordinates(image_size)  # [H,W,2]
        self.register_buffer("coord_channels", rearrange(coords, "h w two -> 1 two h w"), False)
        self.register_buffer("grid_xy", rearrange(coords, "h w two -> (h w) two"), False)
        self.features = nn.Sequential(
            nn.Conv2d(5, hidden, kernel_size, padding=kernel_size // 2),  # [B,5,H,W] -> [B,C,H,W]
            nn.GELU(),
            nn.Conv2d(hidden, hidden, 3, padding=1),  # [B,C,H,W]
            nn.GELU(),
        )
        # no bias: standardising each map over its pixels would cancel it
        self.to_scores = nn.Conv2d(hidden, num_slots, kernel_size=1, bias=False)  # [B,K,H,W]
        self.log_temperature = nn.Parameter(torch.zeros(num_slots, 1))  # [K,1]
        self.to_what = nn.Linear(hidden, d_model)  # [B,K,C] -> [B,K,D]
        self.to_where = nn.Linear(3, d_model)  # [B,K,3] -> [B,K,D]
        if pointer:
            self.to_q = nn.Linear(d_model, d_model)  # [B,D] -> [B,D]
            self.to_k = nn.Linear(d_model, d_model)  # [B,K,D] -> [B,K,D]
            self.to_feature = nn.Linear(2, d_model)  # [B,2] -> [B,D]

    def slots(self, image: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """
        Args:
            image: uint8 (or float in [0,255]) [B,H,W,3].

        Returns:
            xy [B,K,2] in [-1,1], what [B,K,C] and the spatial softmax where [B,K,H*W].
        """
        B = image.shape[0]
        check_image(image, self.image_size)
        x = rearrange(normalize_pixels(image), "b h w c -> b c h w")  # [B,3,H,W] in [-1,1]
        x = torch.cat([x, self.coord_channels.expand(B, -1, -1, -1)], dim=1)  # -> [B,5,H,W]
        h = self.features(x)  # [B,5,H,W] -> [B,C,H,W]
        scores = rearrange(self.to_scores(h), "b k h w -> b k (h w)")  # [B,K,H*W]
        std, mean = torch.std_mean(scores, dim=-1, keepdim=True)  # [B,K,1]
        scores = (scores - mean) / (std + 1e-5) * self.log_temperature.exp()  # [B,K,H*W]
        where = scores.softmax(dim=-1)  # [B,K,H*W]
        what = where @ rearrange(h, "b c h w -> b (h w) c")  # [B,K,H*W] @ [B,H*W,C] -> [B,K,C]
        return where @ self.grid_xy, what, where  # xy: [B,K,H*W] @ [H*W,2] -> [B,K,2]

    def forward(self, image: Tensor, instruction: Tensor) -> TokenGroup:
        """image [B,H,W,3] -> tokens [B,K,D] (what each slot holds plus where it is), with
        outputs "objects_xy" [B,K,2] and "object_tokens" [B,K,D] (the instruction is unused:
        nothing here hears it)."""
        xy, what, _ = self.slots(image)
        tokens = self.to_what(what) + self.to_where(where_features(xy))  # [B,K,D]
        return TokenGroup(tokens, {"objects_xy": xy, "object_tokens": tokens})

    def read(self, features: Tensor, encoded: Tensor, outputs: dict[str, Tensor]) -> Tensor:
        """With the pointer: logits over the encoded objects [B,K,D] (outputs
        "pointer_logits" [B,K]) and the pointed position's feature added to the readout
        features [B,R,D]."""
        if not self.pointer:
            return features
        B, K, D = encoded.shape
        q = self.to_q(features.mean(dim=1))  # [B,R,D] -> [B,D]
        logits = (self.to_k(encoded) @ q[:, :, None]).squeeze(-1) / D**0.5  # [B,K]
        pointed = (logits.softmax(-1)[:, None] @ outputs["objects_xy"]).squeeze(1)  # [B,2]
        outputs["pointer_logits"] = logits
        return features + self.to_feature(pointed)[:, None]  # [B,R,D]
