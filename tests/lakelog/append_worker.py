"""A separate OS process appending to a topic, for the concurrency and crash tests.

Each batch holds ``--batch`` records spread over every partition, values
``<worker>-<batch>-<i>``. After an append returns (the commit is durable), one
line per record ``partition offset value`` is appended to the ack file and
fsynced: the ack file is the set of acknowledged records.
"""

from __future__ import annotations

import argparse
import os
import sys

from lakelog import Record, connect


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--batches", type=int, default=0, help="0: until killed")
    parser.add_argument("--batch", type=int, default=6)
    parser.add_argument("--acks", required=True)
    args = parser.parse_args(argv)
    log = connect(args.root).topic(args.topic)
    partitions = log.num_partitions
    with open(args.acks, "a", encoding="utf-8") as acks:
        n = 0
        while args.batches == 0 or n < args.batches:
            records = [
                Record(f"{args.worker}-{n}-{i}".encode(), partition=i % partitions)
                for i in range(args.batch)
            ]
            result = log.append(records)
            lines = [
                f"{p} {o} {r.value.decode() if r.value else ''}\n"
                for p, o, r in zip(result.partitions, result.offsets, records, strict=True)
            ]
            acks.write("".join(lines))
            acks.flush()
            os.fsync(acks.fileno())
            n += 1
    log.close()


if __name__ == "__main__":
    main(sys.argv[1:])
