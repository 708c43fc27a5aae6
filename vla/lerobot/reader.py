"""Read a LeRobotDataset v3.0 folder (`vla.lerobot.layout`) back into arrays.

Frames come in `index` order, whatever data file holds them; image features are decoded
from their PNG/JPEG bytes into [N,H,W,C] uint8, video features from their mp4 files
(`vla.lerobot.video`) likewise.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from vla.errors import DatasetError
from vla.lerobot import layout
from vla.lerobot.video import video_frames


@dataclass
class LeRobotData:
    """A LeRobotDataset in memory.

    info: meta/info.json. stats: meta/stats.json. tasks: the task strings by task_index.
    episodes: the episodes table's columns (episode_index, tasks, length, data/chunk_index,
        data/file_index, dataset_from_index, dataset_to_index, ...; stats excluded).
    frames: one array per frame column and video feature: images [N,H,W,C] uint8, vectors [N,D],
        the bookkeeping (timestamp, frame_index, episode_index, index, task_index) [N].
    """

    path: Path
    info: dict
    stats: dict
    tasks: list[str]
    episodes: dict[str, list]
    frames: dict[str, np.ndarray]

    @property
    def num_frames(self) -> int:
        return len(self.frames["index"])

    def episode_tasks(self) -> list[str]:
        """The task of each episode's first frame, by episode."""
        starts = np.asarray(self.episodes["dataset_from_index"])
        return [self.tasks[i] for i in self.frames["task_index"][starts]]


def read_info(path: Path) -> dict:
    file = path / layout.INFO_PATH
    if not file.is_file():
        raise DatasetError(f"{path} is not a LeRobotDataset: {layout.INFO_PATH} is missing")
    try:
        info = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DatasetError(f"{file} is not valid JSON: {e}") from None
    version = info.get("codebase_version")
    if version != layout.CODEBASE_VERSION:
        raise DatasetError(
            f"{path} has codebase_version={version!r}; only {layout.CODEBASE_VERSION!r} is read "
            "(lerobot converts older datasets with lerobot.scripts.convert_dataset_v21_to_v30)"
        )
    return info


def read_lerobot(path) -> LeRobotData:
    """Loads the LeRobotDataset folder `path`; raises DatasetError naming what is wrong."""
    pd, pa, pq = layout.require("pandas", "pyarrow", "pyarrow.parquet")

    path = Path(path)
    if not path.is_dir():
        raise DatasetError(f"{path} does not exist or is not a folder")
    info = read_info(path)
    features = info["features"]

    files = sorted((path / layout.DATA_DIR).glob("*/*.parquet"))
    if not files:
        raise DatasetError(f"{path} holds no data files ({layout.DATA_DIR}/*/*.parquet)")
    table = pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")
    order = np.argsort(table.column("index").to_numpy(), kind="stable")
    table = table.take(order)
    frames = {name: column(table.column(name), features.get(name)) for name in table.column_names}

    tasks_table = pd.read_parquet(path / layout.TASKS_PATH)
    tasks = [""] * len(tasks_table)
    for task, task_index in zip(tasks_table.index, tasks_table["task_index"], strict=True):
        tasks[int(task_index)] = str(task)

    episode_files = sorted((path / layout.EPISODES_DIR).glob("*/*.parquet"))
    episodes_table = pa.concat_tables([pq.read_table(f) for f in episode_files])
    episodes_table = episodes_table.take(
        np.argsort(episodes_table.column("episode_index").to_numpy(), kind="stable")
    )
    episodes = {
        name: episodes_table.column(name).to_pylist()
        for name in episodes_table.column_names
        if not name.startswith("stats/")
    }
    for key in (k for k, ft in features.items() if ft["dtype"] == "video"):
        frames[key] = video_frames(path, info, key, episodes, frames)
    stats_file = path / layout.STATS_PATH
    stats = json.loads(stats_file.read_text()) if stats_file.is_file() else {}
    return LeRobotData(path, info, stats, tasks, episodes, frames)


def column(chunked, feature: dict | None) -> np.ndarray:
    """One parquet column as an array: images decoded [N,H,W,C], vectors [N,D], scalars [N]."""
    if feature is not None and feature["dtype"] == "image":
        return np.stack([decode(item["bytes"]) for item in chunked.to_pylist()])
    array = chunked.combine_chunks()
    if hasattr(array.type, "list_size"):  # a fixed-size vector per frame
        return array.flatten().to_numpy().reshape(len(array), array.type.list_size)
    if hasattr(array.type, "value_type"):  # a variable-length list of equal-length vectors
        return np.stack(array.to_numpy(zero_copy_only=False))
    return array.to_numpy(zero_copy_only=False)


def decode(data: bytes) -> np.ndarray:
    """An encoded image (PNG, JPEG) as [H,W,C] uint8 RGB."""
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
