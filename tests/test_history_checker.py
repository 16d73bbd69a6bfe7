"""The history checker of the reliability suite (tests/support/history.py), on histories
built to contain each anomaly H1-H8 (and a clean one that passes), as jepsen-io/redpanda
tests its checker."""

from __future__ import annotations

from tests.support.history import CHECKS, History, check


def clean() -> History:
    h = History()
    for i in range(3):
        h.send("p1", 0, f"a{i}").ok(i)
    h.assign("c1", [0])
    h.poll("c1", [(0, 0, "a0"), (0, 1, "a1")])
    h.poll("c1", [(0, 2, "a2")])
    return h


def only(report, name: str) -> list[str]:
    assert set(CHECKS) == set(report.anomalies)
    others = {k: v for k, v in report.anomalies.items() if v and k != name}
    assert not others, others
    return report.anomalies[name]


def test_a_clean_history_passes():
    r = check(clean())
    assert r.valid and r.sends_ok == 3 and r.values_polled == 3, r.anomalies


def test_h1_inconsistent_offsets():
    h = clean()
    h.poll("c2", [(0, 1, "zz")])  # another value at 0/1
    found = check(h).anomalies["H1 inconsistent-offsets"]
    assert found and "offset 1" in found[0]


def test_h2_duplicate():
    h = clean()
    h.assign("c2", [0])
    h.poll("c2", [(0, 0, "a0"), (0, 1, "a1"), (0, 2, "a2"), (0, 3, "a1")])  # a1 written twice
    assert "a1" in only(check(h), "H2 duplicate")[0]


def test_h3_lost_write():
    h = History()
    h.send("p1", 0, "a0").ok(0)
    h.send("p1", 0, "a1").ok(1)
    h.assign("c1", [0])
    h.poll("c1", [(0, 1, "a1")])  # offset 1 seen, the acknowledged a0 at 0 never
    assert "a0" in only(check(h), "H3 lost-write")[0]


def test_h4_unseen_only_after_the_drain():
    h = clean()
    h.send("p1", 0, "a3").ok(3)
    assert check(h, drained=False).valid
    assert "a3" in only(check(h, drained=True), "H4 unseen")[0]


def test_h5_aborted_read_of_a_failed_send_and_of_an_aborted_transaction():
    h = clean()
    h.send("p1", 0, "bad").fail()
    t = h.txn("tx")
    t.send(1, "t0").ok(0)
    t.commit()
    t.aborted()
    h.assign("c2", [1])
    h.poll("c2", [(1, 0, "t0")])
    h.poll("c1", [(0, 3, "bad")])
    found = only(check(h), "H5 aborted-read")
    assert len(found) == 2 and "t0" in found[0] and "bad" in found[1]


def test_h6_nonmonotonic_and_skip_but_not_across_a_reassignment():
    h = clean()
    h.poll("c1", [(0, 1, "a1")])  # back to 1 after 2, same assignment
    assert "nonmonotonic" in only(check(h), "H6 poll-skip/nonmonotonic-poll")[0]
    h2 = History()
    for i in range(4):
        h2.send("p1", 0, f"a{i}").ok(i)
    h2.assign("c1", [0])
    h2.poll("c1", [(0, 0, "a0")])
    h2.poll("c1", [(0, 2, "a2"), (0, 3, "a3")])  # skips offset 1, which holds a1
    h2.assign("c2", [0])
    h2.poll("c2", [(0, 1, "a1")])
    assert "skipping known offsets [1]" in only(check(h2), "H6 poll-skip/nonmonotonic-poll")[0]
    h3 = clean()
    h3.assign("c1", [0])  # a rebalance: starting again from a committed offset is allowed
    h3.poll("c1", [(0, 1, "a1")])
    assert check(h3).valid
    h4 = History()  # a gap without a known value (a transaction marker, compaction) is no skip
    h4.send("p1", 0, "x0").ok(0)
    h4.send("p1", 0, "x2").ok(2)
    h4.assign("c1", [0])
    h4.poll("c1", [(0, 0, "x0"), (0, 2, "x2")])
    assert check(h4).valid


def test_h7_nonmonotonic_send():
    h = History()
    first = h.send("p1", 0, "a0")
    second = h.send("p1", 0, "a1")
    second.ok(0)
    first.ok(1)  # invoked first, written after: reordered
    h.assign("c1", [0])
    h.poll("c1", [(0, 0, "a1"), (0, 1, "a0")])
    assert "a0 then a1" in only(check(h), "H7 nonmonotonic-send")[0]


def test_h8_read_uncommitted():
    h = History()
    t = h.txn("tx")
    t.send(0, "t0").ok(0)
    h.assign("c1", [0])
    h.poll("c1", [(0, 0, "t0")], read_committed=True)  # before the commit was even asked
    t.commit()
    t.committed()
    assert "t0" in only(check(h), "H8 read-uncommitted")[0]
    # the same read by a read_uncommitted consumer, or after the commit, is fine
    h2 = History()
    t2 = h2.txn("tx")
    t2.send(0, "t0").ok(0)
    t2.commit()
    t2.committed()
    h2.assign("c1", [0])
    h2.poll("c1", [(0, 0, "t0")], read_committed=True)
    assert check(h2).valid


def test_info_and_unknown_transactions_are_neither_lost_nor_unseen():
    h = clean()
    h.send("p1", 0, "maybe").info()
    t = h.txn("tx")
    t.send(0, "t?").ok(5)
    t.commit()
    t.unknown()
    assert check(h).valid
