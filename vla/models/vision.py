"""Vision: the camera image as tokens, patches (ViT) and further groups from token sources.

    image uint8 [B,H,W,3] ─ [-1,1] ─ patchify [B,Np,P*P*3] ─ Linear ─> [B,Np,D]
        ─ (FiLM by the instruction) ─ + coord_embed(x, y channels) ─ + positions ─> patches
    image, instruction ─ token source (KeypointEncoder, vla.models.objects) ─> [B,N,D] each

The image arrives channels-last and unscaled, as the env renders it; `normalize_pixels` is the
one scaling every part reads. Coordinate channels (CoordConv) give each pixel its own position
inside the patch as well as the patch's place on the grid, linearly, which is what an action
(target minus effector) needs; they are added after FiLM, so the instruction never rescales
positions. FiLM (RT-1): attention alone relates words to patches slowly (the policy first
reaches *a* target, not the named one); scaling each channel by the pooled instruction makes
"which colour or shape matters" a gain from the start, and it starts as the identity.

A token source adds a group of its own: any `model.<name>` node whose class is a TokenSource
(Octo builds its observation from such tokenizers). Its `outputs` (positions, logits) reach
`Encoding.outputs`, where training-only losses read them; after the encoder it may `read` the
readout features. The keypoints are one: a spatial softmax (Levine et al. 2016; Diffusion
Policy's pooling) turns a per-pixel detector straight into the (x, y) of what it detects, so a
position arrives as a number from the first step instead of being decoded by attention. The
instruction scales the detector's channels (a zero-initialised gain) so a keypoint can follow
"the named object". Each score map is standardised over its pixels: a fresh detector's raw
scores differ by a fraction of a unit, whose softmax over thousands of pixels is near uniform;
standardised, the objects stand out and carry the weight from the first step.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import NamedTuple

import torch
from einops import rearrange
from einops.layers.torch import Rearrange
from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.transformer import PositionEmbedding


def normalize_pixels(image: Tensor) -> Tensor:
    """uint8 (or float in [0,255]) pixels -> float in [-1,1], the same shape."""
    return image.float() / 127.5 - 1.0


def pixel_coordinates(size: int) -> Tensor:
    """(x, y) of each pixel's centre in [-1,1] for a square image: [size,size,2], x along
    columns. Centres keep the grid symmetric about 0; the arena maps onto it as 2 * p - 1."""
    lin = (torch.arange(size, dtype=torch.float32) + 0.5) / size * 2 - 1  # [S]
    ys, xs = torch.meshgrid(lin, lin, indexing="ij")  # [S,S] each
    return torch.stack([xs, ys], dim=-1)  # [S,S,2]


def check_image(image: Tensor, size: int) -> None:
    """Refuses an image batch that is not [B,size,size,3], naming both shapes."""
    if image.dim() != 4 or tuple(image.shape[1:]) != (size, size, 3):
        raise ValueError(f"image of shape {tuple(image.shape)} does not match [B,{size},{size},3]")


class FiLM(nn.Module):
    """Feature-wise linear modulation of tokens [B,N,D] by a vector [B,D], zero-initialised."""

    def __init__(self, d_model: int):
        super().__init__()
        self.to_gamma_beta = nn.Linear(d_model, 2 * d_model)
        nn.init.zeros_(self.to_gamma_beta.weight)
        nn.init.zeros_(self.to_gamma_beta.bias)

    def forward(self, tokens: Tensor, cond: Tensor) -> Tensor:
        """tokens [B,N,D], cond [B,D] -> tokens * (1 + gamma) + beta [B,N,D]."""
        gamma_beta = self.to_gamma_beta(cond)  # [B,D] -> [B,2D]
        gamma, beta = rearrange(gamma_beta, "b (two d) -> two b 1 d", two=2)  # 2 x [B,1,D]
        return tokens * (1 + gamma) + beta


class ImageEncoder(nn.Module):
    """Image [B,H,W,3] (uint8) -> patch tokens [B,Np,D], Np = (image_size / patch_size)^2.

    Args:
        image_size: side of the square image in pixels; patch_size must divide it.
        patch_size: side of a square patch.
        d_model: token width.
        coord_features: two more channels with each pixel's x and y in [-1,1] (CoordConv).
        pos_emb: "learned" | "sinusoidal" | "none" on the patch grid.
    """

    def __init__(
        self,
        image_size: int,
        patch_size: int,
        d_model: int,
        coord_features: bool = True,
        pos_emb: str = "learned",
    ):
        super().__init__()
        if image_size < 1 or patch_size < 1:
            raise ConfigError(f"image_size={image_size} and patch_size={patch_size} must be >= 1")
        if image_size % patch_size != 0:
            raise ConfigError(
                f"image_size={image_size} is not divisible by patch_size={patch_size}"
            )
        self.image_size, self.patch_size, self.coord_features = (
            image_size,
            patch_size,
            coord_features,
        )
        self.grid = image_size // patch_size
        self.num_patches = self.grid**2
        self.patchify = Rearrange(
            "b (h p1) (w p2) c -> b (h w) (p1 p2 c)", p1=patch_size, p2=patch_size
        )  # [B,H,W,C] -> [B,Np,P*P*C]
        self.patch_embed = nn.Linear(patch_size * patch_size * 3, d_model)  # -> [B,Np,D]
        if coord_features:  # the same for every image: patchified once
            coords = self.patchify(pixel_coordinates(image_size)[None])  # [1,Np,P*P*2]
            self.register_buffer("coord_patches", coords, persistent=False)
            self.coord_embed = nn.Linear(patch_size * patch_size * 2, d_model, bias=False)
        self.pos = PositionEmbedding((self.grid, self.grid), d_model, pos_emb)

    def forward(
        self, image: Tensor, film: FiLM | None = None, cond: Tensor | None = None
    ) -> Tensor:
        """image uint8 [B,H,W,3]; `film` modulates the content [B,Np,D] by cond [B,D] (the
        pooled instruction) before coordinates and positions are added -> patches [B,Np,D]."""
        check_image(image, self.image_size)
        x = self.patchify(normalize_pixels(image))  # [B,H,W,3] -> [B,Np,P*P*3] in [-1,1]
        x = self.patch_embed(x)  # [B,Np,P*P*3] -> [B,Np,D]
        if film is not None:
            x = film(x, cond)  # [B,Np,D]
        if self.coord_features:
            x = x + self.coord_embed(self.coord_patches)  # + [1,Np,D]
        return self.pos(x)


class TokenGroup(NamedTuple):
    """What a token source adds: tokens [B,N,D] and named outputs for losses and figures."""

    tokens: Tensor
    outputs: dict[str, Tensor]


class TokenSource(nn.Module, ABC):
    """A part that adds `num_tokens` tokens to the policy's sequence, after the patches."""

    num_tokens: int

    @abstractmethod
    def forward(self, image: Tensor, instruction: Tensor) -> TokenGroup:
        """image uint8 [B,H,W,3], pooled instruction [B,D] -> TokenGroup."""

    def read(self, features: Tensor, encoded: Tensor, outputs: dict[str, Tensor]) -> Tensor:
        """Readout features [B,R,D], given this source's encoded tokens [B,N,D] and its
        outputs (which it may add to) -> features [B,R,D]; unchanged by default."""
        return features


