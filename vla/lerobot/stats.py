"""Feature statistics as lerobot computes them (`datasets/compute_stats.py`, 0.6.1).

Per episode, each feature gets min, max, mean, std, count and the quantiles q01..q99, read off
a 5000-bin histogram spanning that episode's [min, max] with linear interpolation inside a
bin. The dataset's statistics are the episodes' combined by count: min of mins, max of maxes,
the pooled mean and variance, and quantiles as the count-weighted mean of the episodes'.

Images are reduced per channel over the (sampled) frames and pixels, kept with shape (3,1,1)
and divided by 255 into [0,1]; `count` is the number of frames sampled. A 1-D feature
(timestamp, indices) gets stats of shape (1,), a vector feature of shape (D,).
"""

from __future__ import annotations

import numpy as np

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
QUANTILE_KEYS = tuple(f"q{int(q * 100):02d}" for q in QUANTILES)
NUM_BINS = 5000


def sample_indices(length: int) -> np.ndarray:
    """Which frames of an episode of `length` the image statistics read (lerobot's heuristic:
    all up to 100, then about length**0.75, at most 10,000, evenly spaced)."""
    low = min(100, length)
    num = max(low, min(int(length**0.75), 10_000))
    return np.round(np.linspace(0, length - 1, num)).astype(int)


def downsample(images: np.ndarray) -> np.ndarray:
    """Frames of 300 px or more are strided down to about 150 px, as lerobot does: [n,c,h,w]."""
    _, _, height, width = images.shape
    if max(height, width) < 300:
        return images
    factor = int(width / 150) if width > height else int(height / 150)
    return images[:, :, ::factor, ::factor]


def _quantiles(hist: np.ndarray, edges: np.ndarray, count: int) -> list[float]:
    """The QUANTILES of one dimension from its histogram (lerobot's interpolation)."""
    cumsum = np.cumsum(hist)
    out = []
    for q in QUANTILES:
        target = q * count
        idx = int(np.searchsorted(cumsum, target))
        if idx == 0:
            out.append(edges[0])
        elif idx >= len(cumsum):
            out.append(edges[-1])
        else:
            before = cumsum[idx - 1]
            inside = cumsum[idx] - before
            fraction = 0.0 if inside == 0 else (target - before) / inside
            out.append(edges[idx] + fraction * (edges[idx + 1] - edges[idx]))
    return out


def vector_stats(batch: np.ndarray) -> dict[str, np.ndarray]:
    """Stats of each column of `batch` [n,D] (one update of lerobot's RunningQuantileStats).

    uint8 columns (pixels) are histogrammed through their 256 value counts: the same bins,
    far fewer values to place."""
    n, dims = batch.shape
    values = batch.astype(np.result_type(batch.dtype, np.float32), copy=False)
    if n < 2:  # too few for a histogram: every quantile is the mean
        mean = values.mean(axis=0)
        stats = dict(min=values.min(0), max=values.max(0), mean=mean, std=values.std(0))
        return {**stats, **{k: mean.copy() for k in QUANTILE_KEYS}}
    low, high = values.min(axis=0), values.max(axis=0)
    mean = values.mean(axis=0)
    variance = (values**2).mean(axis=0) - mean**2
    quantiles = []
    for d in range(dims):
        edges = np.linspace(low[d] - 1e-10, high[d] + 1e-10, NUM_BINS + 1)
        if batch.dtype == np.uint8:
            counts = np.bincount(batch[:, d], minlength=256)
            hist, _ = np.histogram(np.arange(256), bins=edges, weights=counts)
        else:
            hist, _ = np.histogram(values[:, d], bins=edges)
        quantiles.append(_quantiles(hist, edges, n))
    quantiles = np.array(quantiles).T  # [5,D]
    stats = dict(min=low, max=high, mean=mean, std=np.sqrt(np.maximum(0, variance)))
    return {**stats, **{k: quantiles[i] for i, k in enumerate(QUANTILE_KEYS)}}


def image_stats(frames: np.ndarray) -> dict[str, np.ndarray]:
    """Per-channel stats of an episode's frames [n,H,W,3] uint8, in [0,1], each (3,1,1)."""
    chosen = downsample(np.transpose(frames[sample_indices(len(frames))], (0, 3, 1, 2)))
    count = len(chosen)
    pixels = np.transpose(chosen, (0, 2, 3, 1)).reshape(-1, chosen.shape[1])  # [n*h*w,3]
    stats = {k: (v / 255.0).reshape(-1, 1, 1) for k, v in vector_stats(pixels).items()}
    return {**stats, "count": np.array([count])}


def feature_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """Stats of a numeric feature over an episode: [n] -> each (1,), [n,D] -> each (D,)."""
    stats = vector_stats(values.reshape(len(values), -1))
    return {**stats, "count": np.array([len(values)])}


def episode_stats(columns: dict[str, np.ndarray], features: dict) -> dict[str, dict]:
    """Stats of every feature of one episode; `columns` holds one array per feature."""
    out = {}
    for key, ft in features.items():
        if ft["dtype"] in ("image", "video"):
            out[key] = image_stats(columns[key])
        elif ft["dtype"] not in ("string", "language"):
            out[key] = feature_stats(columns[key])
    return out


def aggregate(episodes: list[dict[str, dict]]) -> dict[str, dict]:
    """The dataset's stats from its episodes', weighted by their counts."""
    out = {}
    for key in episodes[0]:
        parts = [e[key] for e in episodes]
        counts = np.stack([p["count"] for p in parts])  # [E,1]
        means = np.stack([p["mean"] for p in parts])  # [E,...]
        total = counts.sum(axis=0)
        weights = counts.reshape(-1, *([1] * (means.ndim - 1)))
        mean = (means * weights).sum(axis=0) / total
        variances = np.stack([p["std"] ** 2 for p in parts])
        variance = ((variances + (means - mean) ** 2) * weights).sum(axis=0) / total
        stats = dict(
            min=np.min(np.stack([p["min"] for p in parts]), axis=0),
            max=np.max(np.stack([p["max"] for p in parts]), axis=0),
            mean=mean,
            std=np.sqrt(variance),
            count=total,
        )
        for q in QUANTILE_KEYS:
            stats[q] = (np.stack([p[q] for p in parts]) * weights).sum(axis=0) / total
        out[key] = stats
    return out


def to_json(stats: dict[str, dict]) -> dict:
    """Plain lists and numbers, as `meta/stats.json` holds them."""
    return {key: {k: np.asarray(v).tolist() for k, v in s.items()} for key, s in stats.items()}
