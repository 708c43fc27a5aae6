"""Roll out the scripted expert and write a demonstration set (the format and its cache key
are `vla.data.dataset`'s)."""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from vla.console import bar_shown
from vla.data.dataset import dataset_path, write_demos
from vla.data.seeds import check_seeds
from vla.envs.expert import ScriptedExpert
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.keys import IMAGE, INSTRUCTION, STATE


def rollout_episodes(env_kwargs: dict, seeds: list[int], noise_std: float) -> dict:
    """Runs one expert episode per seed. Returns per-step arrays and per-episode lists."""
    env = ReachEnv(**env_kwargs)
    expert = ScriptedExpert(noise_std=noise_std)
    images, states, actions, lengths, pairs, texts, successes = [], [], [], [], [], [], []
    targets, objects, object_pairs = [], [], []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        texts.append(obs[INSTRUCTION])
        rng = np.random.default_rng([seed, 1])  # the expert's noise, also fixed by the seed
        steps = 0
        while True:
            executed, label = expert.act(env, rng)
            images.append(obs[IMAGE])
            states.append(obs[STATE])
            actions.append(label)
            targets.append(env.target_position.astype(np.float32))  # the shape to reach now
            objects.append(env.object_centres.astype(np.float32))  # every shape [M,2]
            object_pairs.append(env.object_pairs.astype(np.int32))  # what each is [M]
            pairs.append(info["target_pair"])
            obs, _, terminated, truncated, info = env.step(executed)
            steps += 1
            if terminated or truncated:
                break
        lengths.append(steps)
        successes.append(info["is_success"])
    return dict(
        image=np.stack(images),
        state=np.stack(states),
        action=np.stack(actions),
        lengths=lengths,
        pairs=pairs,
        targets=targets,
        objects=objects,
        object_pairs=object_pairs,
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
        raise ConfigError(f"data.num_episodes={num_episodes} must be >= 1")
    if num_workers < 1:
        raise ConfigError(f"data.collect_workers={num_workers} must be >= 1")
    check_seeds("demonstration", seed, num_episodes, "data.seed")
    seeds = list(range(seed, seed + num_episodes))
    ReachEnv(**env_kwargs)  # validate the config before any work
    final = dataset_path(root, env_kwargs, num_episodes, seed, noise_std)

    start = time.perf_counter()
    chunk = max(1, min(250, num_episodes // (4 * num_workers) or 1))
    chunks = [seeds[i : i + chunk] for i in range(0, num_episodes, chunk)]
    bar = tqdm(
        total=num_episodes,
        desc="collecting demos",
        unit="ep",
        disable=not progress or not bar_shown(),
    )
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
        "target_position": np.stack([t for p in parts for t in p["targets"]]),
        "object_centres": np.stack([o for p in parts for o in p["objects"]]),
        "object_pairs": np.stack([o for p in parts for o in p["object_pairs"]]),
    }
    instructions = [t for p in parts for t in p["instructions"]]
    success_rate = float(np.mean([s for p in parts for s in p["successes"]]))
    meta = dict(
        num_episodes=num_episodes,
        num_steps=int(lengths.sum()),
        success_rate=success_rate,
        mean_episode_length=float(lengths.mean()),
        env=env_kwargs,
        seeds=dict(start=seed, stop=seed + num_episodes),
        expert=dict(noise_std=noise_std),
        collect_seconds=seconds,
        episodes_per_s=num_episodes / seconds,
    )
    write_demos(final, arrays, instructions, meta)
    if progress:
        print(
            f"collected {num_episodes} episodes ({meta['num_steps']} steps) in {seconds:.1f}s "
            f"({num_episodes / seconds:.0f} episodes/s), expert success {success_rate:.1%} "
            f"-> {final}"
        )
    return final
