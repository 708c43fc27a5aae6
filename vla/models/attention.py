"""Multi-head attention, written out once by hand, with PyTorch's fused kernel as the fast path.

    x_q  [B,Tq,D] -> to_q  -> q [B,H,Tq,Dh] --+
                                              +-- softmax(q k^T / sqrt(Dh) + mask) @ v -> to_out
    x_kv [B,Tk,D] -> to_kv -> k, v [B,H,Tk,Dh]-+                                         [B,Tq,D]

Masks use one convention inside this file: a boolean `allowed` [B|1, 1, Tq, Tk] that is True
where a query may look at a key (what `F.scaled_dot_product_attention` expects). The public
arguments follow `nn.MultiheadAttention` instead (True = blocked, e.g. a PAD key), so callers
can switch between the two modules without flipping masks.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from vla.errors import ConfigError

ATTN_IMPLS = ("sdpa", "naive")


def scaled_dot_product(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """Attention by hand: scores -> mask -> softmax -> weights @ V.

    Args:
        q: queries [..., Tq, Dh].
        k: keys [..., Tk, Dh].
        v: values [..., Tk, Dv].
        mask: bool, broadcastable to [..., Tq, Tk]; True where attention is allowed.
        dropout_p: dropout on the weights (0 at inference).

    Returns:
        out [..., Tq, Dv] and the weights [..., Tq, Tk] (before dropout; each row sums to 1,
        or is all zero when a query may see no key at all).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # -> [...,Tq,Tk]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        # exact zeros for blocked keys, and 0 instead of NaN for a row with no visible key
        # (which is also what the fused kernel returns)
        weights = weights.masked_fill(~mask, 0.0)
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    out = dropped @ v  # [...,Tq,Tk] @ [...,Tk,Dv] -> [...,Tq,Dv]
    return out, weights


def build_allowed_mask(
    tq: int,
    tk: int,
    key_padding_mask: Tensor | None = None,
    causal: bool = False,
    attn_mask: Tensor | None = None,
    device: torch.device | None = None,
) -> Tensor | None:
    """Combine the mask arguments into one boolean `allowed` mask, or None if nothing is masked.

    Args:
        key_padding_mask: bool [B,Tk], True = PAD key (never attended to).
        causal: query i may only see keys j <= i (needs Tq == Tk).
        attn_mask: bool [Tq,Tk] or [B,Tq,Tk], True = blocked.

    Returns:
        bool [B|1, 1, Tq, Tk], True = allowed; None when all attention is allowed.
    """
    allowed = None
    if causal:
        if tq != tk:
            raise ValueError(f"causal attention needs Tq == Tk, got Tq={tq}, Tk={tk}")
        allowed = torch.ones(tq, tk, dtype=torch.bool, device=device).tril()  # [Tq,Tk]
        allowed = rearrange(allowed, "tq tk -> 1 1 tq tk")
    if attn_mask is not None:
        if attn_mask.dtype != torch.bool:
            raise ValueError(f"attn_mask must be bool (True = blocked), got {attn_mask.dtype}")
        extra = (~attn_mask).view(-1, 1, tq, tk)  # [Tq,Tk] | [B,Tq,Tk] -> [B|1,1,Tq,Tk]
        allowed = extra if allowed is None else allowed & extra
    if key_padding_mask is not None:
        keep = rearrange(~key_padding_mask, "b tk -> b 1 1 tk")  # [B,Tk] -> [B,1,1,Tk]
        allowed = keep if allowed is None else allowed & keep
    return allowed


class MultiHeadAttention(nn.Module):
    """Multi-head (self- or cross-) attention.

    Args:
        d_model: width of the inputs and output; split evenly over the heads.
        n_heads: number of heads.
        dropout: dropout on the attention weights and on the output projection.
        attn_impl: "sdpa" (fused `F.scaled_dot_product_attention`) or "naive" (by hand).
            Both compute the same function; `need_weights=True` always uses the naive path.
        bias: whether the projections have a bias.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        attn_impl: str = "sdpa",
        bias: bool = True,
    ):
        super().__init__()
        if n_heads < 1 or d_model < 1:
            raise ConfigError(f"d_model={d_model} and n_heads={n_heads} must both be >= 1")
        if d_model % n_heads != 0:
            raise ConfigError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if attn_impl not in ATTN_IMPLS:
            raise ConfigError(f"unknown attn_impl {attn_impl!r} (expected one of: sdpa, naive)")
        if not 0.0 <= dropout < 1.0:
            raise ConfigError(f"dropout={dropout} must be in [0, 1)")
        self.n_heads, self.dropout, self.attn_impl = n_heads, dropout, attn_impl
        # Q from the queries, K and V from the sequence being read (the same one for self-attention)
        self.to_q = nn.Linear(d_model, d_model, bias=bias)
        self.to_kv = nn.Linear(d_model, 2 * d_model, bias=bias)
        self.to_out = nn.Linear(d_model, d_model, bias=bias)
        self.out_dropout = nn.Dropout(dropout)

    def forward(
        self,
        x_q: Tensor,
        x_kv: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
        attn_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from `x_q` to `x_kv` (or to `x_q` itself).

        Args:
            x_q: queries [B,Tq,D].
            x_kv: keys/values [B,Tk,D]; None for self-attention.
            key_padding_mask: bool [B,Tk], True = PAD (gets exactly zero weight).
            causal: query i sees only keys j <= i.
            attn_mask: bool [Tq,Tk] or [B,Tq,Tk], True = blocked.
            need_weights: also return the attention weights (uses the naive path).

        Returns:
            out [B,Tq,D], and weights [B,H,Tq,Tk] when `need_weights`.
        """
        x_kv = x_q if x_kv is None else x_kv
        B, Tq, D = x_q.shape
        Tk = x_kv.shape[1]

        H = self.n_heads
        q = rearrange(self.to_q(x_q), "b t (h d) -> b h t d", h=H)  # [B,Tq,D] -> [B,H,Tq,Dh]
        kv = rearrange(self.to_kv(x_kv), "b t (two h d) -> two b h t d", two=2, h=H)
        k, v = kv  # [B,Tk,D] -> 2 x [B,H,Tk,Dh]
        allowed = build_allowed_mask(Tq, Tk, key_padding_mask, causal, attn_mask, x_q.device)
        dropout_p = self.dropout if self.training else 0.0

        weights = None
        if need_weights or self.attn_impl == "naive":
            out, weights = scaled_dot_product(q, k, v, allowed, dropout_p)  # -> [B,H,Tq,Dh]
        elif allowed is None or (causal and attn_mask is None and key_padding_mask is None):
            # no mask tensor at all lets the kernel pick its fastest variant
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=causal)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout_p)

        out = rearrange(out, "b h t d -> b t (h d)")  # [B,H,Tq,Dh] -> [B,Tq,D]
        out = self.out_dropout(self.to_out(out))
        return (out, weights) if need_weights else out
