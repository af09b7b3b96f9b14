"""Helpers for running real lakelog brokers beside a test or a benchmark.

Nothing here is used by lakelog itself: the project's tests and benchmarks
share these launchers, and users can start a broker the same way in their
own integration tests (it needs the ``broker`` extra installed).
"""
