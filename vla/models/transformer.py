"""Pre-norm Transformer encoder.

    x ──┬─ LayerNorm ─ MultiHeadAttention ─(+)──┬─ LayerNorm ─ MLP ─(+)── ... ─ LayerNorm ─> out
        └──────────────────────────────────────┘└──────────────────────┘
           x = x + attn(norm1(x))                  x = x + mlp(norm2(x))

Pre-norm keeps the residual stream an identity path, which is what lets small models train at
1e-3 without warmup tricks; the final LayerNorm then puts every output token on one scale.
"""

from __future__ import annotations

from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.attention import MultiHeadAttention


class MLP(nn.Module):
    """Position-wise feed-forward: Linear(D, rD) -> GELU -> Linear(rD, D).

    Args:
        d_model: token width D.
        mlp_ratio: hidden width as a multiple of D.
        dropout: dropout after the activation and after the output projection.
    """

    def __init__(self, d_model: int, mlp_ratio: float = 4, dropout: float = 0.0):
        super().__init__()
        if mlp_ratio <= 0:
            raise ConfigError(f"mlp_ratio={mlp_ratio} must be > 0")
        self.hidden = int(d_model * mlp_ratio)
        self.d_model = d_model
        self.net = nn.Sequential(
            nn.Linear(d_model, self.hidden),  # [B,T,D] -> [B,T,rD]
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(self.hidden, d_model),  # [B,T,rD] -> [B,T,D]
            nn.Dropout(dropout),
        )

    def forward(self, x: Tensor) -> Tensor:
        """x [B,T,D] -> [B,T,D]."""
        return self.net(x)


class EncoderBlock(nn.Module):
    """One pre-norm block: self-attention then MLP, each in a residual branch.

    Args:
        d_model, n_heads, dropout, attn_impl: see `MultiHeadAttention`.
        mlp_ratio: MLP hidden width as a multiple of d_model.
    """

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
        """
        Args:
            x: tokens [B,T,D].
            key_padding_mask: bool [B,T], True = PAD.
            causal: token i attends only to tokens j <= i.
            need_weights: also return the attention weights [B,H,T,T].

        Returns:
            x [B,T,D] (and the weights when asked).
        """
        B, T, D = x.shape
        attn = self.attn(
            self.norm1(x),
            key_padding_mask=key_padding_mask,
            causal=causal,
            need_weights=need_weights,
        )
        weights = None
        if need_weights:
            attn, weights = attn
        x = x + attn
        x = x + self.mlp(self.norm2(x))
        return (x, weights) if need_weights else x


class TransformerEncoder(nn.Module):
    """A stack of pre-norm `EncoderBlock`s with a final LayerNorm.

    Args:
        d_model: token width.
        n_heads: attention heads per block (must divide d_model).
        depth: number of blocks.
        mlp_ratio: MLP hidden width as a multiple of d_model.
        dropout: dropout in attention and MLPs.
        attn_impl: "sdpa" | "naive".
    """

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
        self.d_model = d_model
        self.n_heads = n_heads
        self.depth = depth
        self.blocks = nn.ModuleList(
            EncoderBlock(d_model, n_heads, mlp_ratio, dropout, attn_impl) for _ in range(depth)
        )
        self.norm = nn.LayerNorm(d_model)

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """
        Args:
            x: tokens [B,T,D].
            key_padding_mask: bool [B,T], True = PAD (never attended to).
            need_weights: also return each block's attention weights.

        Returns:
            x [B,T,D], and when `need_weights` a list of `depth` tensors [B,H,T,T].
        """
        all_weights = []
        for block in self.blocks:
            if need_weights:
                x, weights = block(x, key_padding_mask, need_weights=True)
                all_weights.append(weights)
            else:
                x = block(x, key_padding_mask)
        x = self.norm(x)
        return (x, all_weights) if need_weights else x
