"""Position embeddings: where a token sits, added to what it is.

Attention is permutation-equivariant, so without these a policy cannot tell a patch in the
top-left corner from one in the bottom-right. Three kinds, chosen by `pos_emb`:
    "sinusoidal"  fixed sin/cos features (Transformer / MAE 2-D sin-cos); not in the state_dict
    "learned"     a free vector per position (ViT), initialised small
    "none"        nothing added (an ablation: the model then sees a bag of tokens)
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import Tensor, nn

from vla.errors import ConfigError

POS_EMBS = ("sinusoidal", "learned", "none")


def pixel_coordinates(size: int) -> Tensor:
    """(x, y) of each pixel's centre in [-1,1] for a square image: [size,size,2], x along
    columns and y along rows. Centres keep the grid symmetric about 0, never quite at +-1;
    the arena maps onto it as 2 * position - 1 (see `vla.envs.render`)."""
    lin = (torch.arange(size, dtype=torch.float32) + 0.5) / size * 2 - 1  # [S]
    ys, xs = torch.meshgrid(lin, lin, indexing="ij")  # [S,S] each
    return torch.stack([xs, ys], dim=-1)  # [S,S,2]


def check_pos_emb(pos_emb: str) -> None:
    if pos_emb not in POS_EMBS:
        raise ConfigError(f"unknown pos_emb {pos_emb!r} (expected one of: {', '.join(POS_EMBS)})")


def sinusoidal_1d(length: int, dim: int, base: float = 10000.0) -> Tensor:
    """Fixed 1-D embedding [length, dim]: sin in the first half, cos in the second.

    Frequencies fall geometrically from 1 to 1/base, so nearby positions differ in the fast
    channels and far-apart ones in the slow channels.
    """
    if dim % 2 != 0:
        raise ConfigError(f"sinusoidal position embedding needs an even dim, got dim={dim}")
    freqs = base ** (-torch.arange(dim // 2, dtype=torch.float32) / (dim // 2))  # [dim/2]
    angles = torch.arange(length, dtype=torch.float32)[:, None] * freqs[None, :]  # [L,dim/2]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)  # [L,dim]


def sinusoidal_2d(grid_h: int, grid_w: int, dim: int) -> Tensor:
    """Fixed 2-D embedding [grid_h * grid_w, dim], row-major: half the channels encode the row,
    half the column (the MAE / ViT-sincos recipe)."""
    if dim % 4 != 0:
        raise ConfigError(f"2-D sinusoidal position embedding needs dim % 4 == 0, got dim={dim}")
    rows = sinusoidal_1d(grid_h, dim // 2)  # [h,dim/2]
    cols = sinusoidal_1d(grid_w, dim // 2)  # [w,dim/2]
    rows = rows[:, None, :].expand(grid_h, grid_w, dim // 2)  # [h,dim/2] -> [h,w,dim/2]
    cols = cols[None, :, :].expand(grid_h, grid_w, dim // 2)  # [w,dim/2] -> [h,w,dim/2]
    return rearrange(torch.cat([rows, cols], dim=-1), "h w d -> (h w) d")  # -> [h*w,dim]


class _PositionEmbedding(nn.Module):
    """Adds a [N,D] table to tokens [B,T,D] (T <= N: shorter sequences use the first T rows)."""

    def __init__(self, table: Tensor, kind: str):
        super().__init__()
        self.kind = kind
        self.num_positions = table.shape[0]
        self.table: Tensor | None
        if kind == "learned":
            self.table = nn.Parameter(torch.randn_like(table) * 0.02)
        elif kind == "sinusoidal":
            # a pure function of the sizes, so it need not travel in checkpoints
            self.register_buffer("table", table, persistent=False)
        else:
            self.table = None

    def forward(self, x: Tensor) -> Tensor:
        """x [B,T,D] -> x + pos[:T] [B,T,D]."""
        B, T, D = x.shape
        if T > self.num_positions:
            raise ValueError(f"sequence of {T} tokens exceeds the {self.num_positions} positions")
        if self.table is None:
            return x
        return x + self.table[:T]  # [B,T,D] + [T,D] -> [B,T,D]


class PositionEmbedding1D(_PositionEmbedding):
    """Positions along a sequence (instruction words).

    Args:
        length: most positions the module can embed.
        d_model: token width.
        kind: "sinusoidal" | "learned" | "none".
    """

    def __init__(self, length: int, d_model: int, kind: str = "learned"):
        check_pos_emb(kind)
        table = (
            sinusoidal_1d(length, d_model) if kind == "sinusoidal" else torch.zeros(length, d_model)
        )
        super().__init__(table, kind)


class PositionEmbedding2D(_PositionEmbedding):
    """Positions on the patch grid, row-major (the order the patchify `Rearrange` produces).

    Args:
        grid_h, grid_w: patch-grid rows and columns.
        d_model: token width (a multiple of 4 for "sinusoidal").
        kind: "sinusoidal" | "learned" | "none".
    """

    def __init__(self, grid_h: int, grid_w: int, d_model: int, kind: str = "learned"):
        check_pos_emb(kind)
        n = grid_h * grid_w
        table = (
            sinusoidal_2d(grid_h, grid_w, d_model)
            if kind == "sinusoidal"
            else torch.zeros(n, d_model)
        )
        super().__init__(table, kind)
