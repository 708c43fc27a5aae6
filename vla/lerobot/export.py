"""Write a demonstration set as a LeRobotDataset v3.0 folder (`vla.lerobot.layout`).

Each step becomes a frame: `observation.image` (PNG bytes, dtype "image": lerobot's AV1
video refuses frames under 64 px), `observation.state`, `action` (the expert's clean label),
and the episode's instruction as its task. Episodes go into the data files in order, one
parquet row group each, as lerobot's recorder writes them.

The folder is written beside `out` and renamed into place when complete. An existing `out`
is replaced only if this exporter wrote it (it holds `meta/vla_export.json`).
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
from PIL import Image
from tqdm.auto import tqdm

from vla.console import bar_shown
from vla.data.dataset import Demos
from vla.errors import ConfigError
from vla.lerobot import layout, stats
from vla.lerobot.layout import ACTION_KEY, IMAGE_KEY, STATE_KEY

MARKER = "meta/vla_export.json"  # says this exporter wrote the folder: it may replace it
ROBOT_TYPE = "vla_reach"
STATE_NAMES = ["x", "y", "vx", "vy"]
ACTION_NAMES = ["vx", "vy"]


def features_of(demos: Demos) -> dict:
    """info.json's features: ours, then lerobot's bookkeeping."""
    h, w, c = demos.image.shape[1:]
    ours = {
        IMAGE_KEY: {"dtype": "image", "shape": [h, w, c], "names": ["height", "width", "channels"]},
        STATE_KEY: {"dtype": "float32", "shape": [demos.state.shape[1]], "names": STATE_NAMES},
        ACTION_KEY: {"dtype": "float32", "shape": [demos.action.shape[1]], "names": ACTION_NAMES},
    }
    return {**ours, **{k: dict(v) for k, v in layout.DEFAULT_FEATURES.items()}}


def png(image: np.ndarray) -> bytes:
    """One frame [H,W,3] uint8 as PNG bytes (lerobot's compression level for images)."""
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="png", compress_level=6)
    return buffer.getvalue()


