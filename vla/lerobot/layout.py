"""The LeRobotDataset v3.0 layout, as lerobot (0.6.1) writes it, for the writer and the reader.

    meta/info.json                          version, fps, features, totals, path templates
    meta/stats.json                         per feature: min max mean std count q01..q99
    meta/tasks.parquet                      index: the task string; column task_index
    meta/episodes/chunk-000/file-000.parquet   one row per episode (frame range, tasks, stats)
    data/chunk-000/file-000.parquet         one row per frame: the features + bookkeeping

A data file holds whole episodes and is closed once the next episode would take it past
`data_files_size_in_mb`; a chunk folder holds `chunks_size` files.
"""

from __future__ import annotations

import importlib
import json

from vla.errors import ConfigError

CODEBASE_VERSION = "v3.0"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
EPISODES_DIR = "meta/episodes"
DATA_DIR = "data"
CHUNK_FILE_PATTERN = "chunk-{chunk_index:03d}/file-{file_index:03d}"
EPISODES_PATH = EPISODES_DIR + "/" + CHUNK_FILE_PATTERN + ".parquet"
DATA_PATH = DATA_DIR + "/" + CHUNK_FILE_PATTERN + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE_PATTERN + ".mp4"
# ours, beside lerobot's files (lerobot ignores it): this exporter wrote the folder, from a
# demonstration set of our task, whose env config it records
EXPORT_MARKER = "meta/vla_export.json"
CHUNKS_SIZE = 1000  # files per chunk folder
DATA_FILES_SIZE_IN_MB = 100
VIDEO_FILES_SIZE_IN_MB = 200

# lerobot's names for what our demonstrations hold
IMAGE_KEY = "observation.image"
STATE_KEY = "observation.state"
ACTION_KEY = "action"
# every frame's bookkeeping, appended after the dataset's own features
DEFAULT_FEATURES = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
VISUAL = ("image", "video")


def next_file(chunk_index: int, file_index: int, chunks_size: int) -> tuple[int, int]:
    """The (chunk, file) after this one: a new chunk folder every `chunks_size` files."""
    if file_index == chunks_size - 1:
        return chunk_index + 1, 0
    return chunk_index, file_index + 1


def hf_features(features: dict) -> dict:
    """The Hugging Face `datasets` feature types of the parquet columns (video excluded), as
    `datasets` stores them in a parquet file's `huggingface` schema metadata."""
    out = {}
    for key, ft in features.items():
        if ft["dtype"] == "video":
            continue
        if ft["dtype"] == "image":
            out[key] = {"_type": "Image"}
        elif list(ft["shape"]) == [1]:
            out[key] = {"dtype": ft["dtype"], "_type": "Value"}
        elif len(ft["shape"]) == 1:
            value = {"dtype": ft["dtype"], "_type": "Value"}
            out[key] = {"feature": value, "length": ft["shape"][0], "_type": "Sequence"}
        else:
            raise ValueError(f"feature {key} has shape {ft['shape']}: only vectors are written")
    return out


def hf_schema_metadata(features: dict) -> dict[bytes, bytes]:
    """The schema metadata `datasets` reads its feature types back from."""
    info = {"info": {"features": hf_features(features)}}
    return {b"huggingface": json.dumps(info).encode()}


def require(*modules: str) -> list:
    """Imports the optional extra's modules (pyarrow, pandas), or says how to install them."""
    try:
        return [importlib.import_module(m) for m in modules]
    except ModuleNotFoundError as e:
        raise ConfigError(
            f"LeRobot datasets need {e.name}: pip install -e '.[lerobot]' (pyarrow, pandas)"
        ) from None
