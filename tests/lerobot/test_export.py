"""An export is the LeRobotDataset v3.0 layout lerobot 0.6.1 writes, and reads back as it was."""

import json

import numpy as np
import pytest

from tests.lerobot.conftest import FPS
from vla.errors import ConfigError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pd = pytest.importorskip("pandas")

from vla.lerobot.export import MARKER, export_lerobot  # noqa: E402
from vla.lerobot.reader import read_lerobot  # noqa: E402

INFO_KEYS = {
    "codebase_version", "robot_type", "fps", "features", "total_episodes", "total_frames",
    "total_tasks", "chunks_size", "data_files_size_in_mb", "video_files_size_in_mb",
    "data_path", "video_path", "splits",
}  # fmt: skip
COLUMNS = [
    "observation.image", "observation.state", "action", "timestamp", "frame_index",
    "episode_index", "index", "task_index",
]  # fmt: skip
EPISODE_COLUMNS = {
    "episode_index", "tasks", "length", "data/chunk_index", "data/file_index",
    "dataset_from_index", "dataset_to_index", "meta/episodes/chunk_index",
    "meta/episodes/file_index",
}  # fmt: skip
STATS = ["min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"]


def test_info_json(exported, demos):
    info = json.loads((exported / "meta/info.json").read_text())
    assert set(info) == INFO_KEYS
    assert info["codebase_version"] == "v3.0" and info["fps"] == FPS
    assert info["robot_type"] == "vla_reach"
    assert info["total_episodes"] == demos.num_episodes == 6
    assert info["total_frames"] == demos.num_steps
    assert info["total_tasks"] == len(set(demos.instructions))
    assert info["chunks_size"] == 1000 and info["data_files_size_in_mb"] == 100
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["splits"] == {"train": "0:6"}
    features = info["features"]
    assert list(features) == COLUMNS
    assert features["observation.image"] == {
        "dtype": "image",
        "shape": [32, 32, 3],
        "names": ["height", "width", "channels"],
    }
    assert features["observation.state"]["shape"] == [4]
    assert features["action"] == {"dtype": "float32", "shape": [2], "names": ["vx", "vy"]}
    assert features["timestamp"] == {"dtype": "float32", "shape": [1], "names": None}
    for key in ("frame_index", "episode_index", "index", "task_index"):
        assert features[key] == {"dtype": "int64", "shape": [1], "names": None}


def test_data_file_schema(exported):
    file = exported / "data/chunk-000/file-000.parquet"
    table = pq.read_table(file)
    assert table.column_names == COLUMNS
    image = table.schema.field("observation.image").type
    assert image == pa.struct({"bytes": pa.binary(), "path": pa.string()})
    assert table.schema.field("observation.state").type == pa.list_(pa.float32(), 4)
    assert table.schema.field("action").type == pa.list_(pa.float32(), 2)
    assert table.schema.field("timestamp").type == pa.float32()
    assert table.schema.field("task_index").type == pa.int64()
    first = table.column("observation.image")[0].as_py()
    assert first["path"] is None and first["bytes"].startswith(b"\x89PNG\r\n\x1a\n")
    # the feature types `datasets` reads the columns back as
    hf = json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]
    assert hf["observation.image"] == {"_type": "Image"}
    assert hf["action"]["_type"] == "Sequence" and hf["action"]["length"] == 2
    assert hf["index"] == {"dtype": "int64", "_type": "Value"}
    # one row group per episode, as lerobot's recorder writes
    assert pq.ParquetFile(file).num_row_groups == 6


def test_tasks_and_episodes_tables(exported, demos):
    tasks = pd.read_parquet(exported / "meta/tasks.parquet")
    assert tasks.index.name == "task" and list(tasks.columns) == ["task_index"]
    assert list(tasks.index) == list(dict.fromkeys(demos.instructions))
    assert tasks["task_index"].tolist() == list(range(len(tasks)))
    episodes = pq.read_table(exported / "meta/episodes/chunk-000/file-000.parquet")
    assert EPISODE_COLUMNS <= set(episodes.column_names)
    assert episodes.column("tasks").to_pylist() == [[t] for t in demos.instructions]
    lengths = np.diff(np.append(demos.episode_start, demos.num_steps))
    assert episodes.column("length").to_pylist() == lengths.tolist()
    assert "stats/observation.image/mean" in episodes.column_names
    mean = episodes.column("stats/observation.image/mean")[0].as_py()
    assert np.asarray(mean).shape == (3, 1, 1)


