"""ViT patch embedding for the env's raw camera image.

    image uint8 [B,H,W,3]
      -> normalize_pixels                [B,H,W,3]      [0,255] -> [-1,1]
      -> patchify (Rearrange)            [B,Np,P*P*3]   Np = (image_size / P)^2
      -> patch_embed (Linear)            [B,Np,D]       what the patch shows
      -> (modulate, e.g. FiLM)           [B,Np,D]       conditioning touches content only
      -> (+ coord_embed(x, y channels))  [B,Np,D]       CoordConv: pixel coordinates, linearly
      -> + 2-D position embedding        [B,Np,D]

The image arrives channels-last and unnormalised, exactly as the env renders it, so the scaling
lives here instead of in every caller: `normalize_pixels`, which the keypoint and object
detectors use too, so every part reads the same pixel values. Coordinate channels (CoordConv)
give each pixel its own position inside the patch as well as the patch's place on the grid, as
a code that is linear in position, which is what an action (target minus effector) needs.
Their projection does not depend on the image, so it is computed once per batch, not per
sample, and it is added after any modulation so the instruction never rescales positions.
"""

from __future__ import annotations

from collections.abc import Callable

from einops.layers.torch import Rearrange
from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.positions import PositionEmbedding2D, check_pos_emb, pixel_coordinates


def normalize_pixels(image: Tensor) -> Tensor:
    """uint8 (or float in [0,255]) pixels -> float in [-1,1], the same shape: every part that
    reads the image scales it here."""
    return image.float() / 127.5 - 1.0


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

    def forward(self, image: Tensor, modulate: Callable[[Tensor], Tensor] | None = None) -> Tensor:
        """
        Args:
            image: uint8 (or float in [0,255]) [B,H,W,3], channels-last as the env renders it.
            modulate: applied to the content embedding [B,Np,D] before positions are added
                (the policy's FiLM by the instruction).

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
        if modulate is not None:
            x = modulate(x)  # [B,Np,D]
        if self.coord_features:
            x = x + self.coord_embed(self.coord_patches)  # + [1,Np,D], the same for every image
        return self.pos(x)

    def flops(self) -> int:
        """Forward FLOPs of the patch embedding for one image."""
        return 2 * self.num_patches * self.patch_dim * self.d_model
