"""Rollout videos for people: the instruction written on each frame, success or failure marked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

SUCCESS = (60, 200, 90)
FAILURE = (220, 60, 60)


def annotate(frames: list[np.ndarray], instruction: str, success: bool) -> list[np.ndarray]:
    """Adds a caption bar with the instruction above each frame; the last frame gets a
    coloured border and SUCCESS/FAILURE. Frames are uint8 [H,W,3]; returns [H+bar,W,3]."""
    H, W, _ = frames[0].shape
    bar = max(16, H // 12)
    font = ImageFont.load_default(size=int(bar * 0.7))
    out = []
    for i, frame in enumerate(frames):
        last = i == len(frames) - 1
        canvas = Image.new("RGB", (W, H + bar), (0, 0, 0))
        canvas.paste(Image.fromarray(frame), (0, bar))
        draw = ImageDraw.Draw(canvas)
        draw.text((4, bar * 0.1), f'"{instruction}"  t={i}', fill=(255, 255, 255), font=font)
        if last:
            colour = SUCCESS if success else FAILURE
            draw.rectangle([0, bar, W - 1, H + bar - 1], outline=colour, width=max(2, W // 64))
            draw.text((6, bar + 4), "SUCCESS" if success else "FAILURE", fill=colour, font=font)
        out.append(np.asarray(canvas))
    return out


def save_gif(frames: list[np.ndarray], path, fps: int = 10, hold_last: int = 5) -> Path:
    """Writes an animated GIF; the last frame is held for `hold_last` extra frames."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(f) for f in frames] + [Image.fromarray(frames[-1])] * hold_last
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    return path


def filmstrip(frames: list[np.ndarray], max_frames: int = 8) -> np.ndarray:
    """Up to `max_frames` evenly spaced frames side by side: uint8 [H, W*k, 3] (TensorBoard)."""
    idx = np.linspace(0, len(frames) - 1, min(max_frames, len(frames))).round().astype(int)
    return np.concatenate([frames[i] for i in idx], axis=1)
