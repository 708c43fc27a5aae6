"""meta/stats.json holds what numpy computes from the frames, combined as lerobot does."""

import json

import numpy as np
import pytest

from vla.lerobot import stats

pytest.importorskip("pyarrow")
pytest.importorskip("pandas")

QS = (0.01, 0.10, 0.50, 0.90, 0.99)


def episodes_of(demos):
    bounds = np.append(demos.episode_start, demos.num_steps)
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def test_moments_match_numpy(exported, demos):
    saved = json.loads((exported / "meta/stats.json").read_text())
    for key, values in (("observation.state", demos.state), ("action", demos.action)):
        s = {k: np.asarray(v) for k, v in saved[key].items()}
        np.testing.assert_allclose(s["min"], values.min(0), atol=1e-7)
        np.testing.assert_allclose(s["max"], values.max(0), atol=1e-7)
        np.testing.assert_allclose(s["mean"], values.mean(0, dtype=np.float64), atol=1e-6)
        np.testing.assert_allclose(s["std"], values.std(0, dtype=np.float64), atol=1e-6)
        assert s["count"].tolist() == [demos.num_steps]
    # images: per channel over every frame (episodes under 100 frames are read whole), in [0,1]
    pixels = np.asarray(demos.image, dtype=np.float64) / 255  # [N,H,W,3]
    image = {k: np.asarray(v).reshape(-1) for k, v in saved["observation.image"].items()}
    np.testing.assert_allclose(image["mean"], pixels.mean((0, 1, 2)), atol=1e-6)
    np.testing.assert_allclose(image["std"], pixels.std((0, 1, 2)), atol=1e-6)
    np.testing.assert_allclose(image["min"], pixels.min((0, 1, 2)))
    np.testing.assert_allclose(image["max"], pixels.max((0, 1, 2)))
    assert image["count"].tolist() == [demos.num_steps]
    frame_index = np.concatenate([np.arange(s.stop - s.start) for s in episodes_of(demos)])
    np.testing.assert_allclose(saved["timestamp"]["max"], [frame_index.max() / 10])
    assert saved["episode_index"]["max"] == [demos.num_episodes - 1]


def test_quantiles_are_count_weighted_episode_quantiles(exported, demos):
    """Each episode's quantile is the inverse CDF read off a 5000-bin histogram (within one
    bin of numpy's), and the dataset's is their mean weighted by episode length."""
    saved = json.loads((exported / "meta/stats.json").read_text())
    parts = episodes_of(demos)
    lengths = np.array([s.stop - s.start for s in parts])
    per_episode = np.stack(
        [np.quantile(demos.action[s], QS, axis=0, method="inverted_cdf") for s in parts]
    )  # [E,5,2]
    bins = np.stack([np.ptp(demos.action[s], axis=0) / stats.NUM_BINS for s in parts])  # [E,2]
    expected = (per_episode * lengths[:, None, None]).sum(0) / lengths.sum()  # [5,2]
    tolerance = (bins * lengths[:, None]).sum(0) / lengths.sum() + 1e-6  # [2]
    for i, key in enumerate(stats.QUANTILE_KEYS):
        assert np.all(np.abs(np.asarray(saved["action"][key]) - expected[i]) <= tolerance), key


def test_quantiles_of_a_known_distribution():
    rng = np.random.default_rng(0)
    values = rng.uniform(-2, 2, size=(20_000, 1)).astype(np.float32)
    s = stats.feature_stats(values)
    for q, key in zip(QS, stats.QUANTILE_KEYS, strict=True):
        assert abs(s[key][0] - (-2 + 4 * q)) < 0.05, key
    # uint8 pixels go through their value counts: the same histogram as the values themselves
    pixels = rng.integers(0, 256, size=(5000, 3), dtype=np.uint8)
    direct = stats.vector_stats(pixels.astype(np.float32))
    counted = stats.vector_stats(pixels)
    for key in direct:
        np.testing.assert_allclose(counted[key], direct[key], rtol=1e-6)


def test_quantiles_interpolate_inside_a_bin():
    """Half the values at 0, half at 1: q90 is 4/5 of the way through the top bin."""
    values = np.repeat([0.0, 1.0], 50)
    s = stats.feature_stats(values)
    width = (1 + 2e-10) / stats.NUM_BINS
    assert abs(s["q50"][0] - (-1e-10)) < 1e-12  # reached in the first bin: its lower edge
    assert abs(s["q90"][0] - (1 + 1e-10 - width + 0.8 * width)) < 1e-9
    assert s["count"].tolist() == [100] and s["mean"].tolist() == [0.5]


def test_image_sampling_follows_lerobot():
    assert stats.sample_indices(50).tolist() == list(range(50))
    assert len(stats.sample_indices(1000)) == 177  # lerobot's table: 1000 frames -> 177
    assert len(stats.sample_indices(5000)) == 594
