"""Loading a demonstration set, and refusing one that is incomplete or corrupt."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vla.data.collect import ARRAYS, FORMAT_VERSION


class DatasetError(RuntimeError):
    """A dataset folder is missing, incomplete or inconsistent."""


@dataclass
class Demos:
    """A demonstration set. Arrays are memory-mapped unless loaded with `mmap=False`.

    image [N,H,W,3] uint8, state [N,4], action [N,2], episode [N] (episode of each step),
    episode_start [E], target_pair [E], instructions: E strings.
    """

    path: Path
    meta: dict
    image: np.ndarray
    state: np.ndarray
    action: np.ndarray
    episode: np.ndarray
    episode_start: np.ndarray
    target_pair: np.ndarray
    instructions: list[str]

    @property
    def num_steps(self) -> int:
        return len(self.action)

    @property
    def num_episodes(self) -> int:
        return len(self.episode_start)


def load_demos(path, mmap: bool = True) -> Demos:
    """Loads and validates the dataset in `path`; raises DatasetError naming what is wrong."""
    path = Path(path)
    meta_file = path / "meta.json"
    if not meta_file.is_file():
        raise DatasetError(f"{path} is not a complete dataset: meta.json is missing")
    try:
        meta = json.loads(meta_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DatasetError(f"{meta_file} is not valid JSON: {e}") from None
    if meta.get("format_version") != FORMAT_VERSION:
        raise DatasetError(
            f"{path}: format_version={meta.get('format_version')!r}, expected {FORMAT_VERSION}"
        )
    arrays = {}
    for name in ARRAYS:
        file = path / f"{name}.npy"
        expected = meta.get("arrays", {}).get(name)
        try:
            arrays[name] = np.load(file, mmap_mode="r" if mmap else None, allow_pickle=False)
        except (OSError, ValueError, EOFError) as e:
            raise DatasetError(f"{file} cannot be read (truncated or corrupt?): {e}") from None
        if (
            expected is None
            or list(arrays[name].shape) != expected["shape"]
            or str(arrays[name].dtype) != expected["dtype"]
        ):
            raise DatasetError(
                f"{file} has shape {list(arrays[name].shape)} and dtype {arrays[name].dtype}, "
                f"but meta.json says {expected}"
            )
    try:
        instructions = json.loads((path / "instructions.json").read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path / 'instructions.json'} cannot be read: {e}") from None

    n, e = meta.get("num_steps"), meta.get("num_episodes")
    problems = []
    if len(arrays["image"]) != n:
        problems.append(f"{len(arrays['image'])} frames but num_steps={n}")
    if any(len(arrays[k]) != n for k in ("state", "action", "episode")):
        problems.append("per-step arrays have different lengths")
    if len(arrays["episode_start"]) != e or len(arrays["target_pair"]) != e:
        problems.append(f"per-episode arrays do not have num_episodes={e} entries")
    if len(instructions) != e:
        problems.append(f"{len(instructions)} instructions but num_episodes={e}")
    if problems:
        raise DatasetError(f"{path} is inconsistent with its meta.json: " + "; ".join(problems))
    return Demos(path=path, meta=meta, instructions=instructions, **arrays)


def is_valid(path) -> bool:
    try:
        load_demos(path)
    except DatasetError:
        return False
    return True


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
    from vla.data.collect import collect, dataset_path

    path = dataset_path(root, env_kwargs, num_episodes, seed, noise_std)
    if path.exists():
        try:
            return load_demos(path)
        except DatasetError as e:
            if progress:
                print(f"rebuilding the dataset: {e}")
    path = collect(env_kwargs, root, num_episodes, seed, noise_std, num_workers, progress)
    return load_demos(path)
