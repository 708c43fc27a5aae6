"""What every action head offers the policy, and the binning that the token heads share.

A head turns readout features [B,R,D] into normalised actions [B,A] in [-1,1] and scores them
against a normalised target. The policy never needs to know which kind it holds.
"""

from __future__ import annotations

import abc

from einops import rearrange
from torch import Tensor, nn


def flatten_readouts(features: Tensor) -> Tensor:
    """[B,R,D] -> [B,R*D]: each readout token keeps its own weights in the head."""
    return rearrange(features, "b r d -> b (r d)")


def actions_to_bins(actions: Tensor, num_bins: int) -> Tensor:
    """Normalised actions [..] in [-1,1] -> bin ids [..] (int64) of `num_bins` uniform bins.

    Values outside [-1,1] land in the edge bins.
    """
    unit = (actions.clamp(-1.0, 1.0) + 1) / 2  # [-1,1] -> [0,1]
    return (unit * num_bins).floor().long().clamp(0, num_bins - 1)


def bins_to_actions(bins: Tensor, num_bins: int) -> Tensor:
    """Bin ids [..] -> the bins' centres [..] in [-1,1] (within half a bin of any value in it)."""
    return (bins.float() + 0.5) / num_bins * 2 - 1


class ActionHead(nn.Module, abc.ABC):
    """Base class: subclasses implement `loss_and_prediction`, `predict` and `flops`.

    Args:
        d_model: width of a readout feature.
        action_dim: A.
        num_readouts: R, readout tokens per sample.
    """

    def __init__(self, d_model: int, action_dim: int, num_readouts: int = 1):
        super().__init__()
        if action_dim < 1 or num_readouts < 1:
            raise ValueError(
                f"action_dim={action_dim} and num_readouts={num_readouts} must be >= 1"
            )
        self.d_model = d_model
        self.action_dim = action_dim
        self.num_readouts = num_readouts

    def loss(self, features: Tensor, target_norm: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """
        Args:
            features: readout features [B,R,D].
            target_norm: target actions [B,A], normalised to [-1,1].

        Returns:
            scalar loss and a dict of detached scalar tensors to log.
        """
        loss, logs, _ = self.loss_and_prediction(features, target_norm)
        return loss, logs

    @abc.abstractmethod
    def loss_and_prediction(
        self, features: Tensor, target_norm: Tensor
    ) -> tuple[Tensor, dict[str, Tensor], Tensor]:
        """`loss` plus a detached prediction [B,A] in [-1,1], at little extra cost (for metrics)."""

    @abc.abstractmethod
    def predict(self, features: Tensor) -> Tensor:
        """features [B,R,D] -> normalised actions [B,A] in [-1,1]."""

    @abc.abstractmethod
    def flops(self) -> int:
        """Forward FLOPs (matmuls) for one sample."""


class BinnedActionHead(ActionHead):
    """An ActionHead whose actions are `num_bins` uniform bins per dimension over [-1,1]."""

    def __init__(self, d_model: int, action_dim: int, num_bins: int = 256, num_readouts: int = 1):
        super().__init__(d_model, action_dim, num_readouts)
        if num_bins < 2:
            raise ValueError(f"num_bins={num_bins} must be >= 2")
        self.num_bins = num_bins

    def encode(self, actions: Tensor) -> Tensor:
        """Normalised actions [B,A] -> bin ids [B,A]."""
        return actions_to_bins(actions, self.num_bins)

    def decode(self, bins: Tensor) -> Tensor:
        """Bin ids [B,A] -> normalised actions [B,A] at the bin centres."""
        return bins_to_actions(bins, self.num_bins)

    @staticmethod
    def _accuracy(logits: Tensor, bins: Tensor) -> Tensor:
        return (logits.argmax(dim=-1) == bins).float().mean()
