"""Batches for training: rank slices, epoch shuffles, shift augmentation, the split and its
statistics, one build per run, and labels checked where they enter training."""

import numpy as np
import pytest
import torch

import vla.data.datamodule as datamodule_module
from vla.data.batches import TensorBatches, random_shift
from vla.data.datamodule import (
    ReachDataModule,
)
from vla.data.dataset import DatasetError
from vla.keys import (
    ACTION,
    IMAGE,
    OBJECT_PAIRS,
    OBJECTS,
    STATE,
    TARGET,
    TOKENS,
)

ENV = dict(num_targets=3, image_size=16)


def _tensors(n: int = 53, episodes: int = 9) -> dict[str, torch.Tensor]:
    """Step i carries i in its action, so a batch says which steps it holds."""
    return {
        IMAGE: torch.zeros(n, 4, 4, 3, dtype=torch.uint8),
        STATE: torch.zeros(n, 4),
        ACTION: torch.arange(n, dtype=torch.float32)[:, None].repeat(1, 2),
        TOKENS: torch.arange(episodes)[:, None].repeat(1, 3),
        "episode": torch.arange(n) % episodes,
    }


def _steps(batches) -> list[list[int]]:
    return [b[ACTION][:, 0].long().tolist() for b in batches]


def test_rank_slices_partition_each_global_batch():
    tensors, indices = _tensors(), torch.arange(50)
    one = _steps(TensorBatches(tensors, indices, 12, shuffle=True, seed=4, epoch_fn=lambda: 2))
    ranks = [
        _steps(
            TensorBatches(
                tensors, indices, 4, shuffle=True, seed=4, rank=r, world_size=3, epoch_fn=lambda: 2
            )
        )
        for r in range(3)
    ]
    assert [len(r) for r in ranks] == [4, 4, 4]  # 50 // (4 * 3): the remainder is dropped
    for i in range(4):  # global batch i is rank 0's, then rank 1's, then rank 2's batch i
        assert ranks[0][i] + ranks[1][i] + ranks[2][i] == one[i]
    seen = [s for r in ranks for b in r for s in b]
    assert len(seen) == len(set(seen)) == 48


def test_each_epoch_is_a_new_permutation_and_reproducible():
    tensors, indices = _tensors(), torch.arange(5, 45)
    epoch = {"now": 0}
    batches = TensorBatches(
        tensors, indices, 8, shuffle=True, seed=1, drop_last=True, epoch_fn=lambda: epoch["now"]
    )
    first = [s for b in _steps(batches) for s in b]
    again = [s for b in _steps(batches) for s in b]
    epoch["now"] = 1
    second = [s for b in _steps(batches) for s in b]
    assert sorted(first) == sorted(second) == list(range(5, 45))
    assert first == again and first != second
    val = TensorBatches(tensors, indices, 16, shuffle=False)
    assert _steps(val) == [list(range(5, 21)), list(range(21, 37)), list(range(37, 45))]
    for b in batches:  # each step gets its own episode's instruction tokens
        assert torch.equal(b[TOKENS][:, 0], tensors["episode"][b[ACTION][:, 0].long()])


