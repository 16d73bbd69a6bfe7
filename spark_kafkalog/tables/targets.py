"""Opening a table of either format: ``open_target`` (a ``base.TableTarget`` from the
arguments an export or a bridge read takes) and ``topic_id_text`` (Kafka's spelling of the
topic id a table stores).

Thread-safety: pure functions; the target returned is used by one thread at a time.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping

from .base import TableError, TableTarget

__all__ = ["TABLE_FORMATS", "open_target", "topic_id_text"]

TABLE_FORMATS = ("iceberg", "delta")


def topic_id_text(topic_id) -> str | None:
    """Kafka's spelling of a topic id (base64 URL-safe, unpadded: ``Uuid.toString``)."""
    if topic_id is None:
        return None
    if isinstance(topic_id, uuid.UUID):
        if topic_id.int == 0:
            return None
        return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()
    return str(topic_id)


def open_target(fmt: str, table: str, *, topic: str, catalog_uri: str | None = None,
                catalog_properties: Mapping[str, str] | None = None,
                storage_options: Mapping[str, str] | None = None) -> TableTarget:
    """The ``TableTarget`` of ``fmt`` for ``table`` (see ``iceberg.py`` and ``delta.py``)."""
    if fmt == "iceberg":
        from .iceberg import IcebergTarget
        return IcebergTarget(table, topic=topic, catalog_uri=catalog_uri,
                             catalog_properties=dict(catalog_properties or {}))
    if fmt == "delta":
        if catalog_uri is not None:
            raise TableError("a Delta table is a path or an object-store URI: no catalog (--catalog-uri is Iceberg's)")
        from .delta import DeltaTarget
        return DeltaTarget(table, topic=topic, storage_options=dict(storage_options or {}))
    raise TableError(f"unknown table format {fmt!r}: choose one of {', '.join(TABLE_FORMATS)}")
