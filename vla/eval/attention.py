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


SCALE_W = 64  # the colour-scale column between the heatmaps and the word panel, pixels
TITLE_H = 38  # two caption lines: the instruction and columns, then how to read the colours
MEANING = (
    "brightness: the share of the readout's attention on that patch (0% to the layer's largest, "
    "as on the scale); bars: its share on each word"
)


def heat(frame: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Blends heat onto a uint8 [h,w,3] frame: level [h,w] in 0..1 runs from the frame itself
    (0) to a bright yellow laid over three quarters of it (1)."""
    a = np.clip(level, 0, 1)[..., None].astype(np.float32)  # [h,w,1]
    colour = 255 * np.concatenate([np.ones_like(a), a, np.zeros_like(a)], -1)  # red to yellow
    return (frame * (1 - 0.75 * a) + colour * 0.75 * a).astype(np.uint8)


def heatmap_on_frame(frame: np.ndarray, patch_weights: np.ndarray, vmax: float) -> np.ndarray:
    """Blends a [gh,gw] attention map (upsampled, nearest) onto a uint8 [S,S,3] frame; a weight
    of `vmax` is the brightest colour, so panels drawn with one vmax compare by brightness."""
    S = frame.shape[0]
    level = np.clip(patch_weights / max(vmax, 1e-8), 0, 1)
    big = np.asarray(Image.fromarray((level * 255).astype(np.uint8)).resize((S, S), Image.NEAREST))
    return heat(frame, big.astype(np.float32) / 255.0)


def colour_scale(height: int, vmax: float, font) -> Image.Image:
    """A [height, SCALE_W] column: the heat from 0 (bottom, over black) to vmax (top), labelled
    with both ends as shares of the readout's attention."""
    column = Image.new("RGB", (SCALE_W, height), (255, 255, 255))
    pad, strip_w = 18, 12
    level = np.linspace(1, 0, height - 2 * pad)[:, None].repeat(strip_w, 1)  # top: brightest
    column.paste(Image.fromarray(heat(np.zeros((*level.shape, 3), np.uint8), level)), (4, pad))
    draw = ImageDraw.Draw(column)
    draw.text((4, 2), f"{vmax:.1%}", fill=(0, 0, 0), font=font)
    draw.text((4, height - pad + 2), "0%", fill=(0, 0, 0), font=font)
    return column


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
        uint8 [rows * S + TITLE_H, (1 + heads) * S + SCALE_W + word panel, 3]: per layer, the
        head-mean heatmap and one heatmap per head on one colour scale (0 to the layer's
        largest patch weight, drawn after them), and a bar per word with its weight.
    """
    S = frame.shape[0]
    H = rows[0][1].shape[0]
    word_w = max(S, 192)
    font = ImageFont.load_default(size=13)
    width = (1 + H) * S + SCALE_W + word_w
    canvas = Image.new("RGB", (width, len(rows) * S + TITLE_H), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    columns = f"columns: mean over heads, head 1..{H}, colour scale, words"
    draw.text(
        (4, 3),
        f'"{instruction}"  {note + "  " if note else ""}{columns}',
        fill=(0, 0, 0),
        font=font,
    )
    draw.text((4, 20), MEANING, fill=(0, 0, 0), font=font)
    for r, (name, w) in enumerate(rows):
        y = TITLE_H + r * S
        patches = rearrange(w[:, layout["image"]], "h (gh gw) -> h gh gw", gh=grid)
        panels = [patches.mean(0), *patches]
        vmax = float(max(p.max() for p in panels))
        for c, p in enumerate(panels):
            canvas.paste(Image.fromarray(heatmap_on_frame(frame, p, vmax)), (c * S, y))
        canvas.paste(colour_scale(S, vmax, font), ((1 + H) * S, y))
        draw.text((4, y + 4), name, fill=(255, 255, 255), font=font)
        text_w = w.mean(0)[layout["text"]][: len(words)]  # head-mean weight on each word
        x0, bar_h = (1 + H) * S + SCALE_W + 4, max(10, min(18, S // max(len(words), 1) - 2))
        for i, (word, v) in enumerate(zip(words, text_w, strict=True)):
            yy = y + 4 + i * (bar_h + 2)
            length = int((word_w - 110) * v / max(text_w.max(), 1e-8))
            draw.rectangle([x0 + 62, yy, x0 + 62 + length, yy + bar_h - 2], fill=(240, 120, 40))
            draw.text((x0, yy), word[:9], fill=(0, 0, 0), font=font)
            draw.text((x0 + 66 + length, yy), f"{v:.0%}", fill=(0, 0, 0), font=font)
    return np.asarray(canvas)


def episode_attention_figures(
    policy: VLAPolicy, obs: dict, frames: list[np.ndarray], notes: list[str] | None = None
):
    """Figures for a batch of observations: obs holds image [B,H,W,3], state [B,S] and
    instruction (B strings); frames are the matching rendered frames, notes optional title
    additions. Returns B images."""
    if hasattr(policy, "bos_attention"):  # a VLM: no patch grid, its keypoints are the picture
        from vla.vlm.figure import vlm_attention_figures

        return vlm_attention_figures(policy, obs, frames, notes)
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
