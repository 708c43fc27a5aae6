import pytest
import torch

from vla.data.batches import TensorBatches
from vla.data.chunks import chunk_indices
from vla.keys import ACTION, ACTION_IS_PAD, IMAGE, STATE, TOKENS


def test_chunks_stop_at_each_episodes_end():
    episode = torch.tensor([0, 0, 0, 1, 1, 2, 7, 7, 7, 7])  # ids need only be contiguous runs
    index, is_pad = chunk_indices(episode, 3)
    assert index.tolist() == [
        [0, 1, 2], [1, 2, 2], [2, 2, 2],  # episode 0: steps 0-2
        [3, 4, 4], [4, 4, 4],             # episode 1: steps 3-4
        [5, 5, 5],                        # episode 2: one step
        [6, 7, 8], [7, 8, 9], [8, 9, 9], [9, 9, 9],
    ]  # fmt: skip
    assert is_pad.int().tolist() == [
        [0, 0, 0], [0, 0, 1], [0, 1, 1],
        [0, 0, 1], [0, 1, 1],
        [0, 1, 1],
        [0, 0, 0], [0, 0, 0], [0, 0, 1], [0, 1, 1],
    ]  # fmt: skip
    one, no_pad = chunk_indices(episode, 1)
    assert one[:, 0].tolist() == list(range(10)) and not no_pad.any()
    with pytest.raises(ValueError, match="chunk_size=0 must be >= 1"):
        chunk_indices(episode, 0)


def _tensors():
    episode = torch.tensor([0, 0, 0, 1, 1])
    return {
        IMAGE: torch.zeros(5, 4, 4, 3, dtype=torch.uint8),
        STATE: torch.zeros(5, 4),
        ACTION: torch.arange(10, dtype=torch.float32).reshape(5, 2),  # step i: [2i, 2i+1]
        TOKENS: torch.tensor([[1, 2], [3, 4]]),
        "episode": episode,
    }


def test_batches_carry_the_chunk_and_its_pad_mask():
    indices = torch.tensor([2, 3, 0])
    (batch,) = TensorBatches(_tensors(), indices, batch_size=3, shuffle=False, chunk_size=3)
    assert batch[ACTION].shape == (3, 3, 2)
    assert batch[ACTION][:, :, 0].tolist() == [[4, 4, 4], [6, 8, 8], [0, 2, 4]]
    assert batch[ACTION_IS_PAD].tolist() == [
        [False, True, True],
        [False, False, True],
        [False, False, False],
    ]
    assert batch[TOKENS].tolist() == [[1, 2], [3, 4], [1, 2]]
    (single,) = TensorBatches(
        _tensors(), indices, batch_size=3, shuffle=False
    )  # chunk_size 1: as before
    assert single[ACTION].tolist() == [[4, 5], [6, 7], [0, 1]] and ACTION_IS_PAD not in single
