"""What the broker suite asks a broker between timed windows: topics, segments, metrics.

Group-commit statistics come from the broker's own Prometheus counters,
read before and after a window.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from benchmarks.broker_load import call, target_of
from lakelog.testing.brokers import ServerProcess
from server.batcher import COMMIT_PHASES


def create_topic(broker: ServerProcess, name: str, partitions: int) -> None:
    call(target_of(broker), "POST", "/v1/topics", {"name": name, "partitions": partitions})


def segment_records(broker: ServerProcess, topic: str) -> float:
    """Mean records per segment the broker wrote for ``topic``."""
    described = json.loads(call(target_of(broker), "GET", f"/v1/topics/{topic}"))
    parts = described["partitions"]
    segments = sum(int(p["num_segments"]) for p in parts)
    return sum(int(p["num_records"]) for p in parts) / max(segments, 1)


_METRIC = re.compile(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$")


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text as ``name{labels}`` -> value (sums over nothing; labels kept)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _METRIC.match(line.strip())
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def metric_families(text: str) -> set[str]:
    """The metric families Prometheus text declares (``# TYPE`` lines), with or without samples.

    A labelled counter nothing has incremented yet has no sample, only its
    declaration: this tells "zero" from "not exposed by this broker".
    """
    return {
        parts[2]
        for line in text.splitlines()
        if len(parts := line.split()) >= 4 and parts[:2] == ["#", "TYPE"]
    }


def broker_metrics(broker: ServerProcess) -> dict[str, float]:
    return parse_metrics(call(target_of(broker), "GET", "/metrics").decode())


@dataclass(frozen=True)
class CommitStats:
    """Group commits between two metric snapshots of one topic."""

    commits: float
    requests_per_commit: float
    records_per_commit: float
    commit_ms: float
    #: mean ms per group committed by this broker in each phase (``COMMIT_PHASES``)
    phase_ms: dict[str, float] = field(default_factory=dict)

    def commit_time(self) -> str:
        """Mean time per commit, then per phase when the broker times them, e.g.
        '30.5 ms per commit (stage 22.5, wait 7.9, commit 17.5 ms)'."""
        text = f"{self.commit_ms:.1f} ms per commit"
        if self.phase_ms:
            parts = ", ".join(f"{phase} {ms:.1f}" for phase, ms in self.phase_ms.items())
            text += f" ({parts} ms)"
        return text


def commit_stats(before: dict[str, float], after: dict[str, float], topic: str) -> CommitStats:
    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    def mean_ms(histogram: str, labels: str) -> float | None:
        count = delta(f"{histogram}_count{{{labels}}}")
        return 1000 * delta(f"{histogram}_sum{{{labels}}}") / count if count > 0 else None

    commits = delta("lakelog_batch_requests_count")
    per = max(commits, 1.0)
    phases = {
        phase: ms
        for phase in COMMIT_PHASES
        if (ms := mean_ms("lakelog_commit_phase_seconds", f'phase="{phase}",topic="{topic}"'))
        is not None
    }
    return CommitStats(
        commits,
        delta("lakelog_batch_requests_sum") / per,
        delta("lakelog_batch_records_sum") / per,
        mean_ms("lakelog_commit_seconds", f'topic="{topic}"') or 0.0,
        phases,
    )


LOOP_LAG = "lakelog_event_loop_lag_seconds"


def histogram_quantile(
    before: dict[str, float], after: dict[str, float], name: str, q: float
) -> float | None:
    """The ``q`` quantile of an unlabelled histogram's observations between two snapshots.

    As Prometheus's ``histogram_quantile``: the bucket holding the quantile,
    interpolated linearly within it (from 0 for the first bucket); None when
    nothing was observed or the broker has no such histogram.
    """
    bounds: list[tuple[float, float]] = []
    prefix = f'{name}_bucket{{le="'
    for key, value in after.items():
        if key.startswith(prefix):
            le = key[len(prefix) : -2]
            bounds.append((math.inf if le == "+Inf" else float(le), value - before.get(key, 0.0)))
    bounds.sort()
    if not bounds or bounds[-1][1] <= 0:
        return None
    rank = q * bounds[-1][1]
    lower, below = 0.0, 0.0
    for upper, cumulative in bounds:
        if cumulative >= rank:
            if math.isinf(upper):
                return lower  # beyond the last finite bound: the most that can be said
            inside = cumulative - below
            return lower + (upper - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = upper, cumulative
    return lower


def loop_lag_ms(before: dict[str, float], after: dict[str, float]) -> dict[str, float | None]:
    """The broker event loop's lag p50/p99 (ms) over a window, for a result's params."""
    figures: dict[str, float | None] = {}
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        value = histogram_quantile(before, after, LOOP_LAG, q)
        figures[f"broker_loop_lag_{label}_ms"] = None if value is None else round(value * 1e3, 2)
    return figures
