"""Video features of a LeRobotDataset, written and read with PyAV.

lerobot lays them out as the data files are: episodes appended one after another to
`videos/<key>/chunk-000/file-000.mp4` (then file-001, ...), a file closed before the next episode would take it
past `video_files_size_in_mb`, and the episodes table says where each episode is:
`videos/<key>/chunk_index`, `file_index`, and `from_timestamp` / `to_timestamp`, its span in
seconds inside that file. Frame i of an episode is the file's frame at
`from_timestamp + timestamp[i]`.

Writing uses H.264 (libx264), lossy, so the frames read back are close to the originals, not
equal. Its `yuv444p` keeps the colours at full resolution; lerobot's default, AV1 (libsvtav1),
encodes 4:2:0 only, which halves them: at 48 px that blurs the shapes' colours. A keyframe
every 2 frames (lerobot's `g=2`) keeps any frame quick to decode, and x264's `zerolatency`
tuning encodes each frame as it comes, so the bytes written so far measure a file's size for
the roll-over rule after every episode.

Reading takes any codec this PyAV build decodes (AV1, H.264, ...): each file is decoded once,
and each frame matched to its timestamp within lerobot's tolerance (1e-4 s).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from vla.errors import DatasetError
from vla.lerobot import layout

ENCODER = "libx264"
PIX_FMTS = ("yuv444p", "yuv420p")
GOP = 2  # frames between keyframes
TOLERANCE_S = 1e-4


class VideoFiles:
    """One video feature's mp4 files, filled episode by episode in order."""

    def __init__(
        self,
        root: Path,
        key: str,
        fps: int,
        chunks_size: int,
        size_in_mb: float,
        pix_fmt: str = "yuv444p",
        crf: int = 18,
    ):
        self.root, self.key, self.fps = root, key, fps
        self.chunks_size, self.size_in_mb = chunks_size, size_in_mb
        self.pix_fmt, self.crf = pix_fmt, crf
        self.chunk, self.file = 0, 0
        self.container = self.stream = None
        self.frames = self.bytes = 0  # in the open file
        self.first: Path | None = None  # the first file written, for info.json

    def path(self) -> Path:
        name = layout.VIDEO_PATH.format(
            video_key=self.key, chunk_index=self.chunk, file_index=self.file
        )
        return self.root / name

    def write(self, frames: np.ndarray) -> dict:
        """Appends one episode's frames [n,H,W,3] uint8; returns its episodes-table entries."""
        n, height, width, _ = frames.shape
        if self.container is not None and self.frames > 0:
            size = self.bytes / 1024**2
            if size + size / self.frames * n >= self.size_in_mb:
                self.close()
                self.chunk, self.file = layout.next_file(self.chunk, self.file, self.chunks_size)
        if self.container is None:
            path = self.path()
            path.parent.mkdir(parents=True, exist_ok=True)
            self.container = av.open(str(path), "w")
            options = {"g": str(GOP), "crf": str(self.crf), "tune": "zerolatency"}
            self.stream = self.container.add_stream(ENCODER, rate=self.fps, options=options)
            self.stream.width, self.stream.height = width, height
            self.stream.pix_fmt = self.pix_fmt
            self.stream.time_base = Fraction(1, self.fps)
            self.frames = self.bytes = 0
            self.first = self.first or path
        start = self.frames
        for image in frames:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
            frame.pts = self.frames  # in 1/fps: the frame's time in the file
            packets = self.stream.encode(frame)
            self.container.mux(packets)
            self.bytes += sum(p.size for p in packets)
            self.frames += 1
        prefix = f"videos/{self.key}/"
        return {
            prefix + "chunk_index": self.chunk,
            prefix + "file_index": self.file,
            prefix + "from_timestamp": start / self.fps,
            prefix + "to_timestamp": self.frames / self.fps,
        }

    def close(self) -> None:
        if self.container is not None:
            self.container.mux(self.stream.encode())  # flush the encoder
            self.container.close()
            self.container = self.stream = None


def video_info(path: Path) -> dict:
    """The `info` of a video feature in info.json, read off its file as lerobot reads it."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        info = {
            "video.height": stream.height,
            "video.width": stream.width,
            "video.codec": stream.codec.canonical_name,
            "video.pix_fmt": stream.pix_fmt,
            "video.is_depth_map": False,
            "video.fps": int(stream.base_rate),
            "video.channels": 3,
        }
        return info | {"has_audio": bool(container.streams.audio)}


def decode(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Every frame of a video file [F,H,W,3] uint8 RGB and its timestamp in seconds [F]."""
    if not path.is_file():
        raise DatasetError(f"video file {path} is missing")
    images, times = [], []
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            for frame in container.decode(stream):
                images.append(frame.to_ndarray(format="rgb24"))
                times.append(float(frame.pts * frame.time_base))
    except (av.FFmpegError, ValueError, IndexError) as e:
        raise DatasetError(f"cannot decode video file {path}: {e}") from None
    if not images:
        raise DatasetError(f"video file {path} holds no frames")
    return np.stack(images), np.asarray(times)


def video_frames(root: Path, info: dict, key: str, episodes: dict, frames: dict) -> np.ndarray:
    """Video feature `key` of every frame [N,H,W,3], in the order of `frames` (their
    episode_index and timestamp say where each is)."""
    prefix = f"videos/{key}/"
    columns = ("chunk_index", "file_index", "from_timestamp")
    missing = [prefix + c for c in columns if prefix + c not in episodes]
    if missing or not info.get("video_path"):
        what = missing or ["info.json's video_path"]
        raise DatasetError(f"{root}: video feature {key} has no {', '.join(what)}")
    row = {e: i for i, e in enumerate(episodes["episode_index"])}
    where = [row[e] for e in frames["episode_index"].tolist()]  # each frame's episode row
    chunk = np.asarray(episodes[prefix + "chunk_index"])[where]
    file = np.asarray(episodes[prefix + "file_index"])[where]
    wanted = np.asarray(episodes[prefix + "from_timestamp"])[where] + frames["timestamp"]
    out = None
    for c, f in sorted(set(zip(chunk.tolist(), file.tolist(), strict=True))):
        name = info["video_path"].format(video_key=key, chunk_index=c, file_index=f)
        images, times = decode(root / name)
        mine = np.flatnonzero((chunk == c) & (file == f))
        nearest = nearest_index(times, wanted[mine])
        off = np.abs(times[nearest] - wanted[mine])
        if off.max() > TOLERANCE_S:
            t = wanted[mine][off.argmax()]
            raise DatasetError(
                f"{root / name} has no frame at {t:.4f} s (nearest {off.max():.4f} s off)"
            )
        if out is None:
            out = np.empty((len(wanted), *images.shape[1:]), np.uint8)
        out[mine] = images[nearest]
    return np.empty((0, 0, 0, 3), np.uint8) if out is None else out


def nearest_index(times: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each wanted time, the index of the nearest of `times` (any order)."""
    order = np.argsort(times, kind="stable")
    ordered = times[order]
    right = np.clip(np.searchsorted(ordered, wanted), 1, len(ordered) - 1)
    left = right - 1
    pick = np.where(np.abs(ordered[left] - wanted) <= np.abs(ordered[right] - wanted), left, right)
    return order[pick] if len(ordered) > 1 else np.zeros(len(wanted), int)