def test_stats_json_layout(exported):
    stats = json.loads((exported / "meta/stats.json").read_text())
    assert set(stats) == set(COLUMNS)
    for feature in stats.values():
        assert list(feature) == STATS
    image = {k: np.asarray(v) for k, v in stats["observation.image"].items()}
    for k in STATS:
        assert image[k].shape == ((1,) if k == "count" else (3, 1, 1))
    assert 0 <= image["min"].min() and image["max"].max() <= 1
    assert np.asarray(stats["action"]["mean"]).shape == (2,)
    assert np.asarray(stats["timestamp"]["mean"]).shape == (1,)


def test_round_trip(exported, demos):
    data = read_lerobot(exported)
    frames = data.frames
    np.testing.assert_array_equal(frames["observation.image"], demos.image)
    np.testing.assert_array_equal(frames["observation.state"], demos.state)
    np.testing.assert_array_equal(frames["action"], demos.action)
    np.testing.assert_array_equal(frames["episode_index"], demos.episode)
    np.testing.assert_array_equal(frames["index"], np.arange(demos.num_steps))
    starts = np.asarray(demos.episode_start)
    stops = np.append(starts[1:], demos.num_steps)
    assert data.episodes["dataset_from_index"] == starts.tolist()
    assert data.episodes["dataset_to_index"] == stops.tolist()
    frame_index = np.arange(demos.num_steps) - starts[demos.episode]
    np.testing.assert_array_equal(frames["frame_index"], frame_index)
    np.testing.assert_allclose(frames["timestamp"], frame_index / FPS, rtol=1e-6)
    assert data.episode_tasks() == demos.instructions
    tasks = [data.tasks[i] for i in frames["task_index"]]
    assert tasks == [demos.instructions[e] for e in demos.episode]


def test_files_roll_over_by_size_and_chunk(demos, tmp_path):
    """A file closes before an episode would take it past the limit; chunks hold 2 files."""
    out = export_lerobot(
        demos, tmp_path / "small", FPS, chunks_size=2, data_files_size_in_mb=0.004, progress=False
    )  # ~4 KB: the six episodes' frames take ~12 KB
    files = sorted((out / "data").glob("*/*.parquet"))
    assert len(files) >= 3 and (out / "data/chunk-001/file-000.parquet") in files
    data = read_lerobot(out)
    np.testing.assert_array_equal(data.frames["observation.image"], demos.image)
    np.testing.assert_array_equal(data.frames["action"], demos.action)
    for e, (chunk, file) in enumerate(
        zip(data.episodes["data/chunk_index"], data.episodes["data/file_index"], strict=True)
    ):
        held = pq.read_table(out / f"data/chunk-{chunk:03d}/file-{file:03d}.parquet")
        assert np.sum(held.column("episode_index").to_numpy() == e) == data.episodes["length"][e]
    # frames come back in `index` order, whatever the files are called
    (out / "data/chunk-009").mkdir()
    files[0].rename(out / "data/chunk-009/file-000.parquet")
    np.testing.assert_array_equal(read_lerobot(out).frames["action"], demos.action)


def test_refuses_a_folder_it_did_not_write(demos, exported, tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="did not write"):
        export_lerobot(demos, foreign, FPS, progress=False)
    assert (foreign / "notes.txt").read_text() == "keep me"
    assert (exported / MARKER).is_file()
    again = export_lerobot(demos, tmp_path / "twice", FPS, progress=False)
    export_lerobot(demos, again, FPS, progress=False)  # its own export: replaced
    assert read_lerobot(again).num_frames == demos.num_steps
