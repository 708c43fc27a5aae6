"""Training-only losses for object tokens (`vla.models.objects`): slots onto every shape, the
pointer onto the one to reach now, and probes that must tell each slot's colour and kind. They
read the scene's true centres and pairs, which only demonstrations carry (privileged), so they
live with the training recipe and never run at rollout.

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
from torch import Tensor, nn

from vla.envs.grammar import COLOURS, PAIRS, SHAPES
from vla.keys import OBJECT_PAIRS, OBJECTS, TARGET

# (colour, kind) index of each colour+shape pair, the labels of the attribute probes: [P,2]
PAIR_ATTRIBUTES = torch.tensor([(list(COLOURS).index(c), SHAPES.index(s)) for c, s in PAIRS])


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


class ObjectLosses(nn.Module):
    """The weighted object losses of a batch, from the policy's encoding outputs.

    Args:
        d_model: width of an object token (the attribute probes read it).
        slot: weight of the slot-matching loss.
        pointer: weight of the pointer's cross-entropy (needs `model.objects.pointer`).
        attribute: weight of the colour and kind probes (0: no probes).
    """

    def __init__(self, d_model: int, slot: float, pointer: float, attribute: float):
        super().__init__()
        self.weights = dict(slot_mse=slot, pointer_ce=pointer, attribute_ce=attribute)
        if attribute > 0:  # object tokens [B,K,D] -> colour, kind logits
            self.colour_probe = nn.Linear(d_model, len(COLOURS))
            self.shape_probe = nn.Linear(d_model, len(SHAPES))

    def forward(self, outputs: dict[str, Tensor], batch: dict[str, Tensor]):
        """-> {name: (weight, value)}: each loss with its weight (0 for accuracies, logged)."""
        pointer = outputs.get("pointer_logits") if self.weights["pointer_ce"] > 0 else None
        attributes = None
        if self.weights["attribute_ce"] > 0:
            tokens = outputs["object_tokens"]  # [B,K,D]
            labels = PAIR_ATTRIBUTES.to(tokens.device)[batch[OBJECT_PAIRS]]  # [B,M,2]
            attributes = (self.colour_probe(tokens), self.shape_probe(tokens), labels)
        losses = object_losses(
            outputs["objects_xy"], pointer, batch[OBJECTS], batch[TARGET], attributes
        )
        return {k: (self.weights.get(k, 0.0), v) for k, v in losses.items()}
