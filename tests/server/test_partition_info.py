"""The partition description is one type: the library's, the API's JSON and the client's."""

from __future__ import annotations

import dataclasses

from lakelog.client.admin import PartitionDescription
from lakelog.partition_state import PartitionState
from server.models import PartitionInfo


def test_the_api_model_has_exactly_the_library_fields() -> None:
    library = {f.name: f.type for f in dataclasses.fields(PartitionState)}
    api = {name: field.annotation for name, field in PartitionInfo.model_fields.items()}
    assert list(api) == list(library)
    assert all(t is int for t in api.values())
    assert set(library.values()) == {"int"}


def test_a_partition_goes_to_json_and_back_unchanged() -> None:
    state = PartitionState(
        partition=2,
        log_start_offset=5,
        high_watermark=9,
        size_bytes=1234,
        num_segments=3,
        num_records=4,
    )
    body = PartitionInfo.from_state(state).model_dump(mode="json")
    assert body == dataclasses.asdict(state)
    assert PartitionDescription(**body) == state
    assert PartitionDescription is PartitionState
