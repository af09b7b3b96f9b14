"""Figures of a benchmark report, drawn with matplotlib from results in their JSON form.

Working from the JSON form (``benchmarks.common.results_json``) rather than
from live ``Result`` objects means a saved results file can be drawn again
without re-running anything. Suites are not known in advance (new ones get
registered in ``benchmarks/__main__.py``), so every figure selects results by
their shape: units, metric names and parameters, never by suite name, except
the compaction figure, which draws whatever a suite named ``compaction``
measured against the parameter that varies.

Each ``plot_*`` function returns the path it wrote, or None when the results
hold nothing for that figure (the report then says so instead of showing an
empty picture).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, NullFormatter

ResultDict = Mapping[str, Any]

#: Parameters naming how many records one request / batch / append carries, in preference order.
BATCH_KEYS = ("batch_records", "records_per_request", "records_per_batch", "batch_size")

#: Parameters that tell apart otherwise equal series of one throughput benchmark.
SHAPE_KEYS = ("format", "partitions")

_PERCENTILE = re.compile(r"(?:^|\s)p(\d+(?:\.\d+)?)$")

#: The parameter of a figure measured with several broker processes: how many served it.
BROKERS_KEY = "brokers"

#: Units of the figures drawn against the number of brokers.
BROKER_UNITS = ("records/s", "commits/s")

#: Parameters describing a compaction workload's size, tried in this order as the x axis.
SCALE_KEYS = (
    "records",
    "keys",
    "partitions",
    "segments",
    "bytes",
    "input_records",
    "input_bytes",
    "topics",
)


def percentile_of(metric: str) -> float | None:
    """50.0 for ``p50``, 99.9 for ``e2e p99.9``; None for a metric that is not a percentile."""
    match = _PERCENTILE.search(metric)
    return float(match.group(1)) if match else None


def _numeric(value: object) -> float | None:
    """A finite number as float; None for anything else (strings, bools, None, NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def batch_size(result: ResultDict) -> tuple[str, float] | None:
    """The batch-size parameter of a result (name, value), if it has one."""
    params = result.get("params", {})
    for key in BATCH_KEYS:
        value = _numeric(params.get(key))
        if value is not None:
            return key, value
    return None


def _series_label(result: ResultDict) -> str:
    params = result.get("params", {})
    shape = ", ".join(f"{k}={params[k]}" for k in SHAPE_KEYS if k in params)
    return shape


def throughput_points(
    results: Iterable[ResultDict],
) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """``{panel: {series: [(batch size, records/s)]}}`` of every records/s figure with a batch size.

    A panel is one benchmark of one suite; series are lakelog and each
    baseline, split by the shape parameters (format, partitions, connections).
    """
    panels: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        found = batch_size(r)
        if r.get("unit") != "records/s" or found is None or BROKERS_KEY in r.get("params", {}):
            continue  # figures measured per broker count are drawn against it (broker_points)
        key, x = found
        panel = f"{r['suite']}: {r['benchmark']} (x = {key})"
        shape = _series_label(r)
        contenders = {"lakelog": r.get("value"), **r.get("baselines", {})}
        for name, value in contenders.items():
            y = _numeric(value)
            if y is not None and y > 0:
                label = f"{name} ({shape})" if shape else name
                panels[panel][label].append((x, y))
    return {p: {s: sorted(pts) for s, pts in series.items()} for p, series in panels.items()}


def latency_bars(results: Iterable[ResultDict]) -> dict[str, list[tuple[str, str, float]]]:
    """``{panel: [(variant + percentile, contender, ms), ...]}`` for every percentile in ms."""
    panels: dict[str, list[tuple[str, str, float]]] = defaultdict(list)
    for r in results:
        q = percentile_of(str(r.get("metric", "")))
        if q is None or r.get("unit") != "ms":
            continue
        panel = f"{r['suite']}: {r['benchmark']}"
        group = f"{_shorten(str(r['variant']))}\n{r['metric']}"
        contenders = {"lakelog": r.get("value"), **r.get("baselines", {})}
        for name, value in contenders.items():
            y = _numeric(value)
            if y is not None:
                panels[panel].append((group, name, y))
    return dict(panels)


def _shorten(text: str, width: int = 30) -> str:
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def scaling_points(
    results: Iterable[ResultDict], suite: str = "compaction"
) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """``{panel: {series: [(size, value)]}}``: a suite's results along the parameter that varies.

    A panel is one (benchmark, metric, unit); its x axis is the first of
    ``SCALE_KEYS`` whose value differs between the panel's results (a
    benchmark measured at one size only has no scaling to draw and is left out).
    """
    groups: dict[tuple[str, str, str], list[ResultDict]] = defaultdict(list)
    for r in results:
        if r.get("suite") == suite:
            groups[(str(r["benchmark"]), str(r["metric"]), str(r["unit"]))].append(r)
    panels: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for (benchmark, metric, unit), members in groups.items():
        key = _varying_key(members)
        if key is None:
            continue
        series: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for r in members:
            x = _numeric(r["params"][key])
            contenders = {"lakelog": r.get("value"), **r.get("baselines", {})}
            for name, value in contenders.items():
                y = _numeric(value)
                if x is not None and y is not None:
                    series[name].append((x, y))
        if series:
            panels[f"{benchmark}: {metric} [{unit}] vs {key}"] = {
                s: sorted(p) for s, p in series.items()
            }
    return panels


def broker_points(results: Iterable[ResultDict]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """``{panel: {series: [(brokers, value)]}}``: records/s and commits/s per broker count.

    A panel is one benchmark and unit (a regime of the multi-broker suite);
    series are lakelog and each baseline. Ratios between broker counts have no
    single broker count and are left out.
    """
    panels: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        params = r.get("params", {})
        x = _numeric(params.get(BROKERS_KEY))
        unit = r.get("unit")
        if x is None or unit not in BROKER_UNITS or "versus_brokers" in params:
            continue
        contenders = {"lakelog": r.get("value"), **r.get("baselines", {})}
        for name, value in contenders.items():
            y = _numeric(value)
            if y is not None and y > 0:
                panels[f"{r['suite']}: {_shorten(str(r['benchmark']), 90)} [{unit}]"][name].append(
                    (x, y)
                )
    return {p: {s: sorted(pts) for s, pts in series.items()} for p, series in panels.items()}


def _varying_key(results: Sequence[ResultDict]) -> str | None:
    for key in SCALE_KEYS:
        values = {_numeric(r.get("params", {}).get(key)) for r in results}
        if None not in values and len(values) > 1:
            return key
    return None


# -- drawing -----------------------------------------------------------------


def _grid(
    count: int, width: float = 6.5, height: float = 4.2, max_cols: int = 2
) -> tuple[Any, list[Any]]:
    cols = min(count, max_cols)
    rows = math.ceil(count / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[count:]:
        ax.set_visible(False)
    return fig, flat[:count]


def _save(fig: Any, path: Path, title: str) -> Path:
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _line_panels(
    panels: Mapping[str, Mapping[str, Sequence[tuple[float, float]]]],
    path: Path,
    title: str,
    xlabel: str,
    ylabel: str | None,
) -> Path:
    fig, axes = _grid(len(panels), width=11, height=4.4, max_cols=1)
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    dashes = ["-", "--", ":", "-."]
    for ax, (panel, series) in zip(axes, sorted(panels.items()), strict=True):
        # One colour per contender, one line style per shape (format, partitions).
        contenders = sorted({label.split(" (")[0] for label in series})
        shapes = sorted({label.partition(" (")[2] for label in series})
        for label, points in sorted(series.items()):
            xs, ys = zip(*points, strict=True)
            name, _, shape = label.partition(" (")
            lake = name == "lakelog"
            ax.plot(
                xs,
                ys,
                linestyle=dashes[shapes.index(shape) % len(dashes)],
                marker="o" if lake else "x",
                color=palette[contenders.index(name) % len(palette)],
                linewidth=2.2 if lake else 1,
                label=label,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        # Ticks exactly at the measured sizes, labelled in full (log ticks would hide them).
        ax.set_xticks(sorted({x for points in series.values() for x, _ in points}))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(panel, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel or panel.rsplit("[", 1)[-1].split("]")[0])
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path, title)


def plot_throughput(results: Sequence[ResultDict], path: Path, size: str) -> Path | None:
    """Throughput (records/s, log scale) versus records per batch/request, lakelog and baselines."""
    panels = throughput_points(results)
    if not panels:
        return None
    return _line_panels(
        panels,
        path,
        f"Throughput versus batch size ({size})",
        "records per batch / request",
        "records/s",
    )


def plot_latency(results: Sequence[ResultDict], path: Path, size: str) -> Path | None:
    """Grouped bars of every latency percentile (ms, log scale): lakelog next to its baselines."""
    panels = latency_bars(results)
    if not panels:
        return None
    fig, axes = _grid(len(panels), width=7.5, height=4.6)
    for ax, (panel, bars) in zip(axes, sorted(panels.items()), strict=True):
        groups = list(dict.fromkeys(g for g, _, _ in bars))
        contenders = list(dict.fromkeys(c for _, c, _ in bars))
        width = 0.8 / len(contenders)
        values = {(g, c): v for g, c, v in bars}
        for i, contender in enumerate(contenders):
            xs = [j + i * width for j, g in enumerate(groups) if (g, contender) in values]
            ys = [values[(g, contender)] for g in groups if (g, contender) in values]
            ax.bar(xs, ys, width, label=contender)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(groups))])
        ax.set_xticklabels(groups, fontsize=6)
        ax.set_yscale("log")
        ax.set_ylabel("ms")
        ax.set_title(panel, fontsize=9)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return _save(fig, path, f"Latency percentiles ({size}; lower is better)")


def plot_compaction_scaling(results: Sequence[ResultDict], path: Path, size: str) -> Path | None:
    """Each compaction measurement against the workload size that varies between its runs."""
    panels = scaling_points(results)
    if not panels:
        return None
    return _line_panels(panels, path, f"Compaction scaling ({size})", "workload size", None)


def plot_broker_scaling(results: Sequence[ResultDict], path: Path, size: str) -> Path | None:
    """Records/s and commits/s against the number of brokers, lakelog next to its baselines."""
    panels = broker_points(results)
    if not panels:
        return None
    return _line_panels(panels, path, f"Scaling with brokers ({size})", "brokers", None)
