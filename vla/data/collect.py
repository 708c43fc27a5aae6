"""Roll out the scripted expert and write a demonstration set to disk.

A dataset is a folder `<root>/reach-<key>/` whose name is a hash of everything that decides
its contents (env config, episode count, seeds, expert noise, format version), so a changed
config gets a new dataset and an unchanged one reuses the cache. It is written into a
temporary folder that is renamed into place only when complete: an interrupted collection
never leaves anything that loads.

Layout (one memory-mappable `.npy` per field; N steps, E episodes):
    image.npy           uint8   [N,H,W,3]
    state.npy           float32 [N,4]
    action.npy          float32 [N,2]     the clean expert action (the label)
    episode.npy         int32   [N]       episode index of each step
    episode_start.npy   int64   [E]       first step of each episode
    target_pair.npy     int32   [E]       instructed (colour, shape) pair, index into PAIRS
    instructions.json   [E] strings
    meta.json           counts, expert success rate, env config, seeds, format version, shapes
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from vla.data.seeds import check_train_seeds
from vla.envs.expert import ScriptedExpert
from vla.envs.reach import ReachEnv

FORMAT_VERSION = 1
ARRAYS = ("image", "state", "action", "episode", "episode_start", "target_pair")


def env_kwargs_of(env_cfg) -> dict:
    """Plain ReachEnv keyword arguments from an env config (drops Hydra's `_target_`)."""
    kwargs = {k: v for k, v in dict(env_cfg).items() if not k.startswith("_")}
    if kwargs.get("instructed_pairs") is not None:
        kwargs["instructed_pairs"] = [int(p) for p in kwargs["instructed_pairs"]]
    return kwargs


def dataset_key(env_kwargs: dict, num_episodes: int, seed: int, noise_std: float) -> str:
    """Hash of everything that decides a dataset's contents. render_* only affects people."""
    env = {k: v for k, v in sorted(env_kwargs.items()) if not k.startswith("render")}
    spec = dict(
        format=FORMAT_VERSION, env=env, num_episodes=num_episodes, seed=seed, noise=noise_std
    )
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def dataset_path(root, env_kwargs: dict, num_episodes: int, seed: int, noise_std: float) -> Path:
    return Path(root) / f"reach-{dataset_key(env_kwargs, num_episodes, seed, noise_std)}"


def rollout_episodes(env_kwargs: dict, seeds: list[int], noise_std: float) -> dict:
    """Runs one expert episode per seed. Returns per-step arrays and per-episode lists."""
    env = ReachEnv(**env_kwargs)
    expert = ScriptedExpert(noise_std=noise_std)
    images, states, actions, lengths, pairs, texts, successes = [], [], [], [], [], [], []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        texts.append(obs["instruction"])
        rng = np.random.default_rng([seed, 1])  # the expert's noise, also fixed by the seed
        steps = 0
        while True:
            executed, label = expert.act(env, rng)
            images.append(obs["image"])
            states.append(obs["state"])
            actions.append(label)
            obs, _, terminated, truncated, info = env.step(executed)
            steps += 1
            if terminated or truncated:
                break
        lengths.append(steps)
        pairs.append(info["target_pair"])
        successes.append(info["is_success"])
    return dict(
        image=np.stack(images),
        state=np.stack(states),
        action=np.stack(actions),
        lengths=lengths,
        pairs=pairs,
        instructions=texts,
        successes=successes,
    )


def collect(
    env_kwargs: dict,
    root,
    num_episodes: int,
    seed: int = 0,
    noise_std: float = 0.3,
    num_workers: int = 1,
    progress: bool = True,
) -> Path:
    """Collects `num_episodes` expert episodes with seeds `seed, seed+1, ...` into `root`.

    Returns the dataset folder. Results are identical for any `num_workers`.
    """
    if num_episodes < 1:
        raise ValueError(f"data.num_episodes={num_episodes} must be >= 1")
    if num_workers < 1:
        raise ValueError(f"data.num_workers={num_workers} must be >= 1")
    seeds = list(range(seed, seed + num_episodes))
    check_train_seeds(seeds[0], seeds[-1])
    ReachEnv(**env_kwargs)  # validate the config before any work
    final = dataset_path(root, env_kwargs, num_episodes, seed, noise_std)

    start = time.perf_counter()
    chunk = max(1, min(250, num_episodes // (4 * num_workers) or 1))
    chunks = [seeds[i : i + chunk] for i in range(0, num_episodes, chunk)]
    bar = tqdm(total=num_episodes, desc="collecting demos", unit="ep", disable=not progress)
    parts = []
    if num_workers == 1:
        for c in chunks:
            parts.append(rollout_episodes(env_kwargs, c, noise_std))
            bar.update(len(c))
    else:
        with ProcessPoolExecutor(num_workers) as pool:
            futures = [pool.submit(rollout_episodes, env_kwargs, c, noise_std) for c in chunks]
            for f in futures:  # in submission order, so the result matches the serial path
                parts.append(f.result())
                bar.update(len(parts[-1]["lengths"]))
    bar.close()
    seconds = time.perf_counter() - start

    lengths = np.array([n for p in parts for n in p["lengths"]], dtype=np.int64)
    arrays = {
        "image": np.concatenate([p["image"] for p in parts]),
        "state": np.concatenate([p["state"] for p in parts]),
        "action": np.concatenate([p["action"] for p in parts]),
        "episode": np.repeat(np.arange(num_episodes, dtype=np.int32), lengths),
        "episode_start": np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64),
        "target_pair": np.array([q for p in parts for q in p["pairs"]], dtype=np.int32),
    }
    instructions = [t for p in parts for t in p["instructions"]]
    success_rate = float(np.mean([s for p in parts for s in p["successes"]]))
    meta = dict(
        format_version=FORMAT_VERSION,
        key=final.name,
        num_episodes=num_episodes,
        num_steps=int(lengths.sum()),
        success_rate=success_rate,
        mean_episode_length=float(lengths.mean()),
        env=env_kwargs,
        seeds=dict(start=seed, stop=seed + num_episodes),
        expert=dict(noise_std=noise_std),
        collect_seconds=seconds,
        episodes_per_s=num_episodes / seconds,
        arrays={k: dict(shape=list(v.shape), dtype=str(v.dtype)) for k, v in arrays.items()},
    )
    _write_atomically(final, arrays, instructions, meta)
    if progress:
        print(
            f"collected {num_episodes} episodes ({meta['num_steps']} steps) in {seconds:.1f}s "
            f"({num_episodes / seconds:.0f} episodes/s), expert success {success_rate:.1%} "
            f"-> {final}"
        )
    return final


def _write_atomically(final: Path, arrays: dict, instructions: list[str], meta: dict) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        for name, array in arrays.items():
            np.save(tmp / f"{name}.npy", array)
        (tmp / "instructions.json").write_text(json.dumps(instructions))
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))  # last: marks completeness
        if final.exists():  # a stale or corrupt copy under the same key: replace it
            stale = final.parent / f".stale-{final.name}-{os.getpid()}"
            os.replace(final, stale)
            shutil.rmtree(stale, ignore_errors=True)
        os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
