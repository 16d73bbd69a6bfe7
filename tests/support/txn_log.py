"""A partition log with transactions, written straight with the storage engine (broker
stopped), for the read_committed tests of the fetcher and of ``kafkalog consume``.

Offsets: 0-1 data, 2-3 committed (marker 8), 4 aborted (marker 6), 5 data, 7 committed
(marker 9), 10-11 aborted (marker 12), 13 data, 14 still open: log end 15, LSO 14.
"""

from __future__ import annotations

from broker.record.batch import encode_batch
from broker.record.control import ControlRecordType, encode_end_txn_marker_batch

TS0 = 1_700_000_000_000


def write_transactions(log_dir, topic: str) -> None:
    """Append to ``topic``-0 (broker stopped): data, transactions and their markers."""
    from broker.log.config import LogConfig
    from broker.log.unified_log import UnifiedLog
    from broker.log.validator import AppendOrigin

    ulog = UnifiedLog.create(log_dir / f"{topic}-0", LogConfig.from_props({}))
    seqs: dict[int, int] = {}

    def data(*values, pid=None):
        recs = [(b"k", v, TS0 + i) for i, v in enumerate(values)]
        if pid is None:
            ulog.append_as_leader(encode_batch(recs))
            return
        seq = seqs.get(pid, 0)
        seqs[pid] = seq + len(values)
        ulog.append_as_leader(encode_batch(recs, producer_id=pid, producer_epoch=0,
                                           base_sequence=seq, is_transactional=True))

    def marker(kind, pid):
        ulog.append_as_leader(encode_end_txn_marker_batch(
            kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=TS0),
            origin=AppendOrigin.COORDINATOR)

    data(b"a", b"b")                          # 0-1
    data(b"c", b"d", pid=1000)                # 2-3   committed at 8
    data(b"e", pid=2000)                      # 4     aborted at 6
    data(b"f")                                # 5
    marker(ControlRecordType.ABORT, 2000)     # 6
    data(b"g", pid=2000)                      # 7     committed at 9
    marker(ControlRecordType.COMMIT, 1000)    # 8
    marker(ControlRecordType.COMMIT, 2000)    # 9
    data(b"h", b"i", pid=3000)                # 10-11 aborted at 12
    marker(ControlRecordType.ABORT, 3000)     # 12
    data(b"j")                                # 13
    data(b"k", pid=4000)                      # 14    still open: LSO 14
    assert ulog.log_end_offset == 15 and ulog.last_stable_offset == 14
    ulog.close()
