"""Throughput and latency benchmarks of lakelog, each figure next to its baselines.

Run ``python -m benchmarks <suite> [--size small|large] [--json OUT]``; ``all``
runs every suite in :data:`benchmarks.__main__.SUITES`. Shared timing,
statistics, table and JSON helpers live in :mod:`benchmarks.common`.
"""
