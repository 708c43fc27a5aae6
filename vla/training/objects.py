"""Training-only losses for object tokens: slots onto every shape, the pointer onto the one to
reach now. Both read the scene's true centres, which only demonstrations carry (privileged),
so they live with the training recipe and never run at rollout.

Matching is a minimum-cost assignment of the M shapes to M of the K slots (each shape gets
its own slot, as DETR matches predictions to objects). K and M are a handful, so every
ordered choice of M slots is scored at once: K!/(K-M)! candidates (360 for K=6, M=4), no
solver needed.
"""

from __future__ import annotations

import itertools
from functools import cache

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor


@cache
def _choices(num_slots: int, num_objects: int) -> Tensor:
    """Every ordered choice of `num_objects` distinct slots: [P,M] slot indices."""
    return torch.tensor(list(itertools.permutations(range(num_slots), num_objects)))


def match_slots(slots_xy: Tensor, centres: Tensor) -> tuple[Tensor, Tensor]:
    """The assignment of shapes to slots with the least total squared distance.

    Args:
        slots_xy: slot positions [B,K,2] in image units ([-1,1]).
        centres: shape centres [B,M,2] in image units (M <= K).

    Returns:
        slot of each shape [B,M] (int64) and the squared distance of each pair [B,M].
    """
    B, K, _ = slots_xy.shape
    M = centres.shape[1]
    if M > K:
        raise ValueError(f"{M} shapes cannot each get one of {K} slots")
    cost = (slots_xy[:, :, None] - centres[:, None]).square().sum(-1)  # [B,K,M]
    choices = _choices(K, M).to(cost.device)  # [P,M]
    total = cost[:, choices, torch.arange(M, device=cost.device)].sum(-1)  # [B,P,M] -> [B,P]
    slot = choices[total.argmin(-1)]  # [B,M]
    return slot, cost.gather(1, slot[:, None]).squeeze(1)  # [B,M], [B,1,M] -> [B,M]


def object_losses(
    slots_xy: Tensor,
    pointer_logits: Tensor | None,
    centres: Tensor,
    target: Tensor,
    attributes: tuple[Tensor, Tensor, Tensor] | None = None,
) -> dict[str, Tensor]:
    """The slot-matching loss and, with a pointer, its cross-entropy.

    Args:
        slots_xy: [B,K,2] in [-1,1].
        pointer_logits: [B,K] or None.
        centres: every shape's centre [B,M,2], arena units in [0,1]^2.
        target: the centre of the shape to reach now [B,2], arena units (one of `centres`).
        attributes: optional (colour logits [B,K,C], shape logits [B,K,S], each shape's
            (colour, shape) labels [B,M,2]): probes of every slot, scored at the slot matched
            to each shape.

    Returns:
        "slot_mse": mean squared distance of matched slots to their shapes (image units);
        "pointer_ce", "pointer_accuracy" (with a pointer): cross-entropy of the logits against
        the slot matched to the shape to reach now, and how often their argmax is that slot;
        "attribute_ce", "attribute_accuracy" (with attributes): the probes' cross-entropy
        (colour plus shape) at the matched slots, and how often both are right.
    """
    centres_xy, target_xy = 2 * centres - 1, 2 * target - 1  # arena -> image units
    with torch.no_grad():  # which slot holds which shape is a label, not a path for gradients
        slot, _ = match_slots(slots_xy, centres_xy)  # [B,M]
    matched = slots_xy.gather(1, slot[..., None].expand(-1, -1, 2))  # [B,M,2]
    losses = {"slot_mse": (matched - centres_xy).square().sum(-1).mean()}
    if pointer_logits is not None:
        shape = (centres_xy - target_xy[:, None]).square().sum(-1).argmin(-1)  # [B]
        label = slot.gather(1, shape[:, None]).squeeze(1)  # [B]
        losses["pointer_ce"] = F.cross_entropy(pointer_logits, label)
        losses["pointer_accuracy"] = (pointer_logits.argmax(-1) == label).float().mean().detach()
    if attributes is not None:
        colour_logits, shape_logits, labels = attributes
        ce, right = 0, 1
        for i, logits in enumerate((colour_logits, shape_logits)):
            at = logits.gather(1, slot[..., None].expand(-1, -1, logits.shape[-1]))  # [B,M,C]
            ce = ce + F.cross_entropy(rearrange(at, "b m c -> (b m) c"), labels[..., i].flatten())
            right = right * (at.argmax(-1) == labels[..., i])  # [B,M]
        losses["attribute_ce"] = ce
        losses["attribute_accuracy"] = right.float().mean().detach()
    return losses
