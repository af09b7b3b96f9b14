"""One commit place per topic: brokers hand their group commits to the topic's commit leader.

A topic's Delta log takes one commit per version, so brokers that commit the
same topic themselves race for each version, and every lost race costs a
refresh and a retry (docs/architecture.md, "Commit leaders"). Instead, each
topic has a commit leader, the live broker with the highest rendezvous score
for the topic (as a group has a coordinator). Another broker still receives,
validates and partitions its clients' requests, groups them as before, and
hands each group (rows and producer sequences, as Arrow IPC) to the leader,
which adds it to its own next group commit: one Delta commit carries every
broker's requests, and offsets are assigned once, in that commit.

The leader answers a handoff only once its commit is durable, so nothing is
acknowledged that is not stored. A broker that cannot reach the leader (it
is not listening: dead, or not started) commits the group itself, racing as
before: slower, never stuck. A handoff whose answer is lost after it was
sent has an unknown outcome: its requests fail with a retriable storage
error, and idempotent producers' retries are deduplicated by sequence.
"""
