"""The history checker of the reliability suite (tests/support/history.py), on histories
built to contain each anomaly H1-H8 (and a clean one that passes), as jepsen-io/redpanda
tests its checker."""

from __future__ import annotations

from tests.support.history import CHECKS, SHARE_CHECKS, History, check, check_share


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


# --- the share-group model (S1-S5) ---

def clean_share() -> History:
    h = History()
    for i in range(3):
        h.send("p1", 0, f"a{i}").ok(i)
    h.deliver("c1", [(0, 0, "a0", 1), (0, 1, "a1", 1)])
    h.deliver("c2", [(0, 2, "a2", 1)])
    h.acknowledge("c1", [(0, 0, "accept"), (0, 1, "release")]).ok()
    h.deliver("c2", [(0, 1, "a1", 2)])
    h.acknowledge("c2", [(0, 1, "accept"), (0, 2, "reject")]).ok()
    return h


def share_only(report, name: str) -> list[str]:
    assert set(SHARE_CHECKS) == set(report.anomalies)
    others = {k: v for k, v in report.anomalies.items() if v and k != name}
    assert not others, others
    return report.anomalies[name]


def test_a_clean_share_history_passes():
    r = check_share(clean_share())
    assert r.valid and r.sends_ok == 3 and r.values_polled == 3, r.anomalies


def test_s1_acknowledged_twice():
    h = clean_share()
    h.acknowledge("c3", [(0, 0, "accept")]).ok()
    assert share_only(check_share(h), "S1 acknowledged-twice") == ["(0, 0) accepted twice"]


def test_s2_redelivered_after_ack_and_a_refused_ack_is_no_ack():
    h = clean_share()
    h.acknowledge("c3", [(0, 1, "accept")]).fail()  # refused: INVALID_RECORD_STATE
    h.deliver("c3", [(0, 2, "a2", 2)])  # rejected before: must never come back
    found = share_only(check_share(h, limit=5), "S2 redelivered-after-ack")
    assert found == ["(0, 2) delivered to c3 after its acknowledgement"]


def test_s3_delivery_counts():
    h = clean_share()
    h.send("p1", 0, "a3").ok(3)
    h.deliver("c1", [(0, 3, "a3", 1)])
    h.deliver("c2", [(0, 3, "a3", 1)])  # the same count twice
    assert share_only(check_share(h), "S3 delivery-count")
    h2 = History()
    h2.send("p", 0, "x").ok(0)
    h2.deliver("c", [(0, 0, "x", 1)])
    h2.deliver("c", [(0, 0, "x", 2)])
    h2.deliver("c", [(0, 0, "x", 3)])
    assert share_only(check_share(h2, limit=2), "S3 delivery-count")
    h3 = History()
    h3.send("p", 0, "y").ok(0)
    h3.deliver("c", [(0, 0, "y", 2)])  # the first delivery's response was lost to a broker crash
    h3.deliver("c", [(0, 0, "y", 3)])
    assert share_only(check_share(h3), "S3 delivery-count")
    assert not share_only(check_share(h3, crashes=True), "S3 delivery-count")
    h3.deliver("c", [(0, 0, "y", 3)])  # counts still only grow
    assert share_only(check_share(h3, crashes=True), "S3 delivery-count")


def test_s4_not_delivered():
    h = clean_share()
    h.send("p1", 0, "a3").ok(3)
    assert share_only(check_share(h), "S4 not-delivered") == ["(0, 3) acknowledged by the producer, never delivered"]
    assert check_share(h, drained=False).valid
    h2 = History()
    h2.send("p", 0, "x").ok(0)
    h2.deliver("c", [(0, 0, "x", 1)])
    h2.acknowledge("c", [(0, 0, "release")]).ok()
    assert share_only(check_share(h2), "S4 not-delivered")
    assert check_share(h2, limit=1).valid  # released at the limit: archived, done


def test_s5_inconsistent_value():
    h = clean_share()
    h.send("p1", 0, "a3").ok(3)
    h.deliver("c4", [(0, 3, "zz", 1)])
    assert share_only(check_share(h), "S5 inconsistent-value")
