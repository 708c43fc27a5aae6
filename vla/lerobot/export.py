"""Write a demonstration set as a LeRobotDataset v3.0 folder (`vla.lerobot.layout`).

Each step becomes a frame: `observation.image` (PNG bytes in the parquet, dtype "image"; or,
with `video=True`, an H.264 video feature: `vla.lerobot.video`), `observation.state`, `action`
(the expert's clean label), and the episode's instruction as its task. Episodes go into the
data files in order, one parquet row group each, as lerobot's recorder writes them.

The folder is written beside `out` and renamed into place when complete. An existing `out`
is replaced only if this exporter wrote it (it holds `meta/vla_export.json`).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from vla.console import bar_shown
from vla.data.dataset import Demos
from vla.errors import ConfigError
from vla.lerobot import layout, stats
from vla.lerobot.data_files import DataFiles, data_schema, episode_table
from vla.lerobot.layout import ACTION_KEY, IMAGE_KEY, STATE_KEY
from vla.lerobot.video import PIX_FMTS, VideoFiles, video_info

MARKER = layout.EXPORT_MARKER  # this exporter wrote the folder: it may replace it
ROBOT_TYPE = "vla_reach"
STATE_NAMES = ["x", "y", "vx", "vy"]
ACTION_NAMES = ["vx", "vy"]


def features_of(demos: Demos, video: bool = False) -> dict:
    """info.json's features: ours, then lerobot's bookkeeping."""
    h, w, c = demos.image.shape[1:]
    state, action = demos.state.shape[1], demos.action.shape[1]
    image = "video" if video else "image"
    ours = {
        IMAGE_KEY: {"dtype": image, "shape": [h, w, c], "names": ["height", "width", "channels"]},
        STATE_KEY: {"dtype": "float32", "shape": [state], "names": named(STATE_NAMES, state)},
        ACTION_KEY: {"dtype": "float32", "shape": [action], "names": named(ACTION_NAMES, action)},
    }
    return {**ours, **{k: dict(v) for k, v in layout.DEFAULT_FEATURES.items()}}


def named(names: list[str], size: int) -> list[str] | None:
    """Our names for a vector's entries, if it is ours (arrays of another task have none)."""
    return names if len(names) == size else None


def check_video(size: tuple[int, int], pix_fmt: str, crf: int) -> None:
    """Refuses video settings the encoder cannot take, naming the key."""
    if pix_fmt not in PIX_FMTS:
        raise ConfigError(f"lerobot.video_pix_fmt={pix_fmt!r} is not one of {list(PIX_FMTS)}")
    if not 0 <= crf <= 51:
        raise ConfigError(f"lerobot.video_crf={crf} must be in [0, 51] (libx264's range)")
    if pix_fmt == "yuv420p" and (size[0] % 2 or size[1] % 2):
        raise ConfigError(
            f"lerobot.video_pix_fmt=yuv420p needs even image sizes, not {size[0]}x{size[1]}"
        )


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
    video: bool = False,
    video_pix_fmt: str = "yuv444p",
    video_crf: int = 18,
    video_files_size_in_mb: float = layout.VIDEO_FILES_SIZE_IN_MB,
) -> Path:
    """Writes `demos` as a LeRobotDataset v3.0 folder `out`; returns it.

    Args:
        fps: frames per second of the recording (the env's `render_fps`).
        chunks_size: data files per chunk folder.
        data_files_size_in_mb: a data file is closed before an episode would take it past this.
        video: the images as an H.264 video feature (`vla.lerobot.video`), not PNG frames;
            video_pix_fmt and video_crf set its colour resolution and quality; a video file
            is closed before an episode would take it past video_files_size_in_mb.
    """
    pd, pa, pq = layout.require("pandas", "pyarrow", "pyarrow.parquet")

    out = Path(out)
    check_out(out)
    sizes = dict(data_files_size_in_mb=data_files_size_in_mb)
    sizes["video_files_size_in_mb"] = video_files_size_in_mb
    if chunks_size < 1 or min(sizes.values()) <= 0:
        raise ConfigError(f"chunks_size={chunks_size} must be >= 1 and {sizes} > 0")
    if video:
        check_video(demos.image.shape[1:3], video_pix_fmt, video_crf)
    features = features_of(demos, video)
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
        videos = VideoFiles(
            tmp, IMAGE_KEY, fps, chunks_size, video_files_size_in_mb, video_pix_fmt, video_crf
        )
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
            columns = episode_columns(demos, start, stop, e, task_of[demos.instructions[e]], fps)
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
            if video:
                row.update(videos.write(columns[IMAGE_KEY]))
            for key, feature in episode.items():  # lerobot's flattened per-episode stats
                row.update({f"stats/{key}/{s}": v.tolist() for s, v in feature.items()})
            row.update({"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
            rows.append(row)
            bar.update(1)
        files.close()
        videos.close()
        bar.close()
        if video:
            features[IMAGE_KEY]["info"] = video_info(videos.first)

        episodes_file = tmp / layout.EPISODES_PATH.format(chunk_index=0, file_index=0)
        episodes_file.parent.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), episodes_file, compression="snappy")
        pd.DataFrame(
            {"task_index": np.arange(len(tasks), dtype=np.int64)},
            index=pd.Index(tasks, name="task"),
        ).to_parquet(tmp / layout.TASKS_PATH)
        info = info_json(features, demos, len(tasks), fps, robot_type, chunks_size, sizes)
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


def episode_columns(demos: Demos, start: int, stop: int, e: int, task: int, fps: int) -> dict:
    """Episode `e`'s frames (steps start..stop-1) as one array per feature."""
    n = stop - start
    frame_index = np.arange(n, dtype=np.int64)
    return {
        IMAGE_KEY: np.asarray(demos.image[start:stop]),
        STATE_KEY: np.asarray(demos.state[start:stop], dtype=np.float32),
        ACTION_KEY: np.asarray(demos.action[start:stop], dtype=np.float32),
        "timestamp": frame_index / fps,  # float64 here, as lerobot computes its stats
        "frame_index": frame_index,
        "episode_index": np.full(n, e, dtype=np.int64),
        "index": np.arange(start, stop, dtype=np.int64),
        "task_index": np.full(n, task, dtype=np.int64),
    }


def info_json(features, demos, num_tasks, fps, robot_type, chunks_size, sizes: dict) -> dict:
    """meta/info.json, with the keys of lerobot's DatasetInfo."""
    has_video = any(ft["dtype"] == "video" for ft in features.values())
    return {
        "codebase_version": layout.CODEBASE_VERSION,
        "fps": int(fps),
        "features": features,
        "total_episodes": demos.num_episodes,
        "total_frames": demos.num_steps,
        "total_tasks": num_tasks,
        "chunks_size": chunks_size,
        "data_files_size_in_mb": sizes["data_files_size_in_mb"],
        "video_files_size_in_mb": sizes["video_files_size_in_mb"],
        "data_path": layout.DATA_PATH,
        "video_path": layout.VIDEO_PATH if has_video else None,
        "robot_type": robot_type,
        "splits": {"train": f"0:{demos.num_episodes}"},
    }


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4, ensure_ascii=False))
