"""A separate OS process appending to a topic, for the concurrency and crash tests.

Each batch holds ``--batch`` records spread over every partition, values
``<worker>-<batch>-<i>``. After an append returns (the commit is durable), one
line per record ``partition offset value`` is appended to the ack file and
fsynced: the ack file is the set of acknowledged records.

With ``--gate DIR`` the worker opens the topic, creates ``DIR/<worker>.ready``
and appends only once ``DIR/go`` exists, so that the test can start every
worker at the same moment (process start-up takes longer than many appends).
With ``--stats PATH`` it writes its ``TopicLog.commit_stats`` there as JSON
when it is done.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from lakelog import Record, connect

#: How long a gated worker waits for the go file before giving up.
GATE_TIMEOUT_S = 120.0


def wait_at_gate(gate: Path, worker: str) -> None:
    (gate / f"{worker}.ready").touch()
    deadline = time.monotonic() + GATE_TIMEOUT_S
    while not (gate / "go").exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"worker {worker}: no go at {gate} within {GATE_TIMEOUT_S:g} s")
        time.sleep(0.001)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--batches", type=int, default=0, help="0: until killed")
    parser.add_argument("--batch", type=int, default=6)
    parser.add_argument("--acks", required=True)
    parser.add_argument("--gate", type=Path, help="start appending when GATE/go exists")
    parser.add_argument("--stats", type=Path, help="write the commit counters here at the end")
    args = parser.parse_args(argv)
    log = connect(args.root).topic(args.topic)
    partitions = log.num_partitions
    if args.gate is not None:
        wait_at_gate(args.gate, args.worker)
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
    if args.stats is not None:
        args.stats.write_text(json.dumps(dataclasses.asdict(log.commit_stats)))
    log.close()


if __name__ == "__main__":
    main(sys.argv[1:])
