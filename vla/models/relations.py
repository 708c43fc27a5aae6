"""A relation scored from where its reference is: "the shape nearest the red circle".

    words [B,L,D] ─ attention pool with a learned query ─> reference vector [B,D]
    keypoint 0's map under the reference vector's gain ─> reference xy [B,2]
    each pixel p: d = p - reference xy, terms (dx, dy, |d|^2, exp(-|d|^2 / 2 w^2)) [B,H*W,4]
    instruction [B,D] ─ Linear (zero at init) ─> coefficients [B,4]
    bias [B,H*W] = terms @ coefficients, added to keypoint 0's scores before its softmax

A convolution gained by the words can find "a red circle"; it cannot find "the shape nearest
the red circle", because nearness is a property of two places, not of one pixel's
neighbourhood, and pooled as a bag the words amplify the reference they name
(docs/generalisation.md: failed "nearest" episodes end on the reference or on the other
candidate).
Here the reference is found the way keypoint 0 finds any named shape, under the gain of the
words that name it, and the relation becomes a score over each pixel's offset from it: a
linear term for "left of" / "above", a squared distance for "nearest", and a bump of width w
at the reference itself, so "nearest" can rule the reference out (Relation Networks score
pairs of objects the same way, Santoro et al. 2017). The coefficients come from the
instruction, start at zero (keypoint 0 as without this part) and are free to stay zero for
the families that name their shape. Which words are the reference is learned: a query pools
the words by attention; in training a loss can pull the reference's keypoint onto the shape
the relation names (`bc.reference_keypoint_weight`), the way the target-keypoint loss
teaches keypoint 0.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from vla.errors import ConfigError


class RelationalKeypoint(nn.Module):
    """Words and keypoint 0's detector -> the reference's position [B,2] and a bias [B,H*W]
    on keypoint 0's scores.

    Args:
        d_model: word width.
        width: w, the width of the bump at the reference, in image units ([-1,1] across).
    """

    def __init__(self, d_model: int, width: float = 0.15):
        super().__init__()
        if width <= 0:
            raise ConfigError(f"model.relations.width={width} must be > 0")
        self.d_model, self.width = d_model, width
        self.query = nn.Parameter(torch.randn(d_model) * 0.02)  # [D]
        self.to_coefficients = nn.Linear(d_model, 4)  # [B,D] -> [B,4]
        nn.init.zeros_(self.to_coefficients.weight)  # no bias at the start
        nn.init.zeros_(self.to_coefficients.bias)

    def reference(self, words: Tensor, pad_mask: Tensor) -> Tensor:
        """The words that name the reference, pooled: words [B,L,D], pad_mask [B,L] (True =
        PAD) -> [B,D]."""
        scores = words @ self.query / self.d_model**0.5  # [B,L,D] @ [D] -> [B,L]
        weights = scores.masked_fill(pad_mask, float("-inf")).softmax(-1)  # [B,L]
        weights = weights.nan_to_num(0.0)  # an all-PAD instruction pools to zero, not NaN
        return torch.einsum("bl,bld->bd", weights, words)

    def terms(self, grid_xy: Tensor, reference_xy: Tensor) -> Tensor:
        """Each pixel's offset from the reference as (dx, dy, |d|^2, bump): grid_xy [H*W,2],
        reference_xy [B,2] -> [B,H*W,4]."""
        d = grid_xy[None] - reference_xy[:, None]  # [B,H*W,2]
        d2 = d.square().sum(-1, keepdim=True)  # [B,H*W,1]
        bump = torch.exp(-d2 / (2 * self.width**2))  # [B,H*W,1]
        return torch.cat([d, d2, bump], dim=-1)

    def forward(self, grid_xy: Tensor, reference_xy: Tensor, instruction: Tensor) -> Tensor:
        """The bias on keypoint 0's scores [B,H*W] for pixels grid_xy [H*W,2], the reference
        at reference_xy [B,2] and the instruction's vector [B,D]."""
        coefficients = self.to_coefficients(instruction)  # [B,4]
        return torch.einsum("bpt,bt->bp", self.terms(grid_xy, reference_xy), coefficients)

    def flops(self, num_words: int, pixels: int, hidden: int) -> int:
        """Forward FLOPs for one image: pooling `num_words` words, the reference's map over
        `pixels` pixels of a detector of `hidden` channels (its gain, scores, expectation),
        and the bias."""
        D, P, C = self.d_model, pixels, hidden
        return 2 * 2 * num_words * D + 2 * D * C + 2 * P * C + 2 * P * 2 + 2 * D * 4 + 2 * P * 4
