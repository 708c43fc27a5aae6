"""Raw env observations -> the batched tensors the policy runs on.

An env (or a vector of envs) hands over numpy arrays and text, one sample or a batch; the
policy wants image uint8 [B,H,W,3], state float32 [B,S] and token ids [B,L] on its device.
Bad input is refused here, naming the field, instead of surfacing as NaN actions later.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from vla import keys
from vla.models.language import Tokenizer


def _to_tensor(name: str, value, ndim_single: int) -> Tensor:
    if isinstance(value, Tensor):
        t = value.detach()
    else:
        t = torch.from_numpy(np.ascontiguousarray(np.asarray(value)))
    if t.dim() not in (ndim_single, ndim_single + 1):
        raise ValueError(
            f"{name} must have {ndim_single} dims (one sample) or {ndim_single + 1} (a batch), "
            f"got shape {tuple(t.shape)}"
        )
    if t.is_floating_point() and not torch.isfinite(t).all():
        raise ValueError(f"{name} contains NaN or inf")
    return t


def prepare_observation(
    obs: Mapping, tokenizer: Tokenizer, device: torch.device
) -> tuple[Tensor, Tensor, Tensor, bool]:
    """
    Args:
        obs: {"image": [H,W,3] or [B,H,W,3], "state": [S] or [B,S],
              "instruction": str or a list/tuple of B str}; numpy or torch.
        tokenizer: turns the instructions into ids (unknown words -> UNK).
        device: where the policy lives.

    Returns:
        image [B,H,W,3], state float32 [B,S], tokens int64 [B,L], and whether obs was batched.
    """
    for key in (keys.IMAGE, keys.STATE, keys.INSTRUCTION):
        if key not in obs:
            raise ValueError(f"observation has no {key!r} (got keys: {sorted(obs)})")
    image = _to_tensor(keys.IMAGE, obs[keys.IMAGE], ndim_single=3)
    state = _to_tensor(keys.STATE, obs[keys.STATE], ndim_single=1)
    batched = image.dim() == 4
    if batched != (state.dim() == 2):
        raise ValueError(
            f"image {tuple(image.shape)} and state {tuple(state.shape)} disagree on batching"
        )
    if not batched:
        image, state = image[None], state[None]  # [H,W,3] -> [1,H,W,3]; [S] -> [1,S]
    B = image.shape[0]

    text = obs[keys.INSTRUCTION]
    texts = [text] if isinstance(text, str) else [str(t) for t in text]
    if len(texts) == 1 and B > 1:
        texts = texts * B  # one instruction for the whole batch
    if len(texts) != B or state.shape[0] != B:
        raise ValueError(
            f"batch sizes disagree: image {B}, state {state.shape[0]}, instruction {len(texts)}"
        )
    tokens = tokenizer.encode(texts)  # [B,L]
    return image.to(device), state.to(device, torch.float32), tokens.to(device), batched
