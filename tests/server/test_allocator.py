"""The broker keeps freed memory for reuse: short-lived arrays stop faulting pages in."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from server.settings import BrokerSettings

# A group commit's pattern: arrays of a few hundred KB made and dropped together.
# Run in a child process, since the setting lasts for the whole process.
_PROBE = textwrap.dedent(
    """
    import json, resource, sys
    import numpy as np
    from server.allocator import keep_freed_memory

    def faults_per_round(rounds=200):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(rounds):
            positions = np.arange(80_000)
            offsets = np.repeat(positions, 1) + 7
            assert int(offsets[-1]) == 80_006
            del positions, offsets
        return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / rounds

    defaults = faults_per_round()
    took = keep_freed_memory(int(sys.argv[1]))
    kept = faults_per_round()
    print(json.dumps({"took": took, "defaults": defaults, "kept": kept}))
    """
)


def _probe(keep_bytes: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(keep_bytes)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def test_kept_freed_memory_is_reused_without_page_faults() -> None:
    seen = _probe(BrokerSettings(root="x").malloc_keep_bytes)
    assert seen["took"] is True
    # Each round touches about 300 fresh pages when they go back to the kernel.
    assert seen["defaults"] > 50, seen
    assert seen["kept"] < 5, seen


def test_zero_leaves_the_allocator_as_it_was() -> None:
    seen = _probe(0)
    assert seen["took"] is False
