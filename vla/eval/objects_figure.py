"""Pictures of what the object tokens are: each slot's spatial softmax as a heatmap on the
frame with a cross where the slot is, and which object the pointer picked for the
instruction (its probability under each panel, the pick outlined)."""

from __future__ import annotations

import numpy as np
import torch
from einops import rearrange
from PIL import Image, ImageDraw, ImageFont

from vla.eval.attention import SCALE_W, colour_scale, heat
from vla.keys import IMAGE, INSTRUCTION, STATE
from vla.models.policy import VLAPolicy

TITLE_H, CAPTION_H = 38, 18
MEANING = (
    "brightness: the slot's share of its spatial softmax on that pixel (0% to the largest of "
    "any slot, as on the scale); cross: the slot's position; p: the pointer's probability"
)


def slot_maps(policy: VLAPolicy, obs: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Slots of a batch of observations (image [B,H,W,3], state [B,S], instruction: B strings).

    Returns:
        where [B,K,H,W] (each map sums to 1), xy [B,K,2] in [-1,1], and the pointer's
        probabilities [B,K] (None without a pointer).
    """
    device = next(policy.parameters()).device
    image = torch.as_tensor(obs[IMAGE], device=device)
    state = torch.as_tensor(obs[STATE], device=device)
    tokens = policy.tokenizer.encode(list(obs[INSTRUCTION])).to(device)
    with policy.inference():
        xy, _, where = policy.sources["objects"].slots(image)  # [B,K,2], [B,K,H*W]
        logits = policy.encode(image, state, tokens).outputs.get("pointer_logits")  # [B,K]
    side = policy.sources["objects"].image_size
    where = rearrange(where, "b k (h w) -> b k h w", h=side).float().cpu().numpy()
    xy = xy.float().cpu().numpy()
    probs = None if logits is None else logits.softmax(-1).float().cpu().numpy()
    return where, xy, probs


def objects_figure(
    frame: np.ndarray,
    where: np.ndarray,
    xy: np.ndarray,
    probs: np.ndarray | None,
    instruction: str,
    note: str = "",
) -> np.ndarray:
    """One picture for one observation.

    Args:
        frame: uint8 [S,S,3] rendered frame.
        where: [K,h,w] each slot's spatial softmax.
        xy: [K,2] slot positions in [-1,1].
        probs: [K] the pointer's probabilities (None: no pointer).
        note: appended to the title.

    Returns:
        uint8 [TITLE_H + S + CAPTION_H, K * S + SCALE_W, 3]: a heatmap panel per slot on one
        colour scale, then the scale.
    """
    S, K = frame.shape[0], where.shape[0]
    font = ImageFont.load_default(size=13)
    canvas = Image.new("RGB", (K * S + SCALE_W, TITLE_H + S + CAPTION_H), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    title = f'"{instruction}"  {note + "  " if note else ""}columns: slot 1..{K}, colour scale'
    draw.text((4, 3), title, fill=(0, 0, 0), font=font)
    draw.text((4, 20), MEANING, fill=(0, 0, 0), font=font)
    vmax = float(where.max())
    pick = None if probs is None else int(probs.argmax())
    for k in range(K):
        level = np.asarray(
            Image.fromarray((where[k] / max(vmax, 1e-8) * 255).astype(np.uint8)).resize(
                (S, S), Image.BILINEAR
            )
        )
        panel = Image.fromarray(heat(frame, level.astype(np.float32) / 255.0))
        pd = ImageDraw.Draw(panel)
        cx, cy = (xy[k] + 1) / 2 * S  # [-1,1] -> pixels of the frame
        pd.line([cx - 6, cy, cx + 6, cy], fill=(0, 255, 255), width=2)
        pd.line([cx, cy - 6, cx, cy + 6], fill=(0, 255, 255), width=2)
        if k == pick:
            pd.rectangle([1, 1, S - 2, S - 2], outline=(0, 255, 0), width=3)
        canvas.paste(panel, (k * S, TITLE_H))
        caption = f"slot {k + 1}" + ("" if probs is None else f"  p={probs[k]:.0%}")
        draw.text((k * S + 4, TITLE_H + S + 2), caption, fill=(0, 0, 0), font=font)
    canvas.paste(colour_scale(S, vmax, font), (K * S, TITLE_H))
    return np.asarray(canvas)
