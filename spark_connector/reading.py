"""Inside a Spark task: read one ``ReadSplit`` as record batches in the output schema.

Each segment is read in chunks, so a large split streams to Spark instead of
being held in memory whole; rows are cut to exactly ``[start, end)``. A
segment removed since planning (retention or compaction, then vacuum) is data
loss: an error unless ``failOnDataLoss`` is false, in which case it is skipped.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from lakelog.errors import OffsetOutOfRangeError
from lakelog.segments import SegmentReader
from lakelog.storage import Storage
from spark_connector.options import StorageSpec
from spark_connector.planning import ReadSplit
from spark_connector.schema import to_output

log = logging.getLogger(__name__)

#: Rows per read from a segment (16 row groups of lakelog's 16,384): bounds task memory.
CHUNK_RECORDS = 262_144

_lock = threading.Lock()
_storages: dict[StorageSpec, Storage] = {}
_readers: OrderedDict[tuple[StorageSpec, str], SegmentReader] = OrderedDict()
_MAX_READERS = 64


def storage_for(spec: StorageSpec) -> Storage:
    """The root, opened once per worker process (Python workers are reused across tasks)."""
    with _lock:
        storage = _storages.get(spec)
        if storage is None:
            storage = _storages[spec] = spec.open()
        return storage


def reader_for(spec: StorageSpec, table_path: str) -> SegmentReader:
    """A segment reader per table, kept so its Parquet footer cache outlives one task."""
    key = (spec, table_path)
    with _lock:
        reader = _readers.get(key)
        if reader is not None:
            _readers.move_to_end(key)
            return reader
    reader = SegmentReader(storage_for(spec), table_path)
    with _lock:
        _readers[key] = reader
        while len(_readers) > _MAX_READERS:
            _readers.popitem(last=False)
    return reader


def read_rows(
    spec: StorageSpec,
    split: ReadSplit,
    fail_on_data_loss: bool = True,
    typed: Sequence[pa.Field] = (),
) -> Iterator[pa.Table]:
    """Segment rows of the split with offsets in ``[start, end)``, in offset order, with
    the ``typed`` columns."""
    reader = reader_for(spec, split.table_path)
    for ref in split.segments:
        position = max(split.start, ref.base_offset)
        stop = min(split.end, ref.end_offset)
        segment = ref.segment(split.partition)
        while position < stop:
            try:
                rows = reader.read(
                    segment, position, min(CHUNK_RECORDS, stop - position), typed=typed
                )
            except FileNotFoundError as exc:
                message = (
                    f"segment {ref.path} of {split.topic}-{split.partition} (offsets "
                    f"{ref.base_offset}..{ref.last_offset}) was removed from storage before "
                    "it could be read (retention or compaction, then vacuum)"
                )
                if fail_on_data_loss:
                    raise OffsetOutOfRangeError(
                        f"{message}; set failOnDataLoss=false to skip it"
                    ) from exc
                log.warning("%s; skipped (failOnDataLoss=false)", message)
                break
            if rows.num_rows == 0:
                break
            offsets = rows.column("offset").to_numpy()
            keep = int(np.searchsorted(offsets, stop, side="left"))
            if keep < rows.num_rows:
                rows = rows.slice(0, keep)
            if rows.num_rows:
                yield rows
            if keep < len(offsets):
                break
            position = int(offsets[-1]) + 1


def read_split(
    spec: StorageSpec,
    split: ReadSplit,
    include_headers: bool,
    fail_on_data_loss: bool = True,
    typed: Sequence[pa.Field] = (),
) -> Iterator[pa.RecordBatch]:
    """The split as record batches in the connector's output schema."""
    for rows in read_rows(spec, split, fail_on_data_loss, typed):
        for batch in rows.to_batches():  # one per row group: no copy of the columns
            yield to_output(batch, split.topic, split.partition, include_headers, typed)
