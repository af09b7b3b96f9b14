"""Helpers every benchmark suite shares: timing, statistics, results, tables, JSON, machine.

A suite is a module with ``NAME``, ``DESCRIPTION`` and
``run(size, workdir, progress) -> Report`` (see :class:`Suite`). Every figure
is a :class:`Result` carrying the baselines measured in the same run, so a
table or JSON file never shows a number without what it should be compared to.
Ratios are always ``lakelog / baseline``; whether higher is better is stated
per result.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Protocol, TypeVar

import numpy as np
import pyarrow as pa

#: The repository: benchmarks run from a checkout, not from an installed package.
PROJECT = Path(__file__).resolve().parents[1]

#: Sizes every suite accepts: ``tiny`` is for smoke tests (seconds, figures meaningless).
SIZES = ("tiny", "small", "large")

JSONScalar = str | int | float | bool | None
Params = Mapping[str, JSONScalar]


# -- timing ------------------------------------------------------------------


class Stopwatch:
    """``with Stopwatch() as sw: ...`` then ``sw.seconds``; uses ``time.perf_counter``."""

    def __init__(self) -> None:
        self._start = 0.0
        self.seconds = 0.0

    def __enter__(self) -> Stopwatch:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def sample(fn: Callable[[], object], repeat: int) -> list[float]:
    """Seconds of each of ``repeat`` consecutive calls of ``fn``."""
    return [timed(fn) for _ in range(repeat)]


# -- statistics --------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation between closest ranks."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def rate(count: float, seconds: float) -> float:
    """``count`` per second; infinite for a zero duration (a clock too coarse for the work)."""
    return count / seconds if seconds > 0 else math.inf


def ratio(value: float, baseline: float) -> float | None:
    """``value / baseline``, or None when the baseline is zero or not finite."""
    if baseline == 0 or not math.isfinite(baseline) or not math.isfinite(value):
        return None
    return value / baseline


# -- results -----------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """One figure of lakelog and the same figure for each baseline, from one run.

    ``value`` and every baseline share ``unit``. ``baselines`` keeps insertion
    order, which is the column order of the printed table.
    """

    benchmark: str
    variant: str
    metric: str
    value: float
    unit: str
    baselines: Mapping[str, float] = field(default_factory=dict)
    higher_is_better: bool = True
    params: Params = field(default_factory=dict)

    def ratio(self, baseline: str) -> float | None:
        """``value / baselines[baseline]`` (None if that baseline is missing or zero)."""
        base = self.baselines.get(baseline)
        return None if base is None else ratio(self.value, base)

    def to_json(self, machine: Params | None = None) -> dict[str, object]:
        out: dict[str, object] = {
            "benchmark": self.benchmark,
            "variant": self.variant,
            "metric": self.metric,
            "value": _json_float(self.value),
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "baselines": {k: _json_float(v) for k, v in self.baselines.items()},
            "ratios": {k: _json_float(self.ratio(k)) for k in self.baselines},
            "params": dict(self.params),
        }
        if machine is not None:
            out["machine"] = dict(machine)
        return out


def _json_float(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


@dataclass
class Report:
    """What one suite measured: its results in print order, and notes (headlines, caveats)."""

    suite: str
    results: list[Result] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, result: Result) -> Result:
        self.results.append(result)
        return result

    def find(self, benchmark: str, variant: str, metric: str) -> Result | None:
        for r in self.results:
            if (r.benchmark, r.variant, r.metric) == (benchmark, variant, metric):
                return r
        return None


class Progress(Protocol):
    def __call__(self, message: str) -> None: ...


class Suite(Protocol):
    """What ``python -m benchmarks`` needs from a benchmark module."""

    NAME: str
    DESCRIPTION: str

    def run(self, size: str, workdir: Path, progress: Progress) -> Report: ...


def stderr_progress(prefix: str) -> Progress:
    """A progress callback printing ``[prefix +elapsed] message`` to stderr."""
    start = time.monotonic()

    def say(message: str) -> None:
        print(
            f"[{prefix} +{time.monotonic() - start:6.1f}s] {message}", file=sys.stderr, flush=True
        )

    return say


def quiet(message: str) -> None:
    """A progress callback that says nothing (tests)."""


# -- formatting --------------------------------------------------------------


def format_number(value: float | None) -> str:
    """Compact and aligned: thousands separators for large values, 3 figures for small ones."""
    if value is None:
        return "-"
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def format_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row {row!r} has {len(row)} cells, expected {len(headers)}")
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def render_results(results: Sequence[Result]) -> str:
    """One table per benchmark, in first-seen order; a column pair per baseline (value, ratio)."""
    by_benchmark: dict[str, list[Result]] = {}
    for r in results:
        by_benchmark.setdefault(r.benchmark, []).append(r)
    sections = []
    for benchmark, group in by_benchmark.items():
        baselines: list[str] = []
        for r in group:
            baselines.extend(b for b in r.baselines if b not in baselines)
        headers = ["variant", "metric", "lakelog"]
        for b in baselines:
            headers += [b, "ratio"]
        rows = []
        for r in group:
            row = [r.variant, f"{r.metric} [{r.unit}]", format_number(r.value)]
            for b in baselines:
                row += [format_number(r.baselines.get(b)), format_ratio(r.ratio(b))]
            rows.append(row)
        directions = {r.higher_is_better for r in group}
        hint = (
            "higher is better"
            if directions == {True}
            else "lower is better"
            if directions == {False}
            else "see metric"
        )
        title = f"== {benchmark} ({hint}; ratio = lakelog / baseline)"
        sections.append(f"{title}\n{render_table(headers, rows)}")
    return "\n\n".join(sections)


def render_report(report: Report) -> str:
    text = f"### suite {report.suite} ({report.seconds:.1f} s)\n\n{render_results(report.results)}"
    if report.notes:
        text += "\n\n" + "\n".join(f"* {n}" for n in report.notes)
    return text


# -- machine -----------------------------------------------------------------


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine() or "unknown"


def _platform() -> str:
    """``platform.platform()``'s system, release and machine, read without its ``uname -p``
    subprocess (the quick test tier refuses every process)."""
    name = os.uname()
    return f"{name.sysname}-{name.release}-{name.machine}"


def machine_info() -> dict[str, JSONScalar]:
    """Where the figures were measured: CPUs, interpreter, library versions."""
    affinity = getattr(os, "sched_getaffinity", None)
    usable = len(affinity(0)) if affinity is not None else os.cpu_count()
    return {
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable,
        "cpu_model": _cpu_model(),
        "platform": _platform(),
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "deltalake": _version("deltalake"),
        "numpy": np.__version__,
        "lakelog": _version("lakelog"),
    }


def render_machine(machine: Params) -> str:
    return "machine: " + ", ".join(f"{k}={v}" for k, v in machine.items())


# -- output ------------------------------------------------------------------


def results_json(reports: Sequence[Report], machine: Params) -> list[dict[str, object]]:
    """Every result of every report as a JSON-ready dict, each naming its suite and machine."""
    out = []
    for report in reports:
        for r in report.results:
            item = r.to_json(machine)
            item["suite"] = report.suite
            out.append(item)
    return out


def write_json(path: Path, reports: Sequence[Report], machine: Params) -> None:
    """Write ``results_json`` to ``path`` (a list; non-finite numbers become null)."""
    data = results_json(reports, machine)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n")


# -- data and files ----------------------------------------------------------


def random_binary(count: int, width: int, rng: np.random.Generator) -> pa.BinaryArray:
    """``count`` random (incompressible) values of ``width`` bytes each, built without copies."""
    data = rng.bytes(count * width)
    offsets = np.arange(0, (count + 1) * width, width, dtype=np.int32)
    array = pa.Array.from_buffers(
        pa.binary(), count, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)]
    )
    assert isinstance(array, pa.BinaryArray)
    return array


def fsync_path(path: Path | str) -> None:
    """fsync a file or a directory, as a durable write must."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def settle_disk() -> None:
    """Flush every dirty page before a timed window.

    Without it, the gigabytes an earlier phase wrote are still being written
    back while the next one runs, and every fsync it makes waits behind them
    (measured: produce p99 from ~25 ms to 60-300 ms). Each contender gets the
    same clean start.
    """
    os.sync()


