"""Where a VLM looks when it starts an action: the <bos> query's attention, layer by layer.

    one panel per layer: the frame, each keypoint drawn where its map peaks (keypoint 0, the
    one pulled onto what the words name, in yellow), its size and label its share of the
    query's attention (mean over heads); under it the shares of the pooled tokens, the
    state and the three words with the most

The eyes have no patch grid to heat, so the keypoints are the picture: what the query reads
is where they sit and what their glimpses hold. `vla.eval.attention` draws this for a
`VLMPolicy` wherever it draws a readout's attention (visualize.py, TensorBoard rollouts).
"""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image, ImageDraw

from vla.keys import IMAGE, INSTRUCTION, STATE

KEYPOINT_0, OTHERS = (255, 220, 80), (120, 200, 255)
TEXT_H = 46  # three caption lines under each panel


def vlm_attention_figures(policy, obs: dict, frames: list[np.ndarray], notes=None) -> list:
    """Figures for a batch of observations (image [B,H,W,3], state [B,S], instruction: B
    strings) with their rendered frames: one uint8 image [H', W', 3] each."""
    device = next(policy.parameters()).device
    tokens = policy.tokenizer.encode(list(obs[INSTRUCTION])).to(device)  # [B,L]
    image = torch.as_tensor(obs[IMAGE], device=device)
    state = torch.as_tensor(obs[STATE], device=device)
    rows, outputs = policy.bos_attention(image, state, tokens)  # per layer [B,H,P+1]
    xy = (outputs["keypoints_xy"].cpu().numpy() + 1) / 2  # [B,K,2] in arena units
    K, N = xy.shape[1], policy.vision.num_tokens
    figures = []
    for b, frame in enumerate(frames):
        words = policy.tokenizer.decode(tokens[b : b + 1])[0].split()
        panels = []
        for layer, w in enumerate(rows):
            share = w[b].float().mean(0).cpu().numpy()  # [P+1], sums to 1
            panels.append(panel(frame, xy[b], share, K, N, words, f"layer {layer}"))
        title = f'"{obs[INSTRUCTION][b]}"' + (f"  {notes[b]}" if notes else "")
        figures.append(join(panels, title))
    return figures


def panel(frame, xy, share, K: int, N: int, words: list[str], name: str) -> Image.Image:
    """One layer: keypoints on the frame sized by their share, and the other shares below."""
    H, W, _ = frame.shape
    canvas = Image.new("RGB", (W, H + TEXT_H), (0, 0, 0))
    canvas.paste(Image.fromarray(frame), (0, 0))
    draw = ImageDraw.Draw(canvas)
    for k in range(K):
        x, y = xy[k, 0] * W, xy[k, 1] * H
        r = 3 + 40 * float(np.sqrt(share[k]))  # area ~ share
        colour = KEYPOINT_0 if k == 0 else OTHERS
        draw.ellipse([x - r, y - r, x + r, y + r], outline=colour, width=2)
        draw.text((x + r + 2, y - 6), f"{k}: {share[k]:.0%}", fill=colour)
    L = len(words)
    on_words = share[N : N + L]
    top = np.argsort(-on_words)[:3]
    said = ", ".join(f"{words[i]} {on_words[i]:.0%}" for i in top)
    lines = [
        f"{name}: keypoints {share[:K].sum():.0%}, pooled {share[K:N].sum():.0%}",
        f"words {on_words.sum():.0%} ({said})",
        f"state {share[N + L]:.0%}, <bos> {share[-1]:.0%}",
    ]
    for i, line in enumerate(lines):
        draw.text((4, H + 2 + 14 * i), line, fill=(255, 255, 255))
    return canvas


def join(panels: list[Image.Image], title: str) -> np.ndarray:
    """Panels side by side under a title line."""
    W, H = panels[0].size
    out = Image.new("RGB", (W * len(panels), H + 18), (0, 0, 0))
    ImageDraw.Draw(out).text((4, 3), title, fill=(255, 255, 255))
    for i, p in enumerate(panels):
        out.paste(p, (i * W, 18))
    return np.asarray(out)
