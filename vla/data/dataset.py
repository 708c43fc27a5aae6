"""The demonstration-set format on disk: its layout, version and cache key, written atomically
and loaded with every file checked against its meta.json.

A dataset is a folder `<root>/reach-<key>/` whose name is a hash of everything that decides
its contents (env config, episode count, seeds, expert noise, format version), so a changed
config gets a new dataset and an unchanged one reuses the cache. It is written into a
temporary folder that is renamed into place only when complete: an interrupted write never
leaves anything that loads, and a complete copy another process wrote first is kept (only a
corrupt one is replaced), so a reader never loses the folder it is reading and two runs
collecting the same set at once both end with one complete copy.

Layout (one memory-mappable `.npy` per field; N steps, E episodes):
    image.npy           uint8   [N,H,W,3]
    state.npy           float32 [N,4]
    action.npy          float32 [N,2]     the clean expert action (the label)
    episode.npy         int32   [N]       episode index of each step
    episode_start.npy   int64   [E]       first step of each episode
    target_pair.npy     int32   [N]       the pair (index into PAIRS) of the shape to reach at
                                          each step (a sequence moves on from one to the next)
    target_position.npy float32 [N,2]     where that shape is (arena units); privileged, for
                                          optional auxiliary losses only
    object_centres.npy  float32 [N,M,2]   where every shape in the scene is (M shapes, arena
                                          units); privileged, likewise
    object_pairs.npy    int32 [N,M]       what every shape is (index into grammar.PAIRS);
                                          privileged, likewise
    instructions.json   [E] strings
    meta.json           counts, expert success rate, env config, seeds, format version, shapes
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vla.envs.config import episode_values
from vla.errors import DatasetError

FORMAT_VERSION = 4
ARRAYS = (
    "image", "state", "action", "episode", "episode_start", "target_pair", "target_position",
    "object_centres", "object_pairs",
)  # fmt: skip


@dataclass
class Demos:
    """A demonstration set. Arrays are memory-mapped unless loaded with `mmap=False`.

    image [N,H,W,3] uint8, state [N,4], action [N,2], episode [N] (episode of each step),
    episode_start [E], target_pair [N], target_position [N,2], object_centres [N,M,2],
    object_pairs [N,M], instructions: E strings.
    """

    path: Path
    meta: dict
    image: np.ndarray
    state: np.ndarray
    action: np.ndarray
    episode: np.ndarray
    episode_start: np.ndarray
    target_pair: np.ndarray
    target_position: np.ndarray
    object_centres: np.ndarray
    object_pairs: np.ndarray
    instructions: list[str]

    @property
    def num_steps(self) -> int:
        return len(self.action)

    @property
    def num_episodes(self) -> int:
        return len(self.episode_start)


def dataset_key(env_kwargs: dict, num_episodes: int, seed: int, noise_std: float) -> str:
    """Hash of everything that decides a dataset's contents (`episode_values` of the env)."""
    env = episode_values(env_kwargs)
    spec = dict(
        format=FORMAT_VERSION, env=env, num_episodes=num_episodes, seed=seed, noise=noise_std
    )
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def dataset_path(root, env_kwargs: dict, num_episodes: int, seed: int, noise_std: float) -> Path:
    """The cache folder of the dataset this config describes."""
    return Path(root) / f"reach-{dataset_key(env_kwargs, num_episodes, seed, noise_std)}"


def write_demos(final: Path, arrays: dict, instructions: list[str], meta: dict) -> None:
    """Writes a dataset into `final` atomically; `meta` gains the format version and shapes."""
    if set(arrays) != set(ARRAYS):
        raise ValueError(f"arrays {sorted(arrays)} must be exactly {sorted(ARRAYS)}")
    meta = dict(
        meta,
        format_version=FORMAT_VERSION,
        key=final.name,
        arrays={k: dict(shape=list(v.shape), dtype=str(v.dtype)) for k, v in arrays.items()},
    )
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        for name, array in arrays.items():
            np.save(tmp / f"{name}.npy", array)
        (tmp / "instructions.json").write_text(json.dumps(instructions))
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))  # last: marks completeness
        for _ in range(3):  # another writer may come and go between the check and the rename
            if final.exists():
                if _loads(final):  # another process finished first: the same key, the same
                    return  # contents; keep its copy, which someone may be reading
                stale = final.parent / f".stale-{final.name}-{os.getpid()}"  # a corrupt copy
                with contextlib.suppress(FileNotFoundError):
                    os.replace(final, stale)
                shutil.rmtree(stale, ignore_errors=True)
            try:
                os.replace(tmp, final)  # a folder is renamed only onto a missing or empty one
                return
            except OSError as e:
                if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
        raise DatasetError(f"{final} keeps changing while written: is another process damaging it?")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _loads(path: Path) -> bool:
    try:
        load_demos(path)
        return True
    except DatasetError:
        return False


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
    per_step = (
        "state",
        "action",
        "episode",
        "target_pair",
        "target_position",
        "object_centres",
        "object_pairs",
    )
    if any(len(arrays[k]) != n for k in per_step):
        problems.append("per-step arrays have different lengths")
    if len(arrays["episode_start"]) != e:
        problems.append(f"episode_start does not have num_episodes={e} entries")
    if len(instructions) != e:
        problems.append(f"{len(instructions)} instructions but num_episodes={e}")
    if problems:
        raise DatasetError(f"{path} is inconsistent with its meta.json: " + "; ".join(problems))
    return Demos(path=path, meta=meta, instructions=instructions, **arrays)


def check_labels(demos: Demos) -> None:
    """Refuses non-finite action labels: the discrete head would bin a NaN silently and the
    continuous head would turn it into a NaN loss."""
    bad = ~np.isfinite(np.asarray(demos.action)).all(axis=1)  # [N]
    if bad.any():
        steps = np.flatnonzero(bad)
        raise DatasetError(
            f"{demos.path / 'action.npy'} has {len(steps)} non-finite action labels (NaN/inf), "
            f"first at step {int(steps[0])}: {np.asarray(demos.action)[steps[0]].tolist()}; "
            "delete the folder to collect it again"
        )
