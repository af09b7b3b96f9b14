"""Draw docs/img/architecture.png: the processes of a lakelog deployment and the storage root.

``python docs/tools/draw_architecture.py [--out PATH]``. Drawn with matplotlib
boxes and arrows (no graphviz binary needed); the layout is data
(``BOXES``, ``ARROWS``) so a change to the architecture is a change of a few
tuples, and the PNG is regenerated rather than edited.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

PROJECT = Path(__file__).resolve().parents[2]
OUTPUT = PROJECT / "docs" / "img" / "architecture.png"


@dataclass(frozen=True)
class Box:
    key: str
    x: float
    y: float
    width: float
    height: float
    title: str
    body: str
    color: str


@dataclass(frozen=True)
class Arrow:
    start: str
    end: str
    label: str
    start_side: str = "bottom"
    end_side: str = "top"


CLIENT, BROKER, JOB, STORE = "#dbeafe", "#dcfce7", "#fef3c7", "#f3e8ff"

BOXES = (
    Box(
        "clients",
        0.3,
        6.3,
        4.2,
        1.6,
        "Clients",
        "Kafka clients: confluent-kafka, kafka-python,\naiokafka, kcat, kafkajs (unmodified)\n"
        "lakelog.client, lakelog CLI, curl, REST Proxy clients",
        CLIENT,
    ),
    Box(
        "spark",
        5.2,
        6.3,
        4.2,
        1.6,
        "Spark applications",
        "format('lakelog'): batch + Structured Streaming\nread / write, Kafka source options\n"
        "(no broker in the path)",
        CLIENT,
    ),
    Box(
        "ops",
        10.1,
        6.3,
        3.6,
        1.6,
        "Operators",
        "lakelog maintain / compact\nlakelog scheduler, cron, Airflow\n"
        "spark-submit compaction/job.py",
        CLIENT,
    ),
    Box(
        "brokers",
        0.3,
        3.2,
        6.0,
        2.2,
        "Brokers (server/, N stateless processes)",
        "Kafka listener (server/kafka/) + FastAPI: /v1, REST Proxy v2/v3\n"
        "validate -> group commit per topic -> one Delta commit\n"
        "commit leader per topic: other brokers hand it their groups\n"
        "group coordinator per group; long-poll fetch, batch cache\n"
        "heartbeat in _meta/brokers/ (who leads, who coordinates)",
        BROKER,
    ),
    Box(
        "jobs",
        8.9,
        3.2,
        4.8,
        2.2,
        "Maintenance jobs (compaction/, on Spark)",
        "pure planners (Kafka's rules) -> Spark tasks\n"
        "retention, key compaction, merge, vacuum\n"
        "commit: remove inputs + add outputs\nreport rows -> _jobs/history",
        JOB,
    ),
    Box(
        "root",
        0.3,
        0.3,
        13.4,
        2.0,
        "Storage root: S3 / HDFS / local directory (all durable state)",
        "_meta/topics/<name>.json  ->  topic id + table path      (put-if-absent)\n"
        "topics/<name>/<id>/_delta_log/<version>.json   "
        "one commit: txn(high watermarks) + add/remove\n"
        "topics/<name>/<id>/partition=<p>/<base>-<last>-<uuid>.parquet   one segment\n"
        "_consumer_offsets/ (Delta)     _jobs/history (Delta)     _meta/brokers/<id>.json",
        STORE,
    ),
)

ARROWS = (
    Arrow("clients", "brokers", "Kafka protocol :9092, HTTP :8082\nproduce, fetch, admin, groups"),
    Arrow("spark", "root", "lakelog.storage\n(direct)", end_side="top"),
    Arrow("ops", "jobs", "run"),
    Arrow("brokers", "root", "Parquet PUT + commit PUT\n(conditional put)"),
    Arrow("jobs", "root", "read segments, write new ones,\ncommit through TopicLog"),
)


def _anchor(box: Box, side: str, shift: float = 0.0) -> tuple[float, float]:
    cx = box.x + box.width / 2 + shift
    if side == "top":
        return cx, box.y + box.height
    if side == "bottom":
        return cx, box.y
    raise ValueError(f"unknown side {side!r}")


def draw(out: Path) -> Path:
    """Render the diagram to ``out`` (PNG) and return the path."""
    boxes = {b.key: b for b in BOXES}
    fig, ax = plt.subplots(figsize=(14, 8.3))
    ax.set_xlim(0, 14)
    ax.set_ylim(0, 8.3)
    ax.axis("off")
    for b in BOXES:
        ax.add_patch(
            FancyBboxPatch(
                (b.x, b.y),
                b.width,
                b.height,
                boxstyle="round,pad=0.02,rounding_size=0.15",
                facecolor=b.color,
                edgecolor="#334155",
                linewidth=1.4,
            )
        )
        ax.text(b.x + 0.15, b.y + b.height - 0.3, b.title, fontsize=11, weight="bold", va="center")
        ax.text(
            b.x + 0.15,
            b.y + b.height - 0.55,
            b.body,
            fontsize=8.6,
            va="top",
            family="monospace" if b.key == "root" else "sans-serif",
            linespacing=1.5,
        )
    for a in ARROWS:
        start, end = boxes[a.start], boxes[a.end]
        shift = (start.x + start.width / 2) - (end.x + end.width / 2)
        # Point at the part of the target below the source, so parallel arrows never cross.
        shift = max(min(shift, end.width / 2 - 0.6), -end.width / 2 + 0.6)
        p0 = _anchor(start, a.start_side)
        p1 = _anchor(end, a.end_side, shift)
        ax.add_patch(
            FancyArrowPatch(
                p0, p1, arrowstyle="-|>", mutation_scale=16, linewidth=1.6, color="#1e293b"
            )
        )
        mid = ((p0[0] + p1[0]) / 2 + 0.12, (p0[1] + p1[1]) / 2)
        ax.text(mid[0], mid[1], a.label, fontsize=8, style="italic", va="center", color="#1e293b")
    ax.set_title(
        "lakelog: stateless processes around one storage root of Delta tables",
        fontsize=13,
        weight="bold",
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUTPUT, help=f"PNG to write ({OUTPUT})")
    args = parser.parse_args(argv)
    print(f"wrote {draw(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
