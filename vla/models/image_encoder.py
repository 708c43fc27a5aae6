"""ViT patch embedding for the env's raw camera image, with FiLM by the instruction.

    image uint8 [B,H,W,3]
      -> normalize_pixels                [B,H,W,3]      [0,255] -> [-1,1]
      -> patchify (Rearrange)            [B,Np,P*P*3]   Np = (image_size / P)^2
      -> patch_embed (Linear)            [B,Np,D]       what the patch shows
      -> (FiLM by the instruction)       [B,Np,D]       conditioning touches content only
      -> (+ coord_embed(x, y channels))  [B,Np,D]       CoordConv: pixel coordinates, linearly
      -> + 2-D position embedding        [B,Np,D]

The image arrives channels-last and unnormalised, exactly as the env renders it, so the scaling
lives here instead of in every caller: `normalize_pixels`, which the keypoint and object
detectors use too, so every part reads the same pixel values. Coordinate channels (CoordConv)
give each pixel its own position inside the patch as well as the patch's place on the grid, as
a code that is linear in position, which is what an action (target minus effector) needs.
Their projection does not depend on the image, so it is computed once per batch, not per
sample, and it is added after any modulation so the instruction never rescales positions.

FiLM (RT-1): attention alone can relate words to patches, but it learns that slowly: the
policy first reaches *a* target, not the named one. Scaling and shifting every patch's
channels by the pooled instruction makes "which colour or shape matters" a per-channel gain
the patches carry from the start. Its projection starts at zero, so FiLM begins as the
identity and cannot hurt early training.
"""

from __future__ import annotations

from einops import rearrange
from einops.layers.torch import Rearrange
from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.positions import PositionEmbedding2D, check_pos_emb, pixel_coordinates


def normalize_pixels(image: Tensor) -> Tensor:
    """uint8 (or float in [0,255]) pixels -> float in [-1,1], the same shape: every part that
    reads the image scales it here."""
    return image.float() / 127.5 - 1.0


class FiLM(nn.Module):
    """Feature-wise linear modulation of tokens [B,N,D] by a vector [B,D].

    Args:
        d_model: width of both the tokens and the conditioning vector.
    """

    def __init__(self, d_model: int):
        super().__init__()
        self.to_gamma_beta = nn.Linear(d_model, 2 * d_model)
        nn.init.zeros_(self.to_gamma_beta.weight)
        nn.init.zeros_(self.to_gamma_beta.bias)

    def forward(self, tokens: Tensor, cond: Tensor) -> Tensor:
        """tokens [B,N,D], cond [B,D] -> tokens * (1 + gamma) + beta [B,N,D]."""
        gamma, beta = rearrange(
            self.to_gamma_beta(cond), "b (two d) -> two b 1 d", two=2
        )  # [B,D] -> 2 x [B,1,D]
        return tokens * (1 + gamma) + beta  # [B,N,D]


class ImageEncoder(nn.Module):
    """Image [B,H,W,3] (uint8) -> patch tokens [B,Np,D], Np = (image_size / patch_size)^2.

    Args:
        image_size: side of the square input image in pixels.
        patch_size: side of a square patch; must divide image_size.
        d_model: token width.
        coord_features: append two channels with each pixel's x and y in [-1,1].
        pos_emb: "learned" | "sinusoidal" | "none" position embedding on the patch grid.
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
        check_pos_emb(pos_emb)
        self.image_size = image_size
        self.patch_size = patch_size
        self.d_model = d_model
        self.coord_features = coord_features
        self.grid = image_size // patch_size
        self.num_patches = self.grid**2
        self.patch_dim = patch_size * patch_size * 3  # RGB

        self.patchify = Rearrange(
            "b (h p1) (w p2) c -> b (h w) (p1 p2 c)", p1=patch_size, p2=patch_size
        )  # [B,H,W,C] -> [B,Np,P*P*C]
        self.patch_embed = nn.Linear(self.patch_dim, d_model)  # [B,Np,P*P*3] -> [B,Np,D]
        if coord_features:
            self.register_buffer("coords", pixel_coordinates(image_size), persistent=False)
            coord_patches = self.patchify(self.coords[None])  # [1,H,W,2] -> [1,Np,P*P*2]
            self.register_buffer("coord_patches", coord_patches, persistent=False)
            self.coord_embed = nn.Linear(patch_size * patch_size * 2, d_model, bias=False)
        self.pos = PositionEmbedding2D(self.grid, self.grid, d_model, pos_emb)

    def forward(
        self, image: Tensor, film: FiLM | None = None, cond: Tensor | None = None
    ) -> Tensor:
        """
        Args:
            image: uint8 (or float in [0,255]) [B,H,W,3], channels-last as the env renders it.
            film: modulates the content embedding [B,Np,D] by cond [B,D] (the pooled
                instruction) before positions are added; None: no conditioning.

        Returns:
            patch tokens [B,Np,D].
        """
        B, H, W, C = image.shape
        if (H, W, C) != (self.image_size, self.image_size, 3):
            raise ValueError(
                f"image of shape {tuple(image.shape)} does not match "
                f"[B,{self.image_size},{self.image_size},3]"
            )
        x = normalize_pixels(image)  # [B,H,W,C] in [-1,1]
        x = self.patchify(x)  # [B,H,W,C] -> [B,Np,P*P*C]
        x = self.patch_embed(x)  # [B,Np,P*P*C] -> [B,Np,D]
        if film is not None:
            x = film(x, cond)  # [B,Np,D]
        if self.coord_features:
            x = x + self.coord_embed(self.coord_patches)  # + [1,Np,D], the same for every image
        return self.pos(x)
