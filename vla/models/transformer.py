"""The Transformer around attention: positions added to tokens, pre-norm blocks, the readout.

    tokens + positions ─┬─ LayerNorm ─ attention ─(+)─┬─ LayerNorm ─ MLP ─(+)─ ... ─ LayerNorm
                        └─────────────────────────────┘└──────────────────┘
                          x = x + attn(norm1(x))          x = x + mlp(norm2(x))

Attention is permutation-equivariant, so without positions a policy cannot tell a patch in the
top-left corner from one in the bottom-right: `model.pos_emb` adds a learned vector per
position (ViT), fixed sin/cos features (Transformer; MAE's 2-D version on the patch grid), or
nothing. Pre-norm keeps the residual stream an identity path, which lets small models train at
1e-3 without warmup; the final LayerNorm puts every output token on one scale.

The readout is R learned action queries: "self" appends them to the sequence, so every layer
mixes them with the observation (BERT's [CLS], Octo's readouts); "cross" keeps the encoding
free of them and reads it once at the end with a decoder layer (Perceiver / DETR), whose
attention is then easy to inspect.
"""

from __future__ import annotations

import math

import torch
from einops import rearrange, repeat
from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.attention import MultiHeadAttention

POS_EMBS = ("learned", "sinusoidal", "none")
READOUTS = ("self", "cross")


