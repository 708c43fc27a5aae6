"""The same checkpoint answers and acts: `scripts/eval.py ckpt_path=<run> eval.question=...`
asks a VLM (stage 1) or RT-2 policy (stage 2) a question about scenes of its env.

    python scripts/eval.py ckpt_path=<run> eval.question="what is the shape nearest the red circle"

Scene i is the env's reset with seed eval.seed + i (test seeds), so the scenes are the ones
the same command without the question would roll out in; each answer is greedy, as in
validation. The first eval.record scenes are saved as PNGs with the question and answer.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw

from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.keys import IMAGE, INSTRUCTION

log = logging.getLogger(__name__)
SHOWN = 10  # answers printed; every one is in metrics.json


def ask_scenes(policy, env_kwargs: dict, question: str, num_scenes: int, seed: int,
               record: int, out_dir: Path) -> dict:  # fmt: skip
    """metrics.json's dict for `question` asked about `num_scenes` scenes of the env."""
    if not hasattr(policy, "answer"):
        raise ConfigError(
            "eval.question needs a VLM (experiment=vlm or experiment=rt2): this policy "
            "predicts actions only"
        )
    unknown = sorted({w for w in question.split() if w not in policy.tokenizer.word_to_id})
    if unknown:
        log.info(f"eval.question: words outside the VLM's vocabulary, read as <unk>: {unknown}")
    env = ReachEnv(**{**env_kwargs, "render_mode": "rgb_array"})
    rows = []
    for i in range(num_scenes):
        obs, _ = env.reset(seed=seed + i)
        answer = policy.answer(torch.from_numpy(obs[IMAGE])[None], [question])[0]
        rows.append(dict(seed=seed + i, instruction=obs[INSTRUCTION], answer=answer))
        if i < SHOWN:
            log.info(f"scene {seed + i} (instructed {obs[INSTRUCTION]!r}): {question}? -> {answer}")
        if i < record:
            point = policy.tokenizer.point_of(answer)
            picture(env.render(), question, answer, point).save(out_dir / f"answer_{i:02d}.png")
    counts = {a: sum(r["answer"] == a for r in rows) for a in {r["answer"] for r in rows}}
    common = sorted(counts.items(), key=lambda kv: -kv[1])[:5]
    log.info(f"{num_scenes} scenes; the most common answers: {common}")
    metrics = dict(question=question, num_scenes=num_scenes, seed=seed, answers=rows)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    log.info(f"metrics.json and {min(record, num_scenes)} PNGs written to {out_dir}")
    return metrics


def picture(frame: np.ndarray, question: str, answer: str, point=None) -> Image.Image:
    """The scene's frame under a bar with the question and the answer; a point answer (x, y
    in arena units) is drawn as a ring where it says."""
    H, W, _ = frame.shape
    bar = max(16, H // 12)
    canvas = Image.new("RGB", (W, H + 2 * bar), (0, 0, 0))
    canvas.paste(Image.fromarray(frame), (0, 2 * bar))
    draw = ImageDraw.Draw(canvas)
    if point is not None:
        x, y, r = point[0] * W, 2 * bar + point[1] * H, max(4, W // 40)
        draw.ellipse([x - r, y - r, x + r, y + r], outline=(255, 220, 80), width=2)
    draw.text((4, 2), f"{question}?", fill=(255, 255, 255))
    draw.text((4, bar + 2), answer, fill=(255, 220, 80))
    return canvas
