"""Rasterising the arena: filled shapes on a pixel grid, with numpy only.

Arena coordinates are (x, y) in [0, 1]^2; pixel (row i, column j) of an S x S image covers the
point ((j + 0.5) / S, (i + 0.5) / S). So y grows downwards, as in the image.
"""

from __future__ import annotations

import functools

import numpy as np

from vla.envs.grammar import COLOURS, PAIRS

BACKGROUND = (24, 24, 32)
EFFECTOR = (255, 255, 255)
REACHED_BRIGHTNESS = 0.4  # a shape already reached (in a sequence) keeps its hue, dimmed


@functools.lru_cache(maxsize=8)
def pixel_centres(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Arena coordinates of the pixel centres: x [1,S] and y [S,1], broadcastable to [S,S]."""
    c = (np.arange(size, dtype=np.float32) + 0.5) / size
    return c[None, :], c[:, None]


def shape_mask(shape: str, centre: np.ndarray, half: float, size: int) -> np.ndarray:
    """Boolean [S,S] mask of `shape` centred at `centre` with half-width `half` (arena units)."""
    x, y = pixel_centres(size)
    dx, dy = x - centre[0], y - centre[1]
    if shape == "circle":
        return dx * dx + dy * dy <= half * half
    if shape == "square":
        s = 0.85 * half  # same area as the circle, roughly, so size alone does not give it away
        return (np.abs(dx) <= s) & (np.abs(dy) <= s)
    if shape == "triangle":
        # apex up: the half-width grows linearly from 0 at the top to `half` at the base
        t = (dy + half) / (2 * half)  # 0 at the apex row, 1 at the base row
        return (t >= 0) & (t <= 1) & (np.abs(dx) <= t * half)
    raise ValueError(f"unknown shape {shape!r}")


def draw_scene(
    size: int,
    pairs: list[int],
    centres: np.ndarray,
    half: float,
    reached: frozenset[int] = frozenset(),
    background: tuple[int, int, int] = BACKGROUND,
) -> np.ndarray:
    """The static part of a frame: the background and each shape (`pairs`: indices into
    `grammar.PAIRS`), the indices in `reached` dimmed. Returns uint8 [S,S,3]."""
    image = np.empty((size, size, 3), dtype=np.uint8)
    image[:] = background
    for i, (pair, centre) in enumerate(zip(pairs, centres, strict=True)):
        colour, shape = COLOURS[PAIRS[pair][0]], PAIRS[pair][1]
        image[shape_mask(shape, centre, half, size)] = dimmed(colour) if i in reached else colour
    return image


def dimmed(colour: tuple[int, int, int]) -> tuple[int, int, int]:
    """How a shape that has been reached is drawn."""
    return tuple(round(c * REACHED_BRIGHTNESS) for c in colour)


def add_noise(image: np.ndarray, std: float, rng: np.random.Generator) -> np.ndarray:
    """uint8 `image` plus Gaussian pixel noise of `std` (0-255 units), drawn from `rng`."""
    if std == 0:
        return image
    noise = rng.normal(0.0, std, image.shape)
    return np.clip(image + noise, 0, 255).astype(np.uint8)


def draw_disc(image: np.ndarray, centre: np.ndarray, radius: float, colour=EFFECTOR) -> None:
    """Paints a disc in place, touching only the pixels of its bounding box (fast per step)."""
    size = image.shape[0]
    r_px = radius * size
    cx, cy = centre[0] * size, centre[1] * size
    j0, j1 = max(int(cx - r_px), 0), min(int(cx + r_px) + 1, size)
    i0, i1 = max(int(cy - r_px), 0), min(int(cy + r_px) + 1, size)
    jj = np.arange(j0, j1, dtype=np.float32)[None, :] + 0.5 - cx
    ii = np.arange(i0, i1, dtype=np.float32)[:, None] + 0.5 - cy
    # at least the pixel under the centre, so a small radius never vanishes at low resolution
    mask = jj * jj + ii * ii <= max(r_px * r_px, 0.5)
    image[i0:i1, j0:j1][mask] = colour
