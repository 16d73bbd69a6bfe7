"""Tiered storage (Kafka's KIP-405) for this single broker: closed segments copied to remote
storage, deleted locally past local retention, and still served to every client.

Modules:
- ``storage_manager.py``: ``FileSystemRemoteStorageManager`` (pyarrow file systems: a local
  directory, ``file:``, ``s3://``, ``gs://``, ``abfs://``, ``hdfs://``), the remote layout
  (Kafka's own file names under ``<root>/<topic>-<partition>/``) and the crash-safety rules
  (atomic objects, manifest written last and deleted first, garbage swept);
- ``metadata.py``: ``RemoteLogSegmentMetadata`` and its manifest
  ``<20-digit base>.remote-segment.json``, the metadata store (a segment exists remotely iff
  its manifest exists; replaces Kafka's ``__remote_log_metadata`` topic);
- ``log_manager.py``: ``RemoteLogManager``, the periodic copy / local retention / remote
  retention pass, the remote reads for Fetch and ListOffsets, and the deletion of a
  topic's remote segments when it is deleted or its remote storage turned off;
- ``reader.py``: index lookups and batch reads on remote segments (ranged reads);
- ``errors.py``: ``OffsetMovedToTieredStorageError``, ``RemoteStorageError``;
- ``stats.py``: ``RemoteStorageStats``, the counters of Kafka's remote storage metrics.

Layering: part of the log layer (imports ``broker.log`` and ``broker.record`` only, never
``broker.protocol`` or ``broker.server``). Broker keys: ``remote.log.storage.system.enable``,
``remote.log.manager.task.interval.ms``, ``remote.log.storage.manager.class.name``,
``remote.log.storage.manager.impl.prefix`` (``rsm.config.``: ``rsm.config.storage.uri`` and
``fs.s3a.*`` keys); topic keys: ``remote.storage.enable``, ``local.retention.ms``,
``local.retention.bytes``, ``remote.log.copy.disable`` and ``remote.log.delete.on.disable``
(KIP-950). User manual: docs/broker/tiered-storage.md.
"""
