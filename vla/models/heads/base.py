"""What every action head offers the policy, and the binning that the token heads share.

A head turns readout features [B,R,D] into a chunk of K normalised actions [B,K,A] in [-1,1]
(K = `chunk_size`; K = 1 is a single action) and scores them against a normalised target
chunk. The policy never needs to know which kind it holds.

Padding: a target chunk that runs past its episode's end carries `is_pad` [B,K] (True = no
real action there). Losses average over the real entries only. lerobot's ACT and pi0/SmolVLA
zero the padded entries and then divide by all of them; dividing by the real ones instead
keeps a batch's loss from shrinking with how much of it is padding. Without `is_pad` (every
entry real) the loss is the plain mean, the same number a single-action head computed.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping

import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from vla import keys
from vla.errors import ConfigError


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


def action_chunk(batch: Mapping[str, Tensor]) -> tuple[Tensor, Tensor | None]:
    """A batch's target actions as chunks [B,K,A] (a [B,A] ACTION is K = 1) and ACTION_IS_PAD
    [B,K] (None: every step real)."""
    action = batch[keys.ACTION]
    chunk = action if action.dim() == 3 else action[:, None]  # [B,A] -> [B,1,A]
    return chunk, batch.get(keys.ACTION_IS_PAD)


def mean_over_real_steps(values: Tensor, is_pad: Tensor | None) -> Tensor:
    """Mean of per-entry values [B,K,A] over the entries whose step is real (is_pad [B,K])."""
    if is_pad is None:
        return values.mean()
    valid = (~is_pad).to(values.dtype)[..., None]  # [B,K] -> [B,K,1]
    return (values * valid).sum() / (valid.sum() * values.shape[-1]).clamp(min=1)


class ActionHead(nn.Module, abc.ABC):
    """Base class: subclasses implement `loss` and `predict`.

    Training runs `loss` only; `predict` is for queries and validation metrics, so a sampling
    or decoding head never samples or decodes inside a training step.

    Args:
        d_model: width of a readout feature.
        action_dim: A.
        num_readouts: R, readout tokens per sample.
        chunk_size: K, actions predicted per observation (this step's and the K-1 next).
    """

    def __init__(self, d_model: int, action_dim: int, num_readouts: int = 1, chunk_size: int = 1):
        super().__init__()
        if action_dim < 1 or num_readouts < 1:
            raise ConfigError(
                f"action_dim={action_dim} and num_readouts={num_readouts} must be >= 1"
            )
        if chunk_size < 1:
            raise ConfigError(f"chunk_size={chunk_size} must be >= 1")
        self.d_model = d_model
        self.action_dim = action_dim
        self.num_readouts = num_readouts
        self.chunk_size = chunk_size

    def reset(self) -> None:
        """Start of an evaluation: heads that sample restart their noise stream here."""

    def check_target(self, target_norm: Tensor, is_pad: Tensor | None) -> None:
        """Refuses targets that are not [B,K,A] chunks (and masks that are not [B,K])."""
        want = (target_norm.shape[0], self.chunk_size, self.action_dim)
        if tuple(target_norm.shape) != want:
            raise ValueError(
                f"target_norm has shape {tuple(target_norm.shape)}, expected [B,K,A] = {want}"
            )
        if is_pad is not None and tuple(is_pad.shape) != want[:2]:
            raise ValueError(f"is_pad has shape {tuple(is_pad.shape)}, expected [B,K] = {want[:2]}")

    @abc.abstractmethod
    def loss(
        self, features: Tensor, target_norm: Tensor, is_pad: Tensor | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The training loss.

        Args:
            features: readout features [B,R,D].
            target_norm: target action chunks [B,K,A], normalised to [-1,1].
            is_pad: bool [B,K], True where the chunk ran past its episode (None: all real).

        Returns:
            scalar loss and a dict of detached scalar tensors to log.
        """

    @abc.abstractmethod
    def predict(self, features: Tensor) -> Tensor:
        """features [B,R,D] -> normalised action chunks [B,K,A] in [-1,1]."""


class BinnedActionHead(ActionHead):
    """An ActionHead whose actions are `num_bins` uniform bins per dimension over [-1,1]."""

    def __init__(
        self,
        d_model: int,
        action_dim: int,
        num_bins: int = 256,
        num_readouts: int = 1,
        chunk_size: int = 1,
    ):
        super().__init__(d_model, action_dim, num_readouts, chunk_size)
        if num_bins < 2:
            raise ConfigError(f"num_bins={num_bins} must be >= 2")
        self.num_bins = num_bins

    def encode(self, actions: Tensor) -> Tensor:
        """Normalised actions [..,A] -> bin ids [..,A]."""
        return actions_to_bins(actions, self.num_bins)

    def decode(self, bins: Tensor) -> Tensor:
        """Bin ids [..,A] -> normalised actions [..,A] at the bin centres."""
        return bins_to_actions(bins, self.num_bins)

    def token_loss(
        self, logits: Tensor, bins: Tensor, is_pad: Tensor | None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """Cross-entropy and bin accuracy over the real tokens.

        Args:
            logits: [B,K,A,N]; bins: int64 [B,K,A]; is_pad: bool [B,K] or None.
        """
        flat_logits = rearrange(logits, "b k a n -> (b k a) n")
        flat_bins = rearrange(bins, "b k a -> (b k a)")
        if is_pad is None:  # the plain mean, exactly as a single-action head computed it
            ce = F.cross_entropy(flat_logits, flat_bins)
        else:
            per_token = F.cross_entropy(flat_logits, flat_bins, reduction="none")  # [(B K A)]
            ce = mean_over_real_steps(per_token.reshape(bins.shape), is_pad)  # -> [B,K,A] -> scalar
        hits = (logits.detach().argmax(dim=-1) == bins).float()  # [B,K,A]
        return ce, {"ce": ce.detach(), "bin_accuracy": mean_over_real_steps(hits, is_pad)}
