"""Durable generations: ``_meta/groups/<group>/<generation:020d>.json``.

Writing a generation with put-if-absent is what makes a coordinator's
rebalance count: if the file already exists another coordinator completed
that generation, and this one must step down. A coordinator taking over reads
the newest file to continue the generation count and to know the members.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from lakelog.errors import CorruptRecordError
from lakelog.storage import Storage, join

log = logging.getLogger(__name__)

GROUPS_DIR = "_meta/groups"


def generation_path(group_id: str, generation_id: int) -> str:
    return join(GROUPS_DIR, group_id, f"{generation_id:020d}.json")


def _generation_of(path: str) -> int | None:
    """The generation a file holds, from its name; None for a file of another name."""
    stem = path.rsplit("/", 1)[-1].removesuffix(".json")
    return int(stem) if stem.isdigit() else None


class GenerationStore:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def write(self, record: dict[str, Any]) -> bool:
        """Put the generation's record if nobody did; False: another coordinator did."""
        group_id, generation = str(record["group_id"]), int(record["generation_id"])
        written = self.storage.put_if_absent(
            generation_path(group_id, generation), json.dumps(record, indent=1).encode()
        )
        if written and generation > 2:
            # Only the newest generation is ever read; keep the one before it for readers
            # mid-lookup. Older ones are listed, not computed: a client-assigned generation
            # whose leader never synced was never written, so the numbers may have gaps.
            older = sorted(
                (number, path)
                for path in self._paths(group_id)
                if (number := _generation_of(path)) is not None and number < generation
            )
            for _, path in older[:-1]:
                self.storage.delete(path)
        return written

    def _paths(self, group_id: str) -> list[str]:
        return [
            e.path
            for e in self.storage.list_dir(join(GROUPS_DIR, group_id))
            if not e.is_dir and e.path.endswith(".json")
        ]

    def latest(self, group_id: str) -> dict[str, Any] | None:
        """The newest durable generation of the group, or None if it never had one."""
        for path in sorted(self._paths(group_id), reverse=True):
            try:
                data = self.storage.read_bytes(path)
            except FileNotFoundError:
                continue  # superseded and cleaned up between listing and reading
            try:
                record: dict[str, Any] = json.loads(data)
            except ValueError as exc:
                raise CorruptRecordError(
                    f"group generation file {path} is not JSON: {exc}"
                ) from exc
            return record
        return None

    def groups(self) -> list[str]:
        """Every group that ever completed a rebalance (and was not deleted)."""
        return sorted(
            e.path.rstrip("/").rsplit("/", 1)[-1]
            for e in self.storage.list_dir(GROUPS_DIR)
            if e.is_dir
        )

    def delete(self, group_id: str) -> None:
        self.storage.delete_tree(join(GROUPS_DIR, group_id))
