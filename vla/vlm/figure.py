"""Where a VLM looks when it starts an action: the <bos> query's attention, layer by layer.

    one panel per layer: the frame, each keypoint drawn where its map peaks (keypoint 0, the
    one pulled onto what the words name, in yellow), its size and label its share of the
    query's attention (mean over heads); under it the shares of the pooled tokens, the
    state and the three words with the most

The eyes have no patch grid to heat, so the keypoints are the picture: what the query reads
is where they sit and what their glimpses hold. `vla.eval.attention` draws this for a
`VLMPolicy` wherever it draws a readout's attention (visualize.py, TensorBoard rollouts), and
the playground (`vla.play`) wherever it draws a query.
"""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image, ImageDraw

from vla.keys import IMAGE, INSTRUCTION, STATE

KEYPOINT_0, OTHERS = (255, 220, 80), (120, 200, 255)
TEXT_H = 46  # three caption lines under each panel


def bos_layout(num_keypoints: int, num_eye_tokens: int, num_words: int) -> dict[str, slice]:
    """Where each group sits among the keys of the <bos> query (`VLMPolicy.bos_attention`):
    the K keypoints and the pooled tokens of the eyes, the L word slots (PAD included, as
    the batch was encoded), the state, <bos> itself."""
    K, N, L = num_keypoints, num_eye_tokens, num_words
    return {
        "keypoints": slice(0, K),
        "pooled": slice(K, N),
        "text": slice(N, N + L),
        "state": slice(N + L, N + L + 1),
        "bos": slice(N + L + 1, N + L + 2),
    }


def bos_attention(policy, image, state, tokens) -> tuple[list, dict[str, slice], torch.Tensor]:
    """The <bos> query's attention per layer [(name, [B,H,T_keys])], the layout of its keys
    and where the keypoints are, xy [B,K,2] in arena units (0..1, as the frame is drawn)."""
    rows, outputs = policy.bos_attention(image, state, tokens)  # per layer [B,H,P+1]
    xy = (outputs["keypoints_xy"] + 1) / 2  # [B,K,2] image coordinates -> arena units
    layout = bos_layout(xy.shape[1], policy.vision.num_tokens, tokens.shape[1])
    return [(f"layer {i}", w) for i, w in enumerate(rows)], layout, xy


def vlm_attention_figures(policy, obs: dict, frames: list[np.ndarray], notes=None) -> list:
    """Figures for a batch of observations (image [B,H,W,3], state [B,S], instruction: B
    strings) with their rendered frames: one uint8 image [H', W', 3] each."""
    device = next(policy.parameters()).device
    tokens = policy.tokenizer.encode(list(obs[INSTRUCTION])).to(device)  # [B,L]
    image = torch.as_tensor(obs[IMAGE], device=device)
    state = torch.as_tensor(obs[STATE], device=device)
    rows, layout, xy = bos_attention(policy, image, state, tokens)
    figures = []
    for b, frame in enumerate(frames):
        words = policy.tokenizer.decode(tokens[b : b + 1])[0].split()
        attention = [(name, w[b].float().cpu().numpy()) for name, w in rows]
        title = f'"{obs[INSTRUCTION][b]}"' + (f"  {notes[b]}" if notes else "")
        figures.append(keypoint_figure(frame, xy[b].cpu().numpy(), attention, layout, words, title))
    return figures


def keypoint_figure(frame, xy, attention, layout, words: list[str], title: str) -> np.ndarray:
    """One panel per layer under a title line: frame uint8 [H,W,3], xy [K,2] arena units,
    attention [(name, [H,T_keys])] of one query, its keys' layout, the words it read."""
    panels = [panel(frame, xy, w.mean(0), layout, words, name) for name, w in attention]
    return join(panels, title)


def keypoints_on_frame(frame: np.ndarray, xy: np.ndarray, share: np.ndarray) -> Image.Image:
    """The frame with keypoint k drawn at xy[k] (arena units), its area ~ share[k]."""
    H, W, _ = frame.shape
    canvas = Image.fromarray(frame)
    draw = ImageDraw.Draw(canvas)
    for k in range(len(xy)):
        x, y = xy[k, 0] * W, xy[k, 1] * H
        r = 3 + 40 * float(np.sqrt(share[k]))  # area ~ share
        colour = KEYPOINT_0 if k == 0 else OTHERS
        draw.ellipse([x - r, y - r, x + r, y + r], outline=colour, width=2)
        draw.text((x + r + 2, y - 6), f"{k}: {share[k]:.0%}", fill=colour)
    return canvas


def panel(frame, xy, share, layout: dict[str, slice], words: list[str], name: str) -> Image.Image:
    """One layer: keypoints on the frame sized by their share [T_keys], the other shares below."""
    H, W, _ = frame.shape
    canvas = Image.new("RGB", (W, H + TEXT_H), (0, 0, 0))
    canvas.paste(keypoints_on_frame(frame, xy, share[layout["keypoints"]]), (0, 0))
    on_words = share[layout["text"]][: len(words)]  # the words read; PAD slots get nothing
    top = np.argsort(-on_words)[:3]
    said = ", ".join(f"{words[i]} {on_words[i]:.0%}" for i in top)
    lines = [
        f"{name}: keypoints {share[layout['keypoints']].sum():.0%}, "
        f"pooled {share[layout['pooled']].sum():.0%}",
        f"words {on_words.sum():.0%} ({said})",
        f"state {share[layout['state']].sum():.0%}, <bos> {share[layout['bos']].sum():.0%}",
    ]
    draw = ImageDraw.Draw(canvas)
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
