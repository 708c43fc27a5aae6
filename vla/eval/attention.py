"""Pictures of where the policy looks: the readout token's attention over the image patches
(as a heatmap on the frame) and over the instruction's words, layer by layer."""

from __future__ import annotations

import numpy as np
import torch
from einops import rearrange
from PIL import Image, ImageDraw, ImageFont

from vla.keys import IMAGE, INSTRUCTION, STATE
from vla.models.policy import VLAPolicy


def attention_maps(
    policy: VLAPolicy, image: torch.Tensor, state: torch.Tensor, tokens: torch.Tensor
) -> tuple[list[torch.Tensor], dict[str, slice]]:
    """Every attention weight of a query (eval mode, no autograd).

    Returns:
        weights: one [B,H,T,T] per encoder layer, plus [B,H,R,T_obs] for a "cross" readout;
            every row sums to 1 over the keys.
        layout: group name -> slice of the sequence (the keys' axis).
    """
    with policy.inference():
        weights = policy.encode(image, state, tokens, need_weights=True).weights
    return weights, policy.token_layout(num_words=tokens.shape[1])


def readout_attention(
    policy: VLAPolicy, image: torch.Tensor, state: torch.Tensor, tokens: torch.Tensor
) -> tuple[list[tuple[str, torch.Tensor]], dict[str, slice]]:
    """The first readout query's attention weights, per layer.

    Returns:
        [(name, weights [B,H,T_keys])] for each encoder layer ("self" readout) or the
        cross-attention readout ("cross"), and the layout of the keys (group -> slice).
    """
    weights, layout = attention_maps(policy, image, state, tokens)
    if "readout" in layout:  # queries are in the sequence: take their row in every layer
        r = layout["readout"].start
        return [(f"layer {i}", w[:, :, r, :]) for i, w in enumerate(weights)], layout
    obs_layout = {k: v for k, v in layout.items() if k != "readout"}
    return [("cross readout", weights[-1][:, :, 0, :])], obs_layout


def heatmap_on_frame(frame: np.ndarray, patch_weights: np.ndarray) -> np.ndarray:
    """Blends a [gh,gw] attention map (upsampled, nearest) onto a uint8 [S,S,3] frame."""
    S = frame.shape[0]
    w = patch_weights / max(patch_weights.max(), 1e-8)  # 0..1 relative to the peak
    big = np.asarray(Image.fromarray((w * 255).astype(np.uint8)).resize((S, S), Image.NEAREST))
    alpha = (big.astype(np.float32) / 255.0)[..., None] * 0.75
    heat = np.stack([255 * np.ones_like(big), big, np.zeros_like(big)], -1).astype(np.float32)
    return (frame * (1 - alpha) + heat * alpha).astype(np.uint8)


def attention_figure(
    frame: np.ndarray,
    rows: list[tuple[str, np.ndarray]],
    layout: dict[str, slice],
    words: list[str],
    grid: int,
    instruction: str,
    note: str = "",
) -> np.ndarray:
    """One picture for one observation.

    Args:
        frame: uint8 [S,S,3] rendered frame.
        rows: (name, weights [H,T_keys]) per layer.
        layout: where image patches and words are among the keys.
        words: the instruction's tokens (PAD excluded), aligned with the first text keys.
        grid: patches per image side.
        note: appended to the title (e.g. which step's query this is).
    Returns:
        uint8 [rows * S + title, (1 + heads) * S + word panel, 3]: per layer, the head-mean
        heatmap, one heatmap per head, and a bar per word.
    """
    S = frame.shape[0]
    H = rows[0][1].shape[0]
    word_w, title = S, 22
    font = ImageFont.load_default(size=13)
    canvas = Image.new("RGB", ((1 + H) * S + word_w, len(rows) * S + title), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    draw.text(
        (4, 4),
        f'"{instruction}"  {note + "  " if note else ""}columns: mean over heads, head 1..{H}, words',
        fill=(0, 0, 0),
        font=font,
    )
    for r, (name, w) in enumerate(rows):
        y = title + r * S
        patches = rearrange(w[:, layout["image"]], "h (gh gw) -> h gh gw", gh=grid)
        for c, p in enumerate([patches.mean(0), *patches]):
            canvas.paste(Image.fromarray(heatmap_on_frame(frame, p)), (c * S, y))
        draw.text((4, y + 4), name, fill=(255, 255, 255), font=font)
        text_w = w.mean(0)[layout["text"]][: len(words)]  # head-mean weight on each word
        x0, bar_h = (1 + H) * S + 4, max(10, min(18, S // max(len(words), 1) - 2))
        for i, (word, v) in enumerate(zip(words, text_w, strict=True)):
            yy = y + 4 + i * (bar_h + 2)
            length = int((word_w - 70) * v / max(text_w.max(), 1e-8))
            draw.rectangle([x0 + 62, yy, x0 + 62 + length, yy + bar_h - 2], fill=(240, 120, 40))
            draw.text((x0, yy), word[:9], fill=(0, 0, 0), font=font)
    return np.asarray(canvas)


def episode_attention_figures(
    policy: VLAPolicy, obs: dict, frames: list[np.ndarray], notes: list[str] | None = None
):
    """Figures for a batch of observations: obs holds image [B,H,W,3], state [B,S] and
    instruction (B strings); frames are the matching rendered frames, notes optional title
    additions. Returns B images."""
    device = next(policy.parameters()).device
    tokens = policy.tokenizer.encode(list(obs[INSTRUCTION])).to(device)
    image = torch.as_tensor(obs[IMAGE], device=device)
    state = torch.as_tensor(obs[STATE], device=device)
    rows, layout = readout_attention(policy, image, state, tokens)
    grid = policy.image_encoder.grid
    figures = []
    for b, frame in enumerate(frames):
        words = [w for w in policy.tokenizer.decode(tokens[b : b + 1])[0].split()]
        per_layer = [(name, w[b].float().cpu().numpy()) for name, w in rows]
        figures.append(
            attention_figure(
                frame,
                per_layer,
                layout,
                words,
                grid,
                obs[INSTRUCTION][b],
                notes[b] if notes else "",
            )
        )
    return figures