@pytest.mark.parametrize("pad", [1, 3])
def test_random_shift_moves_each_image_by_at_most_pad_pixels(pad):
    B, H, W = 400, 12, 10
    rows = torch.arange(H)[None, :, None].expand(B, H, W)
    cols = torch.arange(W)[None, None, :].expand(B, H, W)
    image = torch.stack([rows, cols, torch.zeros_like(rows)], -1).to(torch.uint8)  # [B,H,W,3]
    out = random_shift(image, pad, torch.Generator().manual_seed(0)).long()
    dy = out[:, H // 2, W // 2, 0] - H // 2  # the shift of each image, read at its centre
    dx = out[:, H // 2, W // 2, 1] - W // 2
    assert set(dy.tolist()) == set(dx.tolist()) == set(range(-pad, pad + 1))  # every shift occurs
    expected_rows = (torch.arange(H)[None] + dy[:, None]).clamp(0, H - 1)  # [B,H], edges replicated
    expected_cols = (torch.arange(W)[None] + dx[:, None]).clamp(0, W - 1)
    assert torch.equal(out[..., 0], expected_rows[:, :, None].expand(B, H, W))
    assert torch.equal(out[..., 1], expected_cols[:, None, :].expand(B, H, W))


def _datamodule(tmp_path, **kwargs) -> ReachDataModule:
    args = dict(dir=str(tmp_path), num_episodes=12, val_episodes=4, batch_size=8)
    return ReachDataModule(
        env=ENV, tokenize=lambda texts: torch.zeros(len(texts), 3), **args | kwargs
    )


@pytest.mark.parametrize("target, objects", [(False, False), (True, False), (False, True)])
def test_batches_carry_privileged_arrays_only_when_a_loss_asks(tmp_path, target, objects):
    dm = _datamodule(tmp_path, target=target, objects=objects)
    dm.prepare_data()
    dm.setup()
    batch = next(iter(dm.train_dataloader()))
    assert (TARGET in batch, OBJECTS in batch, OBJECT_PAIRS in batch) == (target, objects, objects)
    if objects:  # every shape of each step's scene: [B,M,2] centres, [B,M] pairs
        assert batch[OBJECTS].shape == (8, ENV["num_targets"], 2)
        assert batch[OBJECT_PAIRS].shape == (8, ENV["num_targets"])


def test_split_by_episode_and_statistics_from_the_training_split_only(tmp_path):
    dm = _datamodule(tmp_path)
    dm.prepare_data()
    with pytest.raises(RuntimeError, match="setup"):
        dm.statistics()
    dm.setup()
    d = dm.demos
    first_val = int(d.episode_start[8])  # the last 4 of 12 episodes are held out
    assert dm.train_indices.tolist() == list(range(first_val))
    assert dm.val_indices.tolist() == list(range(first_val, d.num_steps))
    stats = dm.statistics()
    state, action = np.asarray(d.state[:first_val]), np.asarray(d.action[:first_val])
    np.testing.assert_allclose(stats["state_mean"], state.mean(0), rtol=1e-5)
    np.testing.assert_allclose(stats["state_std"], state.std(0, ddof=1), rtol=1e-4)
    np.testing.assert_array_equal(stats["action_low"], action.min(0))
    np.testing.assert_array_equal(stats["action_high"], action.max(0))
    everything = np.asarray(d.state).mean(0)
    assert not np.allclose(stats["state_mean"], everything)  # the validation steps are left out


def test_one_build_or_load_however_often_lightning_asks(tmp_path, monkeypatch):
    calls = []
    real = datamodule_module.ensure_demos
    monkeypatch.setattr(
        datamodule_module, "ensure_demos", lambda *a, **k: calls.append(a) or real(*a, **k)
    )
    dm = _datamodule(tmp_path)
    dm.prepare_data()
    dm.setup("fit")
    dm.prepare_data()  # Lightning calls it again inside fit
    dm.setup("fit")
    dm.statistics()
    assert len(calls) == 1
    fresh = _datamodule(tmp_path)  # a process that skipped prepare_data loads, never builds
    fresh.setup("fit")
    assert len(calls) == 1 and fresh.demos.path == dm.demos.path


def test_non_finite_action_labels_are_refused_where_training_reads_them(tmp_path):
    dm = _datamodule(tmp_path)
    dm.prepare_data()
    action = np.load(dm.demos.path / "action.npy", mmap_mode="r+")
    action[7, 1] = np.nan
    action.flush()
    fresh = _datamodule(tmp_path)
    fresh.prepare_data()  # the files are whole, so the cache is reused as it is
    with pytest.raises(DatasetError, match=r"action.npy has 1 non-finite action labels .*step 7"):
        fresh.setup("fit")