def check_out(out) -> None:
    """Refuses a destination that holds anything this exporter did not write."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"out={out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise ConfigError(
            f"out={out} already holds files that this exporter did not write (no {MARKER}): "
            "choose a new folder or remove it"
        )


def export_lerobot(
    demos: Demos,
    out,
    fps: int,
    robot_type: str = ROBOT_TYPE,
    chunks_size: int = layout.CHUNKS_SIZE,
    data_files_size_in_mb: float = layout.DATA_FILES_SIZE_IN_MB,
    progress: bool = True,
) -> Path:
    """Writes `demos` as a LeRobotDataset v3.0 folder `out`; returns it.

    Args:
        fps: frames per second of the recording (the env's `render_fps`).
        chunks_size: data files per chunk folder.
        data_files_size_in_mb: a data file is closed before an episode would take it past this.
    """
    pd, pa, pq = layout.require("pandas", "pyarrow", "pyarrow.parquet")

    out = Path(out)
    check_out(out)
    if chunks_size < 1 or data_files_size_in_mb <= 0:
        raise ConfigError(
            f"chunks_size={chunks_size} must be >= 1 and data_files_size_in_mb="
            f"{data_files_size_in_mb} > 0"
        )
    features = features_of(demos)
    tasks = list(dict.fromkeys(demos.instructions))  # in order of first appearance
    task_of = {t: i for i, t in enumerate(tasks)}
    bounds = np.append(np.asarray(demos.episode_start), demos.num_steps)  # [E+1]
    schema = data_schema(features, pa).with_metadata(layout.hf_schema_metadata(features))

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".tmp-{out.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        (tmp / "meta").mkdir(parents=True)
        files = DataFiles(tmp, schema, chunks_size, data_files_size_in_mb, pq, pa)
        rows, all_stats = [], []
        bar = tqdm(
            total=demos.num_episodes,
            desc="exporting",
            unit="ep",
            disable=not progress or not bar_shown(),
        )
        for e in range(demos.num_episodes):
            start, stop = int(bounds[e]), int(bounds[e + 1])
            n = stop - start
            task_index = task_of[demos.instructions[e]]
            frame_index = np.arange(n, dtype=np.int64)
            columns = {
                IMAGE_KEY: np.asarray(demos.image[start:stop]),
                STATE_KEY: np.asarray(demos.state[start:stop], dtype=np.float32),
                ACTION_KEY: np.asarray(demos.action[start:stop], dtype=np.float32),
                "timestamp": frame_index / fps,
                "frame_index": frame_index,
                "episode_index": np.full(n, e, dtype=np.int64),
                "index": np.arange(start, stop, dtype=np.int64),
                "task_index": np.full(n, task_index, dtype=np.int64),
            }
            episode = stats.episode_stats(columns, features)
            all_stats.append(episode)
            chunk, file = files.write(episode_table(columns, schema, pa), n)
            row = {
                "episode_index": e,
                "tasks": [demos.instructions[e]],
                "length": n,
                "data/chunk_index": chunk,
                "data/file_index": file,
                "dataset_from_index": start,
                "dataset_to_index": stop,
            }
            for key, feature in episode.items():  # lerobot's flattened per-episode stats
                row.update({f"stats/{key}/{s}": v.tolist() for s, v in feature.items()})
            row.update({"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
            rows.append(row)
            bar.update(1)
        files.close()
        bar.close()

        episodes_file = tmp / layout.EPISODES_PATH.format(chunk_index=0, file_index=0)
        episodes_file.parent.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), episodes_file, compression="snappy")
        pd.DataFrame(
            {"task_index": np.arange(len(tasks), dtype=np.int64)},
            index=pd.Index(tasks, name="task"),
        ).to_parquet(tmp / layout.TASKS_PATH)
        info = {
            "codebase_version": layout.CODEBASE_VERSION,
            "fps": int(fps),
            "features": features,
            "total_episodes": demos.num_episodes,
            "total_frames": demos.num_steps,
            "total_tasks": len(tasks),
            "chunks_size": chunks_size,
            "data_files_size_in_mb": data_files_size_in_mb,
            "video_files_size_in_mb": layout.VIDEO_FILES_SIZE_IN_MB,
            "data_path": layout.DATA_PATH,
            "video_path": None,  # no video features
            "robot_type": robot_type,
            "splits": {"train": f"0:{demos.num_episodes}"},
        }
        write_json(tmp / layout.INFO_PATH, info)
        write_json(tmp / layout.STATS_PATH, stats.to_json(stats.aggregate(all_stats)))
        source = {"dataset": str(demos.path), "env": demos.meta.get("env")}
        write_json(tmp / MARKER, source)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def data_schema(features: dict, pa):
    """The data files' Arrow schema, in the order of `features` (what `datasets` writes)."""
    types = {"float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64()}
    fields = []
    for key, ft in features.items():
        if ft["dtype"] == "image":
            fields.append(pa.field(key, pa.struct({"bytes": pa.binary(), "path": pa.string()})))
        elif ft["shape"] == [1]:
            fields.append(pa.field(key, types[ft["dtype"]]))
        else:
            fields.append(pa.field(key, pa.list_(types[ft["dtype"]], ft["shape"][0])))
    return pa.schema(fields)


def episode_table(columns: dict, schema, pa):
    """One episode's frames as a table of `schema`."""
    arrays = []
    for field in schema:
        values = columns[field.name]
        if pa.types.is_struct(field.type):  # an image: PNG bytes, no path
            items = [{"bytes": png(image), "path": None} for image in values]
            arrays.append(pa.array(items, type=field.type))
        elif pa.types.is_fixed_size_list(field.type):
            flat = pa.array(values.reshape(-1), type=field.type.value_type)
            arrays.append(pa.FixedSizeListArray.from_arrays(flat, field.type.list_size))
        else:
            arrays.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


class DataFiles:
    """The data parquet files, filled in order: a file is closed before the next episode
    would take it past the size limit (estimated from its bytes per frame so far, as
    lerobot does), and a chunk folder holds `chunks_size` files."""

    def __init__(self, root: Path, schema, chunks_size: int, size_in_mb: float, pq, pa):
        self.root, self.schema, self.pq, self.pa = root, schema, pq, pa
        self.chunks_size, self.size_in_mb = chunks_size, size_in_mb
        self.chunk, self.file = 0, 0
        self.sink = self.writer = None
        self.frames = 0  # in the open file

    def write(self, table, n: int) -> tuple[int, int]:
        """Appends one episode of `n` frames; returns its (chunk, file)."""
        if self.writer is not None and self.frames > 0:
            size = self.sink.tell() / 1024**2
            if size + size / self.frames * n >= self.size_in_mb:
                self.close()
                self.chunk, self.file = layout.next_file(self.chunk, self.file, self.chunks_size)
        if self.writer is None:
            path = self.root / layout.DATA_PATH.format(chunk_index=self.chunk, file_index=self.file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.sink = self.pa.OSFile(str(path), "wb")
            self.writer = self.pq.ParquetWriter(
                self.sink, self.schema, compression="snappy", use_dictionary=True
            )
            self.frames = 0
        self.writer.write_table(table)
        self.frames += n
        return self.chunk, self.file

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.sink.close()
            self.writer = self.sink = None


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4, ensure_ascii=False))
