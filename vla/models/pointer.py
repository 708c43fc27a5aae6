"""Pointer: which object the readout means, as a distribution over object tokens, and where
that is.

    readout [B,R,D] ─ mean over R ─ to_q ─> q [B,D] ─┐
    objects [B,K,D] (encoder outputs) ─ to_k ─> k [B,K,D] ─ q.k / sqrt(D) ─> logits [B,K]
    softmax(logits) @ xy [B,K,2] ─> pointed (x, y) [B,2] ─ Linear ─> [B,D] added to the readout

An action is mostly "from here towards that object", so the head gets the position the
pointer picks as a number, the way keypoints gave it one. The pointer is part of the policy
(it runs at rollout on pixels, words and state alone); training may supervise its logits with
cross-entropy against the object to reach now (`vla.training.module.BCModule`), which asks
for a choice among the objects the encoder sees, not for a position it would have to derive.
"""

from __future__ import annotations

from torch import Tensor, nn


class Pointer(nn.Module):
    """Readout features [B,R,D] and object tokens [B,K,D] -> logits [B,K] and a feature [B,D].

    Args:
        d_model: token width.
    """

    def __init__(self, d_model: int):
        super().__init__()
        self.d_model = d_model
        self.to_q = nn.Linear(d_model, d_model)  # [B,D] -> [B,D]
        self.to_k = nn.Linear(d_model, d_model)  # [B,K,D] -> [B,K,D]
        self.to_feature = nn.Linear(2, d_model)  # [B,2] -> [B,D]

    def forward(self, readout: Tensor, objects: Tensor, xy: Tensor) -> tuple[Tensor, Tensor]:
        """
        Args:
            readout: readout features [B,R,D].
            objects: the encoder's outputs at the object tokens [B,K,D].
            xy: the objects' positions [B,K,2] in [-1,1].

        Returns:
            logits [B,K] over the objects and the pointed position's feature [B,D].
        """
        B, K, D = objects.shape
        q = self.to_q(readout.mean(dim=1))  # [B,R,D] -> [B,D]
        k = self.to_k(objects)  # [B,K,D]
        logits = (k @ q[:, :, None]).squeeze(-1) / D**0.5  # [B,K,D] @ [B,D,1] -> [B,K]
        pointed = (logits.softmax(-1)[:, None] @ xy).squeeze(1)  # [B,1,K] @ [B,K,2] -> [B,2]
        return logits, self.to_feature(pointed)  # [B,K], [B,D]
