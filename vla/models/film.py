"""FiLM: the instruction scales and shifts every patch token, channel by channel (RT-1).

    words [B,L,D], pad_mask [B,L] ─ masked mean ─> [B,D] ─ Linear (zero-init) ─> gamma, beta [B,D]
    patches [B,Np,D] ─────────────────────────────── patches * (1 + gamma) + beta ─> [B,Np,D]

Attention alone can relate words to patches, but it learns that slowly: the policy first
reaches *a* target, not the named one. Modulating the patches by
the instruction before the encoder makes "which colour/shape matters" a per-channel gain the
patches carry from the start. The projection starts at zero so FiLM begins as the identity and
cannot hurt early training.
"""

from __future__ import annotations

from einops import rearrange
from torch import Tensor, nn


def masked_mean(x: Tensor, pad_mask: Tensor) -> Tensor:
    """Mean of x [B,L,D] over the positions where pad_mask [B,L] is False -> [B,D]."""
    keep = rearrange((~pad_mask).to(x.dtype), "b l -> b l 1")  # [B,L] -> [B,L,1]
    total = (x * keep).sum(dim=1)  # [B,L,D] -> [B,D]
    return total / keep.sum(dim=1).clamp(min=1.0)  # an all-PAD instruction pools to zero


class FiLM(nn.Module):
    """Feature-wise linear modulation of patch tokens by the pooled instruction.

    Args:
        d_model: width of both the patch tokens and the word tokens.
    """

    def __init__(self, d_model: int):
        super().__init__()
        self.d_model = d_model
        self.to_gamma_beta = nn.Linear(d_model, 2 * d_model)
        nn.init.zeros_(self.to_gamma_beta.weight)
        nn.init.zeros_(self.to_gamma_beta.bias)

    def forward(self, patches: Tensor, words: Tensor, pad_mask: Tensor) -> Tensor:
        """
        Args:
            patches: [B,Np,D] tokens to modulate.
            words: [B,L,D] instruction tokens.
            pad_mask: bool [B,L], True = PAD (left out of the pooled instruction).

        Returns:
            modulated patches [B,Np,D].
        """
        B, Np, D = patches.shape
        cond = masked_mean(words, pad_mask)  # [B,L,D] -> [B,D]
        gamma, beta = rearrange(
            self.to_gamma_beta(cond), "b (two d) -> two b 1 d", two=2
        )  # [B,D] -> 2 x [B,1,D]
        return patches * (1 + gamma) + beta  # [B,Np,D]

    def flops(self) -> int:
        return 2 * self.d_model * 2 * self.d_model
