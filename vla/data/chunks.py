"""Action chunks: for every step, the indices of the K steps that start at it in its episode.

ACT and pi0 train on chunks of future actions. Past an episode's end there is nothing to
imitate: like lerobot (whose out-of-range frames repeat the episode's last one and set
`action_is_pad`), the index stays on the episode's last step and the step is marked padding,
so the loss can ignore it.
"""

from __future__ import annotations

import torch
from torch import Tensor


def chunk_indices(episode: Tensor, chunk_size: int) -> tuple[Tensor, Tensor]:
    """Indices and pad mask of every step's chunk, computed once for a whole dataset.

    Args:
        episode: int64 [N], the episode of each step; each episode's steps are contiguous and
            in time order (as demonstrations are stored).
        chunk_size: K >= 1.

    Returns:
        index int64 [N,K] (row i: i, i+1, ..., clamped to the last step of i's episode) and
        is_pad bool [N,K] (True where i+k is past that episode's end). Column 0 is always i.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size} must be >= 1")
    if episode.dim() != 1:
        raise ValueError(f"episode must be 1-D [N], got shape {tuple(episode.shape)}")
    _, lengths = torch.unique_consecutive(episode, return_counts=True)  # [E]
    ends = torch.cumsum(lengths, dim=0)  # one past each run's last step
    last = torch.repeat_interleave(ends - 1, lengths)  # [N]: the last step of i's episode
    wanted = torch.arange(len(episode))[:, None] + torch.arange(chunk_size)[None, :]  # [N,K]
    is_pad = wanted > last[:, None]
    return torch.minimum(wanted, last[:, None]), is_pad
