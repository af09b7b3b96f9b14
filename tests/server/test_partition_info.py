"""The partition description is one type: the library's, the API's JSON and the client's."""

from __future__ import annotations

import dataclasses

from lakelog.client.admin import PartitionDescription
from lakelog.partition_state import PartitionState
from server.models import TopicDescriptionOut


def test_a_partition_goes_to_json_and_back_unchanged() -> None:
    state = PartitionState(
        partition=2,
        log_start_offset=5,
        high_watermark=9,
        size_bytes=1234,
        num_segments=3,
        num_records=4,
    )
    answer = TopicDescriptionOut(
        name="t",
        topic_id="id",
        table_uri="u",
        version=1,
        size_bytes=1234,
        partitions=[state],
        configs=[],
    )
    (body,) = answer.model_dump(mode="json")["partitions"]
    assert body == dataclasses.asdict(state)
    assert PartitionDescription(**body) == state
    assert PartitionDescription is PartitionState
