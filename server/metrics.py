"""Prometheus metrics of one broker (its own registry, so several brokers fit in one process)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from lakelog.commit_stats import CommitStats

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
#: The event loop's lag is measured to the millisecond (libuv's timer resolution).
LOOP_LAG_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2.5)


class TopicCommitCollector(Collector):
    """Per-topic opens and commit counters, read at each scrape from the catalog, which
    already counts them over every log it opened for a name (so they only grow)."""

    def __init__(
        self,
        opens: Callable[[], Mapping[str, int]],
        commit_stats: Callable[[], Mapping[str, CommitStats]],
    ) -> None:
        self._opens = opens
        self._commit_stats = commit_stats

    def collect(self) -> Iterator[Metric]:
        opened = CounterMetricFamily(
            "lakelog_topic_opens",
            "Times this broker opened a topic's table (once per topic, again if recreated)",
            labels=["topic"],
        )
        for topic, count in sorted(self._opens().items()):
            opened.add_metric([topic], count)
        yield opened
        stats = sorted(self._commit_stats().items())
        for name, field, help_text in (
            ("lakelog_topic_commits", "commits", "Delta versions this broker committed"),
            (
                "lakelog_topic_commit_races_lost",
                "lost_races",
                "Commit attempts that found their Delta version taken by another writer",
            ),
            (
                "lakelog_topic_commit_retries",
                "retries",
                "Commit attempts made again at the next version after a lost race",
            ),
            (
                "lakelog_topic_renumbered_segments",
                "renumbered_segments",
                "Segments written again at new offsets because another writer moved "
                "their partition on",
            ),
            (
                "lakelog_topic_commits_recognised",
                "recognised_after_error",
                "Commits whose PUT reported an error but which had landed (found by commit id)",
            ),
            (
                "lakelog_topic_duplicates_from_memory",
                "duplicates_from_memory",
                "Retried idempotent produce requests answered with their first offsets from "
                "this broker's memory of each producer's last five batches",
            ),
            (
                "lakelog_topic_duplicates_from_log",
                "duplicates_from_log",
                "Retried idempotent produce requests whose first offsets were looked up in "
                "the newest segments",
            ),
            (
                "lakelog_topic_duplicate_segment_reads",
                "duplicate_segment_reads",
                "Segments read to find where retried produce requests were first written",
            ),
        ):
            family = CounterMetricFamily(name, help_text, labels=["topic"])
            for topic, counts in stats:
                family.add_metric([topic], getattr(counts, field))
            yield family


class BrokerMetrics:
    """The broker's metrics, each in its own registry."""

    def __init__(self, topics: TopicCommitCollector | None = None) -> None:
        self.registry = r = CollectorRegistry()

        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(name, doc, labels, registry=r)

        def gauge(name: str, doc: str, *labels: str) -> Gauge:
            return Gauge(name, doc, labels, registry=r)

        def histogram(name: str, doc: str, buckets: tuple[float, ...], *labels: str) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=r)

        self.requests = counter(
            "lakelog_http_requests", "HTTP requests by route and status", "route", "status"
        )
        self.latency = histogram(
            "lakelog_http_request_seconds",
            "HTTP request latency by route",
            LATENCY_BUCKETS,
            "route",
        )
        self.bytes_in = counter("lakelog_bytes_in", "Request body bytes received")
        self.bytes_out = counter("lakelog_bytes_out", "Response body bytes sent")
        self.records_in = counter("lakelog_records_in", "Records accepted for produce", "topic")
        self.records_out = counter("lakelog_records_out", "Records returned by fetches", "topic")
        self.commit_latency = histogram(
            "lakelog_commit_seconds",
            "Time to make one group commit durable",
            LATENCY_BUCKETS,
            "topic",
        )
        self.commit_phases = histogram(
            "lakelog_commit_phase_seconds",
            "Where a group commit made here spends its time: stage (segments written), "
            "wait (behind the group before it), commit (flushed, committed, listeners told)",
            LATENCY_BUCKETS,
            "topic",
            "phase",
        )
        self.loop_lag = histogram(
            "lakelog_event_loop_lag_seconds",
            "How late the event loop ran a callback due every 10 ms: a wait every request "
            "on the loop shares (work on the loop, or waiting for the GIL)",
            LOOP_LAG_BUCKETS,
        )
        self.batch_requests = histogram(
            "lakelog_batch_requests",
            "Produce requests per group commit",
            (1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
        )
        self.batch_records = histogram(
            "lakelog_batch_records",
            "Records per group commit",
            (1, 10, 100, 1_000, 10_000, 100_000, 1_000_000),
        )
        self.handoffs = counter(
            "lakelog_commit_handoffs",
            "Group commits handed to (sent) or taken for (received) a topic's commit leader, "
            "and those committed here because the leader could not be reached (fallback)",
            "topic",
            "direction",
        )
        self.abandoned_fetches = counter(
            "lakelog_abandoned_fetches",
            "Long-poll fetches ended early because the client disconnected",
        )
        self.acks0_failures = counter(
            "lakelog_acks0_failures", "acks=0 produce requests that failed after the answer"
        )
        self.buffered_bytes = gauge(
            "lakelog_produce_buffer_bytes", "Bytes waiting for a group commit"
        )
        self.cache_hits = gauge("lakelog_fetch_cache_hits", "Fetches served from recent batches")
        self.cache_misses = gauge("lakelog_fetch_cache_misses", "Fetches that read storage")
        self.live_brokers = gauge(
            "lakelog_live_brokers",
            "Live brokers as this broker last read the registry (coordinators and commit "
            "leaders are chosen among them)",
        )
        self.authentication_failures = counter(
            "lakelog_authentication_failures", "Requests refused as unauthenticated"
        )
        self.authorization_denials = counter(
            "lakelog_authorization_denials",
            "Requests refused by ACLs",
            "resource_type",
            "operation",
        )
        self.quota_throttled = counter(
            "lakelog_quota_throttled_responses",
            "Responses delayed because a quota was exceeded",
            "quota",
            "user",
        )
        self.checkpoint_helper = gauge(
            "lakelog_checkpoint_helper_events",
            "Delta checkpoints by the broker's helper process: written, failed (retried at "
            "the next interval), restarted (helper found dead and started again), "
            "commits_read (commits it read from storage: other writers' and each topic's "
            "history before its last checkpoint; this broker's own commits are handed over)",
            "event",
        )
        self.quota_throttle_seconds = counter(
            "lakelog_quota_throttle_seconds", "Throttle time imposed", "quota", "user"
        )
        if topics is not None:
            r.register(topics)

    def observe_commit(self, topic: str, requests: int, records: int, seconds: float) -> None:
        self.commit_latency.labels(topic).observe(seconds)
        self.batch_requests.observe(requests)
        self.batch_records.observe(records)

    def observe_commit_phase(self, topic: str, phase: str, seconds: float) -> None:
        self.commit_phases.labels(topic, phase).observe(seconds)
