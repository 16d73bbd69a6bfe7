"""Test support: one transaction driven step by step with raw protocol requests
(``RawClient``), for the coordinator's error codes and the crash/restart tests, where a
real client would retry or hide what the broker answered.

``RawTxn(client, transactional_id)``: ``init()``, ``add(topic, partition)``,
``produce(topic, partition, values)`` (a transactional batch with the next sequence),
``add_offsets(group)``, ``txn_offset_commit(group, topic, partition, offset)``, ``end(commit)``;
each returns the response's error code (``init`` sets ``producer_id`` / ``epoch``).
Transaction version 2: ``produce(..., version=12)`` (adds the partition itself) and
``end_v5(commit)`` (returns the code and takes the producer id / epoch it answers).
``describe`` / ``fetch_partition`` / ``committed_offset`` read the broker's view.
Thread-safety: test-process only.
"""

from __future__ import annotations

import time

from broker.protocol import ApiKey
from broker.record.batch import encode_batch


def create_topic(client, name: str, partitions: int = 1) -> None:
    r = client.request(ApiKey.CREATE_TOPICS, 4, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                    "configs": []}], "timeout_ms": 10000, "validate_only": False})
    assert r.topics[0].error_code == 0, r


class RawTxn:
    def __init__(self, client, transactional_id: str, timeout_ms: int = 60000) -> None:
        self.c = client
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.producer_id = -1
        self.epoch = -1
        self.sequences: dict[tuple[str, int], int] = {}

    def init(self, version: int = 4, timeout_ms: int | None = None) -> int:
        r = self.c.request(ApiKey.INIT_PRODUCER_ID, version, {
            "transactional_id": self.transactional_id,
            "transaction_timeout_ms": self.timeout_ms if timeout_ms is None else timeout_ms,
            "producer_id": -1, "producer_epoch": -1})
        if r.error_code == 0:
            self.producer_id, self.epoch = r.producer_id, r.producer_epoch
            self.sequences.clear()
        return r.error_code

    def add(self, topic: str, partition: int = 0, version: int = 3, epoch: int | None = None) -> int:
        r = self.c.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, {
            "v3_and_below_transactional_id": self.transactional_id,
            "v3_and_below_producer_id": self.producer_id,
            "v3_and_below_producer_epoch": self.epoch if epoch is None else epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [partition]}]})
        return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code

    def produce(self, topic: str, partition: int, values: list[bytes], epoch: int | None = None,
                transactional: bool = True, version: int = 8) -> int:
        seq = self.sequences.get((topic, partition), 0)
        now = int(time.time() * 1000)  # old timestamps would roll a segment per batch (segment.ms)
        batch = encode_batch([(None, v, now) for v in values], producer_id=self.producer_id,
                             producer_epoch=self.epoch if epoch is None else epoch, base_sequence=seq,
                             is_transactional=transactional)
        r = self.c.request(ApiKey.PRODUCE, version, {
            "transactional_id": self.transactional_id, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
        code = r.responses[0].partition_responses[0].error_code
        if code == 0:
            self.sequences[(topic, partition)] = seq + len(values)
        return code

    def add_offsets(self, group: str, version: int = 3) -> int:
        return self.c.request(ApiKey.ADD_OFFSETS_TO_TXN, version, {
            "transactional_id": self.transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.epoch, "group_id": group}).error_code

    def txn_offset_commit(self, group: str, topic: str, partition: int, offset: int, version: int = 3) -> int:
        r = self.c.request(ApiKey.TXN_OFFSET_COMMIT, version, {
            "transactional_id": self.transactional_id, "group_id": group, "producer_id": self.producer_id,
            "producer_epoch": self.epoch, "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "committed_offset": offset,
                                                        "committed_leader_epoch": -1,
                                                        "committed_metadata": ""}]}]})
        return r.topics[0].partitions[0].error_code

    def end(self, commit: bool, version: int = 3, epoch: int | None = None) -> int:
        return self.c.request(ApiKey.END_TXN, version, {
            "transactional_id": self.transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.epoch if epoch is None else epoch, "committed": commit}).error_code


    def end_v5(self, commit: bool, epoch: int | None = None) -> int:
        """EndTxn v5 (transaction version 2); on success the answered id / epoch are used next."""
        r = self.c.request(ApiKey.END_TXN, 5, {
            "transactional_id": self.transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.epoch if epoch is None else epoch, "committed": commit})
        if r.error_code == 0:
            if (r.producer_id, r.producer_epoch) != (self.producer_id, self.epoch):
                self.sequences.clear()
            self.producer_id, self.epoch = r.producer_id, r.producer_epoch
        else:
            assert (r.producer_id, r.producer_epoch) == (-1, -1), r
        return r.error_code


def describe(client, transactional_id: str):
    r = client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]})
    return r.transaction_states[0]


def fetch_partition(client, topic: str, partition: int = 0, isolation: int = 1):
    """The Fetch v11 partition response from offset 0 (records, LSO, aborted list)."""
    r = client.request(ApiKey.FETCH, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": isolation,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                     "fetch_offset": 0, "log_start_offset": -1,
                                                     "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    return r.responses[0].partitions[0]


def committed_offset(client, group: str, topic: str, partition: int = 0) -> int:
    r = client.request(ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": [
        {"name": topic, "partition_indexes": [partition]}], "require_stable": False})
    return r.topics[0].partitions[0].committed_offset


def data_values(records: bytes | None) -> list[bytes]:
    """The values of the data (non-control) records in ``records``."""
    from broker.record.batch import decode_records, iter_batch_headers, records_payload

    out = []
    buf = bytes(records or b"")
    for pos, header in iter_batch_headers(buf):
        if header.is_control:
            continue
        out += [r.value for r in decode_records(records_payload(buf, pos, header, 1 << 26), header)]
    return out


def committed_values(partition) -> list[bytes]:
    """What a read_committed consumer returns from a Fetch partition response: the data
    records below the LSO minus those of the aborted transactions in its aborted list (a
    batch of an aborted producer from its first offset until that producer's marker)."""
    from broker.record.batch import decode_records, iter_batch_headers, records_payload

    aborted = sorted((a.first_offset, a.producer_id) for a in partition.aborted_transactions or ())
    open_aborts: set[int] = set()
    out = []
    buf = bytes(partition.records or b"")
    for pos, header in iter_batch_headers(buf):
        while aborted and aborted[0][0] <= header.base_offset:
            open_aborts.add(aborted.pop(0)[1])
        if header.is_control:
            open_aborts.discard(header.producer_id)
            continue
        if header.producer_id in open_aborts:
            continue
        out += [r.value for r in decode_records(records_payload(buf, pos, header, 1 << 26), header)]
    return out
