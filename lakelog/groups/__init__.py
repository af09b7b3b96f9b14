"""Consumer groups: assignment, the group state machine, offset resets and the offsets table.

Everything here except ``offsets_store`` is pure logic (no I/O, time passed in
explicitly), so the brokers' coordinator is a thin async shell around it.
"""
