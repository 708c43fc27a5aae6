"""The one call that gives a run its demonstrations: the cached set for its config, collected
and written first when it is missing, incomplete or corrupt."""

from __future__ import annotations

from vla.data.collect import collect
from vla.data.dataset import DatasetError, Demos, dataset_path, load_demos
from vla.envs.config import env_kwargs_of


def ensure_demos(
    env_kwargs: dict,
    root,
    num_episodes: int,
    seed: int,
    noise_std: float,
    num_workers: int = 1,
    progress: bool = True,
) -> Demos:
    """The cached dataset for this config, collected first if missing, incomplete or corrupt."""
    path = dataset_path(root, env_kwargs, num_episodes, seed, noise_std)
    if path.exists():
        try:
            return load_demos(path)
        except DatasetError as e:
            if progress:
                print(f"rebuilding the dataset: {e}")
    path = collect(env_kwargs, root, num_episodes, seed, noise_std, num_workers, progress)
    return load_demos(path)


def demos_of(cfg) -> Demos:
    """The demonstrations a composed config names: its `env` and `data` nodes (collect.py,
    export.py; training goes through the data module, which holds the same values)."""
    return ensure_demos(
        env_kwargs_of(cfg.env),
        cfg.data.dir,
        num_episodes=cfg.data.num_episodes,
        seed=cfg.data.seed,
        noise_std=cfg.data.noise_std,
        num_workers=cfg.data.collect_workers,
    )
