"""The data parquet files of a LeRobotDataset: their Arrow schema (what `datasets` writes for
the features), one episode's frames as a table (images as PNG bytes), and the writer that
fills the files in order, rolling over by size and chunk as lerobot's recorder does."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from vla.lerobot import layout


def png(image: np.ndarray) -> bytes:
    """One frame [H,W,3] uint8 as PNG bytes (lerobot's compression level for images)."""
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="png", compress_level=6)
    return buffer.getvalue()


def data_schema(features: dict, pa):
    """The data files' Arrow schema, in the order of `features` (what `datasets` writes);
    video features have no column."""
    types = {"float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64()}
    fields = []
    for key, ft in features.items():
        if ft["dtype"] == "video":  # in its own mp4 files
            continue
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
