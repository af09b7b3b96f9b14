"""The brokers' group coordinator: choosing, forwarding to and running coordinators.

The group logic itself is pure and lives in ``lakelog.groups``; this package
adds what needs a process: live brokers, HTTP forwarding, timers, fencing
files and the offsets table's group commit.
"""
