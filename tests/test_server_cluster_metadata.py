"""ClusterMetadataStore (broker/server/cluster_metadata.py): sections written atomically
to every live log directory; the highest readable epoch wins at load; an aborted change
writes nothing; no writable directory is a storage error and changes nothing."""

from __future__ import annotations

import json

import pytest

from broker.log.errors import KafkaStorageError
from broker.server.cluster_metadata import METADATA_FILE, ClusterMetadataStore


def test_update_get_and_reload(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    s = ClusterMetadataStore(dirs, 1)
    s.load()
    assert s.get("x", []) == []
    s.update("x", lambda cur: cur + [1], [])
    s.update("x", lambda cur: cur + [2], [])
    got = s.get("x")
    got.append(99)  # a copy: the store is unchanged
    assert s.get("x") == [1, 2]
    for d in dirs:
        assert json.loads((d / METADATA_FILE).read_text())["epoch"] == 2
    again = ClusterMetadataStore(dirs, 1)
    again.load()
    assert again.get("x") == [1, 2] and again.epoch == 2


def test_highest_readable_epoch_wins(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    s = ClusterMetadataStore([a, b], 1)
    s.update("x", lambda _: "old", None)
    s.live_dirs = lambda: [a]  # b offline for the next change
    s.update("x", lambda _: "new", None)
    reloaded = ClusterMetadataStore([a, b], 1)
    reloaded.load()
    assert reloaded.get("x") == "new"
    (a / METADATA_FILE).write_text("{torn")  # a torn copy is skipped
    reloaded = ClusterMetadataStore([a, b], 1)
    reloaded.load()
    assert reloaded.get("x") == "old"


def test_aborted_change_and_no_writable_directory(tmp_path):
    s = ClusterMetadataStore([tmp_path / "a"], 1)
    s.update("x", lambda _: 1, None)

    def boom(_):
        raise ValueError("refused")

    with pytest.raises(ValueError):
        s.update("x", boom, None)
    assert s.get("x") == 1 and s.epoch == 1
    s.live_dirs = lambda: []
    with pytest.raises(KafkaStorageError):
        s.update("x", lambda _: 2, None)
    assert s.get("x") == 1