@contextlib.contextmanager
def scratch_dir(parent: Path, name: str) -> Iterator[Path]:
    """A fresh directory ``parent/name`` on a settled disk, removed on exit."""
    path = parent / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    settle_disk()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# -- processes ---------------------------------------------------------------


@dataclass(frozen=True)
class CpuTimes:
    """CPU seconds (user + system) of a whole process and its children, and of its main thread.

    Children count because they are the process's own work done elsewhere: a
    broker's checkpoint helper, say (live ones read from /proc, reaped ones
    from the parent's cutime/cstime).
    """

    total: float
    main_thread: float


def _stat_fields(path: str) -> list[str]:
    # Fields after the parenthesised command name start at field 3 (state), so field
    # n is at index n - 3: ppid (4) -> 1, utime/stime (14, 15) -> 11, 12, and
    # cutime/cstime (16, 17) -> 13, 14. Times are in clock ticks.
    return Path(path).read_text().rsplit(")", 1)[1].split()


def _stat_cpu_seconds(path: str) -> float:
    fields = _stat_fields(path)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_cpu_seconds(pid: int) -> float:
    """CPU of ``pid``'s live children and of the children it has reaped."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    reaped = (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    live = 0.0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or entry.name == str(pid):
            continue
        try:
            child = _stat_fields(f"/proc/{entry.name}/stat")
            if int(child[1]) == pid:
                live += (int(child[11]) + int(child[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
    return reaped + live


def cpu_times(pid: int) -> CpuTimes | None:
    """CPU used so far by process ``pid`` (with its children) and by its main thread.

    None where /proc has no answer.
    """
    try:
        return CpuTimes(
            _stat_cpu_seconds(f"/proc/{pid}/stat") + _children_cpu_seconds(pid),
            _stat_cpu_seconds(f"/proc/{pid}/task/{pid}/stat"),
        )
    except (OSError, IndexError, ValueError):
        return None


def machine_busy_seconds() -> float | None:
    """CPU seconds every process of the machine has used (all cores, not idle or iowait).

    Compared with what the measured processes used over the same window, it
    shows how much of the machine other work took: figures measured while
    others were busy are not the machine's best.
    """
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


C = TypeVar("C")


def config_for(configs: Mapping[str, C], size: str) -> C:
    """The named size of a suite (tiny, small, large), or a clear error listing the sizes."""
    try:
        return configs[size]
    except KeyError:
        raise ValueError(f"unknown size {size!r}; choose from {', '.join(configs)}") from None


#: What a note says when other work shared the machine during a run.
CONTENDED = " - CONTENDED: rerun on an idle machine before comparing with other runs"


def load_note(before: float, after: float) -> str:
    """The machine-load line of a suite's notes, flagged when the load could skew figures."""
    text = f"machine: 1-min load average {before:.1f} at start, {after:.1f} at end"
    if max(before, after) > (os.cpu_count() or 1) * 0.75:
        text += CONTENDED
    return text