def sinusoidal_1d(length: int, dim: int, base: float = 10000.0) -> Tensor:
    """Fixed 1-D embedding [length, dim]: sin in the first half, cos in the second, at
    frequencies falling geometrically from 1 to 1/base (near positions differ in the fast
    channels, far ones in the slow)."""
    if dim % 2 != 0:
        raise ConfigError(f"sinusoidal position embedding needs an even dim, got dim={dim}")
    freqs = base ** (-torch.arange(dim // 2, dtype=torch.float32) / (dim // 2))  # [dim/2]
    angles = torch.arange(length, dtype=torch.float32)[:, None] * freqs[None, :]  # [L,dim/2]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)  # [L,dim]


def sinusoidal_2d(grid_h: int, grid_w: int, dim: int) -> Tensor:
    """Fixed 2-D embedding [grid_h * grid_w, dim], row-major: half the channels encode the
    row, half the column (MAE's sin-cos)."""
    if dim % 4 != 0:
        raise ConfigError(f"2-D sinusoidal position embedding needs dim % 4 == 0, got dim={dim}")
    rows = repeat(sinusoidal_1d(grid_h, dim // 2), "h d -> h w d", w=grid_w)  # [h,w,dim/2]
    cols = repeat(sinusoidal_1d(grid_w, dim // 2), "w d -> h w d", h=grid_h)  # [h,w,dim/2]
    return rearrange(torch.cat([rows, cols], dim=-1), "h w d -> (h w) d")  # [h*w,dim]


class PositionEmbedding(nn.Module):
    """Adds a position table [N,D] to tokens [B,T,D] (T <= N: a shorter sequence, the first T).

    Args:
        shape: (L,) for a sequence of at most L tokens, (rows, cols) for a patch grid,
            row-major as the patchify `Rearrange` orders it.
        d_model: token width (even for "sinusoidal", a multiple of 4 on a grid).
        kind: "learned" | "sinusoidal" (a pure function of the sizes: not saved) | "none".
    """

    def __init__(self, shape: tuple[int, ...], d_model: int, kind: str = "learned"):
        super().__init__()
        if kind not in POS_EMBS:
            raise ConfigError(f"unknown pos_emb {kind!r} (expected one of: {', '.join(POS_EMBS)})")
        self.kind, self.num_positions = kind, math.prod(shape)
        self.table: Tensor | None
        if kind == "learned":
            self.table = nn.Parameter(torch.randn(self.num_positions, d_model) * 0.02)
        elif kind == "sinusoidal":
            table = (
                sinusoidal_1d(*shape, d_model)
                if len(shape) == 1
                else sinusoidal_2d(*shape, d_model)
            )
            self.register_buffer("table", table, persistent=False)
        else:
            self.table = None

    def forward(self, x: Tensor) -> Tensor:
        """x [B,T,D] -> x + table[:T] [B,T,D]."""
        B, T, D = x.shape
        if T > self.num_positions:
            raise ValueError(f"sequence of {T} tokens exceeds the {self.num_positions} positions")
        return x if self.table is None else x + self.table[:T]  # [B,T,D] + [T,D]


class MLP(nn.Module):
    """Position-wise feed-forward: Linear(D, rD) -> GELU -> Linear(rD, D), dropout after each."""

    def __init__(self, d_model: int, mlp_ratio: float = 4, dropout: float = 0.0):
        super().__init__()
        if mlp_ratio <= 0:
            raise ConfigError(f"mlp_ratio={mlp_ratio} must be > 0")
        self.hidden = int(d_model * mlp_ratio)
        self.net = nn.Sequential(
            nn.Linear(d_model, self.hidden),  # [B,T,D] -> [B,T,rD]
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(self.hidden, d_model),  # [B,T,rD] -> [B,T,D]
            nn.Dropout(dropout),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class EncoderBlock(nn.Module):
    """One pre-norm block: self-attention then MLP, each in a residual branch."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        mlp_ratio: float = 4,
        dropout: float = 0.0,
        attn_impl: str = "sdpa",
    ):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, attn_impl=attn_impl)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model, mlp_ratio, dropout)

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """x [B,T,D] (key_padding_mask [B,T], True = PAD; causal: token i sees j <= i) ->
        x [B,T,D], and the attention weights [B,H,T,T] when `need_weights`."""
        attn = self.attn(
            self.norm1(x),
            key_padding_mask=key_padding_mask,
            causal=causal,
            need_weights=need_weights,
        )
        attn, weights = attn if need_weights else (attn, None)
        x = x + attn
        x = x + self.mlp(self.norm2(x))
        return (x, weights) if need_weights else x


class TransformerEncoder(nn.Module):
    """`depth` pre-norm `EncoderBlock`s and a final LayerNorm: tokens [B,T,D] -> [B,T,D]."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        depth: int,
        mlp_ratio: float = 4,
        dropout: float = 0.0,
        attn_impl: str = "sdpa",
    ):
        super().__init__()
        if depth < 1:
            raise ConfigError(f"depth={depth} must be >= 1")
        self.n_heads, self.depth = n_heads, depth
        self.blocks = nn.ModuleList(
            EncoderBlock(d_model, n_heads, mlp_ratio, dropout, attn_impl) for _ in range(depth)
        )
        self.norm = nn.LayerNorm(d_model)

    def forward(
        self, x: Tensor, key_padding_mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """x [B,T,D] (key_padding_mask [B,T], True = PAD) -> x [B,T,D], and when
        `need_weights` each block's attention weights [B,H,T,T]."""
        all_weights = []
        for block in self.blocks:
            x = block(x, key_padding_mask, need_weights=need_weights)
            if need_weights:
                x, weights = x
                all_weights.append(weights)
        x = self.norm(x)
        return (x, all_weights) if need_weights else x


class Readout(nn.Module):
    """R learned action queries [R,D] and, for "cross", the decoder layer that reads the encoding.

        "self":  [... | queries] ─ encoder ─> the last R positions ─> features [B,R,D]
        "cross": queries ─ norm ─ cross-attn(K,V = encoded) ─(+)─ norm ─ MLP ─(+)─ norm ─> [B,R,D]

    Args:
        d_model, n_heads, mlp_ratio, dropout, attn_impl: of the cross-attention layer.
        num_readouts: R.
        mode: "self" (queries in the encoder's sequence) | "cross" (queries attend to it).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int = 4,
        num_readouts: int = 1,
        mode: str = "self",
        mlp_ratio: float = 4,
        dropout: float = 0.0,
        attn_impl: str = "sdpa",
    ):
        super().__init__()
        if mode not in READOUTS:
            raise ConfigError(f"unknown readout {mode!r} (expected one of: {', '.join(READOUTS)})")
        if num_readouts < 1:
            raise ConfigError(f"num_readouts={num_readouts} must be >= 1")
        self.num_readouts, self.mode = num_readouts, mode
        self.in_sequence = mode == "self"  # the queries join the encoder's input
        self.queries = nn.Parameter(torch.randn(num_readouts, d_model) * 0.02)  # [R,D]
        if mode == "cross":
            self.norm_q = nn.LayerNorm(d_model)
            self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout, attn_impl)
            self.norm_mlp = nn.LayerNorm(d_model)
            self.mlp = MLP(d_model, mlp_ratio, dropout)
            self.norm_out = nn.LayerNorm(d_model)

    def query_tokens(self, batch_size: int) -> Tensor:
        """The queries for a batch: [R,D] -> [B,R,D]."""
        return repeat(self.queries, "r d -> b r d", b=batch_size)

    def forward(
        self, tokens: Tensor, key_padding_mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor | None]:
        """Encoder output [B,T,D] (key_padding_mask [B,T], "cross" only) -> features [B,R,D],
        and when `need_weights` the cross-attention weights [B,H,R,T] (None for "self")."""
        B, T, D = tokens.shape
        weights = None
        if self.in_sequence:
            out = tokens[:, T - self.num_readouts :]  # [B,T,D] -> [B,R,D]
        else:
            q = self.query_tokens(B)  # [B,R,D]
            attn = self.cross_attn(
                self.norm_q(q), tokens, key_padding_mask=key_padding_mask, need_weights=need_weights
            )  # Q [B,R,D], K,V [B,T,D] -> [B,R,D]
            attn, weights = attn if need_weights else (attn, None)
            x = q + attn
            x = x + self.mlp(self.norm_mlp(x))
            out = self.norm_out(x)
        return (out, weights) if need_weights else out
