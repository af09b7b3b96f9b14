"""One commit place per topic: brokers hand their group commits to the topic's commit leader.

Brokers committing the same topic would race for each Delta version, every lost race
costing a refresh and a retry (docs/architecture.md, "Commit leaders"). So the live
broker with the highest rendezvous score for a topic commits it; the others validate
and group their requests and hand each group (Arrow IPC) to it, so one Delta commit
carries every broker's requests.

The leader answers in two steps: its status once the group is queued (the next group
may go), its outcomes once the commit is durable. A broker that cannot reach the
leader commits the group itself (slower, never stuck); a handoff whose answer is lost
fails with a retriable error, and idempotent retries are deduplicated by sequence.
"""
