"""Video features: an export with `video=True` is lerobot's video layout, and reads back with
the episodes' boundaries and timestamps exact and the frames close (H.264 is lossy)."""

import json

import numpy as np
import pytest

from tests.lerobot.conftest import FPS
from vla.errors import ConfigError, DatasetError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from vla.lerobot.export import export_lerobot  # noqa: E402
from vla.lerobot.reader import read_lerobot  # noqa: E402
from vla.lerobot.video import decode  # noqa: E402

KEY = "observation.image"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
# |decoded - source| over every pixel of the test set's 32 px frames (yuv444p, crf 18): the
# mean was 1.21 and the 99th percentile 9 when measured; shapes' edges differ most
MEAN_ERROR, P99_ERROR = 1.5, 12
AV1_MEAN_ERROR = 4.5  # through H.264 then AV1 (crf 30, yuv420p): 3.35 when measured


@pytest.fixture(scope="module")
def video_export(demos, tmp_path_factory):
    """`demos` with its images as video: 2 files a chunk, a file closed after ~2 KB."""
    out = tmp_path_factory.mktemp("video") / "reach"
    return export_lerobot(
        demos, out, FPS, progress=False, video=True, chunks_size=2, video_files_size_in_mb=0.002
    )


def test_round_trip(video_export, demos):
    data = read_lerobot(video_export)
    np.testing.assert_array_equal(data.frames["observation.state"], demos.state)
    np.testing.assert_array_equal(data.frames["action"], demos.action)
    images = data.frames[KEY]
    assert images.shape == demos.image.shape and images.dtype == np.uint8
    error = np.abs(images.astype(int) - np.asarray(demos.image).astype(int))
    assert error.mean() < MEAN_ERROR and np.percentile(error, 99) <= P99_ERROR
    starts = np.asarray(demos.episode_start)
    assert data.episodes["dataset_from_index"] == starts.tolist()
    assert data.episode_tasks() == demos.instructions


def test_episode_spans_and_frame_times_are_exact(video_export, demos):
    episodes = read_lerobot(video_export).episodes
    lengths = episodes["length"]
    files = list(
        zip(
            episodes[f"videos/{KEY}/chunk_index"],
            episodes[f"videos/{KEY}/file_index"],
            strict=True,
        )
    )
    assert len(set(files)) >= 3 and (1, 0) in files  # rolled over by size, then by chunk
    for chunk, file in sorted(set(files)):
        mine = [e for e, f in enumerate(files) if f == (chunk, file)]
        assert mine == list(range(mine[0], mine[-1] + 1))  # whole episodes, in order
        before = 0
        for e in mine:  # each episode starts where the one before it in the file ends
            assert episodes[f"videos/{KEY}/from_timestamp"][e] == before / FPS
            assert episodes[f"videos/{KEY}/to_timestamp"][e] == (before + lengths[e]) / FPS
            before += lengths[e]
        path = video_export / VIDEO_PATH.format(video_key=KEY, chunk_index=chunk, file_index=file)
        _, times = decode(path)
        np.testing.assert_array_equal(times, np.arange(before) / FPS)


def test_schema(video_export, exported):
    info = json.loads((video_export / "meta/info.json").read_text())
    assert info["video_path"] == VIDEO_PATH and info["video_files_size_in_mb"] == 0.002
    assert info["features"][KEY] == {
        "dtype": "video",
        "shape": [32, 32, 3],
        "names": ["height", "width", "channels"],
        "info": {
            "video.height": 32,
            "video.width": 32,
            "video.codec": "h264",
            "video.pix_fmt": "yuv444p",
            "video.is_depth_map": False,
            "video.fps": FPS,
            "video.channels": 3,
            "has_audio": False,
        },
    }
    table = pq.read_table(video_export / "data/chunk-000/file-000.parquet")
    assert KEY not in table.column_names  # the frames live in the mp4 files
    assert KEY not in json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]
    episodes = pq.read_table(video_export / "meta/episodes/chunk-000/file-000.parquet")
    for column in ("chunk_index", "file_index", "from_timestamp", "to_timestamp"):
        assert f"videos/{KEY}/{column}" in episodes.column_names
    # the statistics are the source frames', as with PNG frames
    stats = json.loads((video_export / "meta/stats.json").read_text())
    assert stats[KEY] == json.loads((exported / "meta/stats.json").read_text())[KEY]


def test_bad_videos_are_one_error_line(video_export, demos, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(video_export, broken)
    first = broken / VIDEO_PATH.format(video_key=KEY, chunk_index=0, file_index=0)
    first.write_bytes(b"not a video")
    with pytest.raises(DatasetError, match="cannot decode video file .*file-000.mp4"):
        read_lerobot(broken)
    first.unlink()
    with pytest.raises(DatasetError, match="video file .*file-000.mp4 is missing"):
        read_lerobot(broken)
    info = json.loads((video_export / "meta/info.json").read_text())
    (broken / "meta/info.json").write_text(json.dumps({**info, "video_path": None}))
    with pytest.raises(DatasetError, match="video feature observation.image has no .*video_path"):
        read_lerobot(broken)
    for bad, match in [
        (dict(video_pix_fmt="rgb24"), "lerobot.video_pix_fmt='rgb24' is not one of"),
        (dict(video_crf=60), r"lerobot.video_crf=60 must be in \[0, 51\]"),
    ]:
        with pytest.raises(ConfigError, match=match):
            export_lerobot(demos, tmp_path / "x", FPS, progress=False, video=True, **bad)


def test_reads_lerobots_default_codec(video_export, demos, tmp_path):
    """A dataset whose videos are AV1 (libsvtav1, yuv420p: lerobot's defaults) reads back with
    the same frame times; the frames are close, by a looser bound (half-resolution colour)."""
    import shutil
    from fractions import Fraction

    import av

    av1 = tmp_path / "av1"
    shutil.copytree(video_export, av1)
    for path in sorted((av1 / "videos").rglob("*.mp4")):
        images, times = decode(path)
        with av.open(str(path), "w") as out:
            stream = out.add_stream("libsvtav1", rate=FPS, options={"g": "2", "crf": "30"})
            stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
            stream.time_base = Fraction(1, FPS)
            for image, t in zip(images, times, strict=True):
                frame = av.VideoFrame.from_ndarray(image, format="rgb24")
                frame.pts = round(t * FPS)
                out.mux(stream.encode(frame))
            out.mux(stream.encode())
        with av.open(str(path)) as container:
            assert container.streams.video[0].codec.canonical_name == "av1"
        np.testing.assert_array_equal(decode(path)[1], times)
    images = read_lerobot(av1).frames[KEY]
    error = np.abs(images.astype(int) - np.asarray(demos.image).astype(int))
    assert error.mean() < AV1_MEAN_ERROR
