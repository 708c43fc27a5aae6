"""The same checkpoint answers and acts: ask a trained VLM (or RT-2 policy) a question about
a scene of its env, next to the instruction the scene was drawn with.

    python -m vla.vlm.ask ckpt_path=<run or .ckpt> question="which shape is nearest the red circle" [seed=1000000000] [num_scenes=3]

Values come as `key=value` (OmegaConf's command line); each scene is the env's reset with
seed, seed+1, ... (test seeds by default), and the answer is greedy, as in evaluation.
"""

from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import OmegaConf

from vla.checkpoint import policy_from_checkpoint, read_checkpoint
from vla.data.seeds import TEST_SEED_START
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.keys import IMAGE, INSTRUCTION


def ask(ckpt_path, question: str, seed: int = TEST_SEED_START, num_scenes: int = 1) -> list:
    """[(instruction of the scene, answer)] for `num_scenes` scenes of the checkpoint's env
    (the default env for a stage-1 VLM, which has none)."""
    path = Path(ckpt_path)
    path = path / "checkpoints" / "last.ckpt" if path.is_dir() else path
    ckpt = read_checkpoint(path)
    policy = policy_from_checkpoint(ckpt, path)
    if not hasattr(policy, "answer"):
        raise ConfigError(f"ckpt_path={ckpt_path} is not a VLM (model=vlm_small): it cannot answer")
    env = ReachEnv(**(ckpt["vla"]["env_config"] or {}))
    out = []
    for i in range(num_scenes):
        obs, _ = env.reset(seed=seed + i)
        image = torch.from_numpy(obs[IMAGE])[None]  # [1,H,W,3]
        out.append((obs[INSTRUCTION], policy.answer(image, [question])[0]))
    return out


if __name__ == "__main__":
    args = OmegaConf.from_cli()
    if "ckpt_path" not in args or "question" not in args:
        raise SystemExit('usage: python -m vla.vlm.ask ckpt_path=<run> question="..."')
    rows = ask(
        args.ckpt_path,
        str(args.question),
        args.get("seed", TEST_SEED_START),
        args.get("num_scenes", 1),
    )
    for instruction, answer in rows:
        print(f"scene instructed {instruction!r}: {args.question}? -> {answer}")
