"""The share coordinator's lazy merge (broker/server/share/coordinator.py): ShareUpdates are
queued and folded, all at once, when the state is read or snapshotted.

* ``fold_updates`` of a sequence equals ``merge_batches`` applied one update at a time
  (hypothesis, random states and updates with moving start offsets);
* a real ``ShareCoordinator`` over the broker's storage layers (``__share_group_state``
  on disk): after random writes, ``read`` equals the one-at-a-time model, across the
  snapshot threshold, and again after a restart replays the topic; an older state epoch
  is still fenced.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol import ErrorCode
from broker.server.errors import ApiError
from broker.server.share.coordinator import ShareCoordinator, fold_updates, merge_batches
from broker.server.share.partition import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, StateBatch
from tests.support.storage_node import StorageNode

STATES = (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED)


@st.composite
def state_batches(draw, lo: int = 0, hi: int = 200) -> list[StateBatch]:
    out = []
    for _ in range(draw(st.integers(0, 6))):
        first = draw(st.integers(lo, hi))
        last = draw(st.integers(first, min(first + 30, hi + 30)))
        out.append(StateBatch(first, last, draw(st.sampled_from(STATES)), draw(st.integers(0, 5))))
    return out


@st.composite
def updates(draw) -> list[tuple[int, list[StateBatch]]]:
    start = 0
    out = []
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.booleans()):
            new_start = -1
        else:
            start = new_start = start + draw(st.integers(0, 25))
        out.append((new_start, draw(state_batches(max(start - 10, 0), start + 150))))
    return out


def one_at_a_time(start: int, batches: list[StateBatch], ups) -> tuple[int, list[StateBatch]]:
    start, batches = merge_batches(start, batches, -1, [])  # as persisted
    for new_start, delta in ups:
        start, batches = merge_batches(start, batches, new_start, delta)
    return start, batches


@settings(max_examples=300, deadline=None)
@given(state_batches(), updates())
def test_fold_equals_merging_one_update_at_a_time(batches, ups) -> None:
    assert fold_updates(0, batches, ups) == one_at_a_time(0, batches, ups)


class Node(StorageNode):
    """The broker's storage and topic layers and a share coordinator, in process."""

    def __init__(self, log_dir: Path, **props: object) -> None:
        super().__init__(log_dir, **{"share.coordinator.state.topic.num.partitions": 1, **props})
        self.coordinator = ShareCoordinator(self.topics, self.config, scheduler=self.manager.scheduler)
        self.coordinator.startup()

    def close(self) -> None:
        self.coordinator.shutdown()
        super().close()


@settings(max_examples=25, deadline=None)
@given(updates(), st.integers(1, 6))
def test_reads_and_a_restart_see_every_update(tmp_path_factory, ups, per_snapshot) -> None:
    log_dir = tmp_path_factory.mktemp("share-state")
    key = ("g", uuid.uuid4(), 0)
    props = {"share.coordinator.snapshot.update.records.per.snapshot": per_snapshot}
    node = Node(log_dir, **props)
    try:
        node.coordinator.initialize(key, state_epoch=1, start_offset=0)
        model = (0, [])
        for i, (new_start, delta) in enumerate(ups):
            node.coordinator.write(key, 1, 0, new_start, delta)
            model = one_at_a_time(*model, [(new_start, delta)])
            if i % 3 == 2:  # reads in between fold what is queued
                got = node.coordinator.read(key)
                assert (got.start_offset, got.batches) == model
        got = node.coordinator.read(key)
        assert (got.start_offset, got.batches) == model
    finally:
        node.close()
    node = Node(log_dir, **props)
    try:
        got = node.coordinator.read(key)
        assert (got.start_offset, got.batches) == model
        assert got.updates == len(ups) % per_snapshot if per_snapshot > 1 else got.updates == 0
    finally:
        node.close()


def test_an_older_state_epoch_is_fenced_and_changes_nothing(tmp_path) -> None:
    node = Node(tmp_path / "logs")
    key = ("g", uuid.uuid4(), 3)
    try:
        node.coordinator.initialize(key, state_epoch=2, start_offset=10)
        node.coordinator.write(key, 2, 0, -1, [StateBatch(10, 19, ACKNOWLEDGED, 1)])
        with pytest.raises(ApiError) as err:
            node.coordinator.write(key, 1, 0, 30, [StateBatch(30, 39, ARCHIVED, 1)])
        assert err.value.code == ErrorCode.FENCED_STATE_EPOCH
        got = node.coordinator.read(key)
        assert got.start_offset == 20 and got.batches == [] and got.state_epoch == 2
    finally:
        node.close()
