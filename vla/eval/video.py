"""Rollout videos for people: the instruction written on each frame, success or failure marked,
as GIFs (files and TensorBoard's IMAGES tab, which plays them) and MP4 files."""

from __future__ import annotations

import io
from pathlib import Path

import av
import numpy as np
from PIL import Image, ImageDraw, ImageFont
from tensorboard.compat.proto.summary_pb2 import Summary

SUCCESS = (60, 200, 90)
FAILURE = (220, 60, 60)


def annotate(frames: list[np.ndarray], instruction: str, success: bool) -> list[np.ndarray]:
    """Adds a caption bar with the instruction above each frame; the last frame gets a
    coloured border and SUCCESS/FAILURE. Frames are uint8 [H,W,3]; returns [H+bar,W,3]."""
    H, W, _ = frames[0].shape
    bar = max(16, H // 12)
    caption = f'"{instruction}"  t={len(frames) - 1:>2}'
    font = _font_that_fits(caption, int(bar * 0.7), W - 8)
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


def _font_that_fits(text: str, size: int, width: int):
    """The default font at `size`, or smaller until `text` fits in `width` pixels."""
    font = ImageFont.load_default(size=size)
    while size > 6 and font.getlength(text) > width:
        size -= 1
        font = ImageFont.load_default(size=size)
    return font


def shrink(frames: list[np.ndarray], width: int) -> list[np.ndarray]:
    """Frames scaled down to `width` pixels wide (kept as they are if not wider)."""
    H, W, _ = frames[0].shape
    if W <= width:
        return frames
    size = (width, round(H * width / W))
    return [np.asarray(Image.fromarray(f).resize(size, Image.Resampling.BILINEAR)) for f in frames]


def gif_bytes(frames: list[np.ndarray], fps: int = 10, hold_last: int = 5) -> bytes:
    """An animated GIF, looping; the last frame is held for `hold_last` extra frames.

    All frames share one palette, taken from the first, middle and last frame (the last
    carries the outcome's colour): only the pixels that change between frames are then
    stored, which makes these flat-coloured rollouts 2-3x smaller than per-frame palettes.
    """
    sample = Image.fromarray(np.concatenate([frames[0], frames[len(frames) // 2], frames[-1]]))
    palette = sample.quantize(colors=64, dither=Image.Dither.NONE)
    images = [
        Image.fromarray(f).quantize(palette=palette, dither=Image.Dither.NONE)
        for f in [*frames, *[frames[-1]] * hold_last]
    ]
    buffer = io.BytesIO()
    images[0].save(
        buffer,
        format="GIF",
        save_all=True,
        append_images=images[1:],
        duration=int(1000 / fps),
        loop=0,
    )
    return buffer.getvalue()


def save_gif(frames: list[np.ndarray], path, fps: int = 10, hold_last: int = 5) -> Path:
    """Writes an animated GIF; the last frame is held for `hold_last` extra frames."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gif_bytes(frames, fps, hold_last))
    return path


def save_mp4(frames: list[np.ndarray], path, fps: int = 10, hold_last: int = 5) -> Path:
    """Writes an H.264 MP4 (PyAV's bundled FFmpeg, no system install); the last frame is held
    for `hold_last` extra frames. H.264's 4:2:0 colour needs even sizes: odd ones are padded."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    H, W, _ = frames[0].shape
    pad = ((0, H % 2), (0, W % 2), (0, 0))
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = W + W % 2, H + H % 2, "yuv420p"
        for frame in [*frames, *[frames[-1]] * hold_last]:
            picture = av.VideoFrame.from_ndarray(np.pad(frame, pad), format="rgb24")
            container.mux(stream.encode(picture))
        container.mux(stream.encode())  # flush the encoder's delayed frames
    return path


def add_gif(writer, tag: str, frames: list[np.ndarray], step: int, fps: int = 10) -> None:
    """Logs frames to TensorBoard as an animated GIF image, which its IMAGES tab plays.

    `writer` is a `torch.utils.tensorboard.SummaryWriter`; its `add_image` would encode a
    single PNG, so the GIF's bytes go into the image summary here.
    """
    H, W, _ = frames[0].shape
    image = Summary.Image(
        height=H, width=W, colorspace=3, encoded_image_string=gif_bytes(frames, fps)
    )
    summary = Summary(value=[Summary.Value(tag=tag, image=image)])
    writer._get_file_writer().add_summary(summary, step)
