"""The prefix-LM mask and a pre-norm block that can decode with a KV cache.

    keys j ->      prefix (P)       suffix
    query i   [ 1 1 1 1 1 1 | 0 0 0 ]   prefix rows: the whole prefix, both ways
    (prefix)  [ 1 1 1 1 1 1 | 0 0 0 ]
    (suffix)  [ 1 1 1 1 1 1 | 1 0 0 ]   suffix rows: the prefix and the suffix up to itself
              [ 1 1 1 1 1 1 | 1 1 0 ]
    allowed[i, j] = (j < P or j <= i) and key j is not PAD

Decoding runs the prefix and <bos> once, keeping each layer's keys and values (`KVCache`);
each new token then attends from one query to the cache plus itself, which is the mask's last
row: greedy decoding with the cache gives what full recomputation gives (a test proves it).
The block reuses `vla.models.attention.MultiHeadAttention`'s projections and its written-out
`scaled_dot_product`, with the fused kernel as the fast path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from vla.models.attention import MultiHeadAttention, scaled_dot_product
from vla.models.transformer import MLP


def prefix_lm_allowed(prefix_len: int, pad: Tensor) -> Tensor:
    """The prefix-LM mask: bool [B,1,T,T], True where query i may attend to key j.

    Args:
        prefix_len: P, tokens of the prefix (the same for the whole batch; PAD inside it is
            masked by `pad`).
        pad: bool [B,T], True = PAD key (never attended to).
    """
    B, T = pad.shape
    i = torch.arange(T, device=pad.device)[:, None]  # [T,1]
    j = torch.arange(T, device=pad.device)[None, :]  # [1,T]
    allowed = (j < prefix_len) | (j <= i)  # [T,T]
    return rearrange(allowed, "i j -> 1 1 i j") & rearrange(~pad, "b j -> b 1 1 j")


class KVCache:
    """Keys and values per layer, [B,H,t,e] each, grown one decoding step at a time."""

    def __init__(self):
        self.layers: dict[int, tuple[Tensor, Tensor]] = {}

    def extend(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Appends this step's k, v [B,H,t,e]; returns everything cached so far [B,H,T,e]."""
        if layer in self.layers:
            k0, v0 = self.layers[layer]
            k, v = torch.cat([k0, k], dim=2), torch.cat([v0, v], dim=2)  # [B,H,T0+t,e]
        self.layers[layer] = (k, v)
        return k, v

    @property
    def length(self) -> int:
        return 0 if not self.layers else self.layers[0][0].shape[2]


class PrefixLMBlock(nn.Module):
    """Pre-norm self-attention + MLP whose attention takes an explicit `allowed` mask and an
    optional KV cache.

    Args:
        d_model, n_heads, mlp_ratio, dropout, attn_impl: as `vla.models.transformer.EncoderBlock`.
        index: the block's layer number (its slot in a `KVCache`).
    """

    def __init__(self, d_model, n_heads, mlp_ratio=4, dropout=0.0, attn_impl="sdpa", index=0):
        super().__init__()
        self.index = index
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, attn_impl=attn_impl)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model, mlp_ratio, dropout)

    def forward(
        self, x: Tensor, allowed: Tensor, cache: KVCache | None = None, need_weights=False
    ) -> Tensor | tuple[Tensor, Tensor]:
        """
        Args:
            x: tokens [B,t,D] (with a cache: the new ones only).
            allowed: bool [B|1,1,t,T], T = cached + new keys; True = may attend.
            cache: keys and values of the earlier tokens, extended in place.

        Returns:
            x [B,t,D] (and the weights [B,H,t,T] when asked).
        """
        B, t, D = x.shape
        a = self.attn
        h = self.norm1(x)
        q = rearrange(a.to_q(h), "b t (h e) -> b h t e", h=a.n_heads)  # [B,t,D] -> [B,H,t,e]
        k, v = rearrange(a.to_kv(h), "b t (two h e) -> two b h t e", two=2, h=a.n_heads)
        if cache is not None:
            k, v = cache.extend(self.index, k, v)  # [B,H,T,e] each
        p = a.dropout if self.training else 0.0
        weights = None
        if need_weights or a.attn_impl == "naive":
            out, weights = scaled_dot_product(q, k, v, allowed, p)  # [B,H,t,e]
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)
        out = a.out_dropout(a.to_out(rearrange(out, "b h t e -> b t (h e)")))  # [B,t,D]
        x = x + out
        x = x + self.mlp(self.norm2(x))
        return (x, weights) if need_weights else x