def build_sources(parts: dict[str, Callable | None], build: Callable) -> nn.ModuleDict:
    """The token sources among the policy's further `model.<name>` nodes (None: off), each
    `build(name, part)`; a node whose class is no TokenSource is refused, naming it."""
    sources = nn.ModuleDict()
    for name, part in parts.items():
        cls = getattr(part, "func", part)
        if not (part is None or isinstance(cls, type) and issubclass(cls, TokenSource)):
            raise ConfigError(
                f"model.{name}: VLAPolicy takes no argument {name!r}, and it is no token "
                "source (a _target_ subclassing vla.models.vision.TokenSource)"
            )
        if part is not None:
            sources[name] = build(name, part)
    return sources


class KeypointEncoder(TokenSource):
    """Spatial-softmax keypoints: image [B,H,W,3] -> K (x, y) tokens [B,K,D].

        image ─ [-1,1] ─ conv kxk (3 -> C) ─ GELU ─ (x (1 + gain(instruction))) ─ conv 1x1
        ─> scores [B,K,H*W] ─ standardise, x temperature ─ softmax ─ @ pixel (x, y)
        ─> xy [B,K,2] ─ Linear(2 -> D) + keypoint id [K,D] ─> tokens [B,K,D]

    Args:
        image_size: side of the square image in pixels.
        num_keypoints: K, feature maps each reduced to one (x, y).
        d_model: token width.
        hidden: C, channels of the detector.
        film: the instruction scales the detector's channels (FiLM without the shift: a
            shift moves every pixel's score alike, which standardising cancels).
        kernel_size: the detector's odd side in pixels (telling shapes of one colour apart
            needs a corner or a slanted edge, wider than 3 px).
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
        self.detect = nn.Conv2d(3, hidden, kernel_size, padding=kernel_size // 2)  # -> [B,C,H,W]
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
        """image uint8 [B,H,W,3], cond [B,D] (with `film`) -> xy [B,K,2] in [-1,1] and the
        spatial softmax [B,K,H*W] (each row sums to 1)."""
        check_image(image, self.image_size)
        x = rearrange(normalize_pixels(image), "b h w c -> b c h w")  # [B,3,H,W]
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
        """-> keypoint tokens [B,K,D], and outputs["keypoints_xy"] [B,K,2] (the
        target-keypoint loss reads it)."""
        xy, _ = self.keypoints(image, instruction)  # [B,K,2]
        tokens = self.to_token(xy) + self.ids  # [B,K,2] -> [B,K,D]: where, and which keypoint
        return TokenGroup(tokens, {"keypoints_xy": xy})
