"""E1/E2 of RELIABILITY.md on the whole system: an idempotent acks=all producer
(confluent-kafka) and a committing consumer group (confluent-kafka, classic protocol)
run against the real broker in a subprocess while it is bounced, cleanly (SIGTERM) and
hard (SIGKILL), on the same port; every send, ack and poll goes into a Jepsen-style
history (tests/support/history.py), and the assertion is the checker's verdict (H1-H8)
after a final drain. A transactional producer (every fifth transaction aborted on
purpose) and a second read_committed group run alongside on their own topic and history
(``tests/support/workload.py``): no aborted or uncommitted value read (H5/H8), no
committed one lost.

With ``flush.messages=1`` every acknowledged record is on disk before its ack, so even a
SIGKILL loses nothing acknowledged (H3/H4 must hold). ``make test`` runs two clean and two
hard bounces; ``KAFKALOG_SOAK=1`` runs five of each (``make soak``).

The default flush policy (Kafka's: no fsync on the write path) states its window in the
README: an acknowledged record is in the page cache, so it survives the death of the
broker process (SIGKILL) and is lost only with the machine (power, kernel) before the OS
writes it back. The second test holds the process half of that statement: SIGKILL
bounces with the default policy lose nothing acknowledged either. (A machine crash cannot
be staged from a test; that half rests on the OS.)

No timed assertion: the waits are bounded loops on conditions.
"""

from __future__ import annotations

import os

from tests.support.soak import workload_row
from tests.support.workload import Workload, free_port

BOUNCES = 5 if os.environ.get("KAFKALOG_SOAK") else 2


def test_e1_e2_bounces_lose_nothing_acknowledged(broker_factory):
    port = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{port}", "flush.messages": "1",
                             "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
                             "transaction.state.log.num.partitions": "3"})
    w = Workload(broker.bootstrap, "bounces").start()
    try:
        for bounce in range(2 * BOUNCES):
            w.progress(300, 1, timeout=120)
            if bounce % 2 == 0:
                broker.stop()  # clean
            else:
                broker.kill()  # hard: SIGKILL
            broker.start()
        assert w.progress(300, 1, timeout=120), (w.acked(), w.committed_txns())
        e, t = w.finish()  # the final drain, then the verdicts (H1-H8) on both topics
    finally:
        w.close()
    workload_row("E1/E2 bounces", 2 * BOUNCES, w, e, t, iterations=2 * BOUNCES)
    assert e.sends_ok > 1000 and t.sends_ok > 0
    assert "Traceback" not in broker.stderr_text()


def test_default_flush_policy_survives_process_kills(broker_factory):
    """The default policy's stated window (module docstring): SIGKILLs of the broker
    process, no fsync anywhere, and the checker finds nothing acknowledged lost."""
    port = free_port()
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{port}",
                             "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
                             "transaction.state.log.num.partitions": "3"})
    assert "flush.messages" not in broker.overrides and "log.flush.interval.messages" not in broker.overrides
    w = Workload(broker.bootstrap, "default-flush").start()
    try:
        for _ in range(BOUNCES):
            w.progress(300, 1, timeout=120)
            broker.kill()  # SIGKILL: only what the process had written to the page cache survives
            broker.start()
        assert w.progress(300, 1, timeout=120), (w.acked(), w.committed_txns())
        e, t = w.finish()
    finally:
        w.close()
    workload_row("E2 SIGKILL bounces, default flush policy", BOUNCES, w, e, t, iterations=BOUNCES)
    assert e.sends_ok > 500 and t.sends_ok > 0
    assert "Traceback" not in broker.stderr_text()
