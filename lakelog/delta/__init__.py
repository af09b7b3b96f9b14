"""The subset of the Delta Lake protocol lakelog reads and writes directly."""
