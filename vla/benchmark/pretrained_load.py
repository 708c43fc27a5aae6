"""What a pretrained folder costs and saves against the run's `last.ckpt`, measured side by side:

    python -m vla.benchmark.pretrained_load <run folder> [repeats]

Prints, for the run's `pretrained_model/` (written from last.ckpt first, before any timing,
for a run trained before runs wrote one):
  - sizes: last.ckpt (weights, optimiser state, loop and callback state) against the folder
    and its model.safetensors alone;
  - load time in one process, after a warm-up round: `load_policy(last.ckpt)` against
    `VLAPolicy.from_pretrained(folder)`, median of `repeats` alternating rounds;
  - load time from a fresh interpreter (imports included, what a user's first call costs),
    median of `repeats` alternating subprocesses;
  - whether both give bit-equal chunks on a batch of the env's first observations.
The same actions on whole episodes is `scripts/eval.py ckpt_path=<run>/checkpoints/last.ckpt
compare_to=<run>/pretrained_model eval.num_episodes=200` (every episode paired).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

COLD = {
    "last.ckpt": "from vla.checkpoint import load_policy; load_policy({path!r})",
    "folder": "from vla.models.policy import VLAPolicy; VLAPolicy.from_pretrained({path!r})",
}


def cold_seconds(kind: str, path: Path) -> float:
    """Seconds a fresh interpreter takes to import and load (interpreter start excluded)."""
    code = f"import time; t = time.perf_counter(); {COLD[kind].format(path=str(path))}; "
    code += "print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def first_observations(env_config: dict, n: int = 64) -> dict:
    """The first observation of `n` episodes of the policy's env, as one batch."""
    env = gym.make("vla/Reach-v0", **env_config)
    obs = [env.reset(seed=seed)[0] for seed in range(n)]
    batch = {k: np.stack([o[k] for o in obs]) for k in ("image", "state")}
    return batch | {"instruction": [o["instruction"] for o in obs]}


def same_chunks(a, b, env_config: dict) -> bool:
    from vla.eval.observation import prepare_observation

    image, state, tokens, _ = prepare_observation(
        first_observations(env_config), a.tokenizer, torch.device("cpu")
    )
    a.reset(), b.reset()
    return torch.equal(
        a.predict_chunk_tensors(image, state, tokens), b.predict_chunk_tensors(image, state, tokens)
    )


def main(argv: list[str]) -> None:
    from vla.checkpoint import load_policy
    from vla.models.policy import VLAPolicy

    run, repeats = Path(argv[0]), int(argv[1]) if len(argv) > 1 else 5
    ckpt, folder = run / "checkpoints" / "last.ckpt", run / "pretrained_model"
    if not (folder / "config.json").is_file():
        print(f"{folder} missing: writing it from {ckpt}")
        load_policy(ckpt)[0].save_pretrained(folder)
    size = {"last.ckpt": ckpt.stat().st_size}
    size["folder"] = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    size["model.safetensors"] = (folder / "model.safetensors").stat().st_size
    for name, n in size.items():
        print(f"{name:<18} {n / 2**20:8.2f} MiB  ({n / size['last.ckpt']:.0%} of last.ckpt)")

    loads = {
        "last.ckpt": lambda: load_policy(ckpt),
        "folder": lambda: VLAPolicy.from_pretrained(folder),
    }
    for load in loads.values():  # warm-up: imports, first allocations
        load()
    warm = {name: [] for name in loads}
    cold = {name: [] for name in loads}
    for _ in range(repeats):
        for name, load in loads.items():
            start = time.perf_counter()
            load()
            warm[name].append(time.perf_counter() - start)
            cold[name].append(cold_seconds(name, ckpt if name == "last.ckpt" else folder))
    for label, times in (("in process", warm), ("fresh interpreter", cold)):
        for name, t in times.items():
            print(
                f"load {label:<17} {name:<10} median {statistics.median(t) * 1e3:8.1f} ms "
                f"({', '.join(f'{x * 1e3:.1f}' for x in t)})"
            )
    policy, env_config = load_policy(ckpt)
    equal = same_chunks(policy, VLAPolicy.from_pretrained(folder), env_config)
    print(f"bit-equal chunks on 64 observations: {equal}")


if __name__ == "__main__":
    main(sys.argv[1:])
