"""Pictures of a suite, drawn with PIL (no plotting library needed): a bar chart of success
rates with their 95% intervals, and a contact sheet of one scene per level."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont

BAR = (70, 120, 200)
UNTRAINED = (170, 170, 180)  # levels of families the policy was not trained on
WHISKER = (20, 20, 20)


def success_chart(rows: list[dict], title: str, width: int = 900) -> np.ndarray:
    """uint8 [H,W,3] image. Each row: {"label", "success_rate", "ci95": [low, high],
    "trained": bool}."""
    font = ImageFont.load_default(size=13)
    row_h, top, left, right = 24, 40, 260, 70
    height = top + row_h * len(rows) + 30
    canvas = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    draw.text((8, 8), title, fill=(0, 0, 0), font=font)
    span = width - left - right

    def x(rate: float) -> float:
        return left + rate * span

    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        draw.line([x(tick), top - 6, x(tick), height - 24], fill=(225, 225, 225))
        draw.text((x(tick) - 12, height - 20), f"{tick:.0%}", fill=(90, 90, 90), font=font)
    for i, row in enumerate(rows):
        y = top + i * row_h
        draw.text((8, y + 4), row["label"][:36], fill=(0, 0, 0), font=font)
        colour = BAR if row.get("trained", True) else UNTRAINED
        draw.rectangle([x(0), y + 4, x(row["success_rate"]), y + row_h - 4], fill=colour)
        low, high = row["ci95"]
        mid = y + row_h / 2
        draw.line([x(low), mid, x(high), mid], fill=WHISKER, width=2)
        for end in (low, high):
            draw.line([x(end), mid - 5, x(end), mid + 5], fill=WHISKER, width=2)
        draw.text((x(1.0) + 6, y + 4), f"{row['success_rate']:.0%}", fill=(0, 0, 0), font=font)
    return np.asarray(canvas)


def contact_sheet(frames: list[np.ndarray], labels: list[str], columns: int = 4) -> np.ndarray:
    """Frames (uint8 [H,W,3], one size) in a grid, each with its label above: uint8 image."""
    font = ImageFont.load_default(size=13)
    H, W, _ = frames[0].shape
    label_h, rows = 20, -(-len(frames) // columns)
    sheet = Image.new("RGB", (columns * W, rows * (H + label_h)), (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    for i, (frame, label) in enumerate(zip(frames, labels, strict=True)):
        x, y = (i % columns) * W, (i // columns) * (H + label_h)
        draw.text((x + 4, y + 3), label, fill=(0, 0, 0), font=font)
        sheet.paste(Image.fromarray(frame), (x, y + label_h))
    return np.asarray(sheet)
