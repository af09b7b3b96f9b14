"""A separate OS process taking producer ids from a root, for the cross-process uniqueness test.

``--count`` ids are taken from one ``ProducerIdAllocator`` (broker id
``--broker``, blocks of ``--block-size``) once ``GATE/go`` exists, so every
worker starts claiming at the same moment. The ids, and how many claims the
worker lost to the others, are written to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lakelog.producer_ids import ProducerIdAllocator
from lakelog.storage import open_storage
from tests.lakelog.append_worker import wait_at_gate


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--broker", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--block-size", type=int, required=True)
    parser.add_argument("--gate", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    allocator = ProducerIdAllocator(
        open_storage(args.root), args.broker, block_size=args.block_size
    )
    wait_at_gate(args.gate, args.broker)
    ids = [allocator.next_id() for _ in range(args.count)]
    report = {"ids": ids, "claims_lost": allocator.claims_lost}
    args.out.write_text(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
