"""Executor side of typed reads: a binary Kafka batch in, the typed rows out.

Owns ``TypedBatchBuilder`` (what the readers use instead of ``schema.SparkBatchBuilder``
when ``valueFormat`` / ``keyFormat`` is set), ``FieldDecoder`` (one column: framing,
grouping by writer schema, decoding, placing the rows back) and ``MalformedRecordError``
(FAILFAST).

How a batch is decoded: ``SparkBatchBuilder`` first builds Spark's Kafka columns (binary
key and value; the headers too when ids may be in headers). Then, per typed column:

1. Framing (``confluent``): the writer's id of each record, from its
   ``__value_schema_id`` / ``__key_schema_id`` header when it has one, else from the
   payload's prefix (magic 0 + int32 id, magic 1 + GUID, Protobuf's message indexes):
   ``broker.schema.framing``. The common case, magic 0 and no id header (Protobuf: and the
   indexes ``[0]``), is read column-wise with numpy; the others record by record. A
   record whose prefix is not a frame (another magic byte, too short) is bad.
   ``none``: every record is written with the reader schema.
2. Records are grouped by writer schema (and Protobuf message); each group's payloads
   (the prefix cut off) are decoded at once: Avro with ``formats.avro.decode`` (the
   writer resolved to the reader schema), Protobuf with ``broker.schema.protobuf_arrow``,
   JSON with ``broker.schema.json_arrow`` (fields matched by name). A writer id the
   partition's catalog lacks is fetched once per executor process
   (``registry.fetch_entry``); one no source knows makes its records bad. With several
   reader schemas (a struct of records), the writer's record full name picks the member
   and the other members are null; a writer of another record is bad.
3. The groups' arrays are put back in record order and cast to the Arrow type pyspark
   expects of the Spark schema.

``string`` is UTF-8 text; invalid UTF-8 is bad. Null keys and values stay null, never bad.

Bad records (per ``mode``): PERMISSIVE, the column is null and the raw bytes go to the
corrupt-record column; FAILFAST, ``MalformedRecordError`` naming the topic, partition,
offset and why (the first bad record of the batch); DROPMALFORMED, the row is left out.

Invariants: ``TypedBatchBuilder.build`` returns batches whose schema equals
``to_arrow_schema(TypedRead.spark_schema(...))`` (possibly with no rows after
DROPMALFORMED); rows keep their order; nothing here talks to the network except the
one-time fetch of an unknown id.

Thread-safety: a builder (and its decoders) belongs to one reading thread; the process
caches it uses (parsed schemas, fetched ids) are under locks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from broker.record.limits import INT32_MAX

from .options import AVRO, CONFLUENT, DROPMALFORMED, FAILFAST, PERMISSIVE, PROTOBUF, STRING, FieldFormat
from .registry import CatalogEntry, Member, PartitionSchemas, SchemaCatalog, TypedRead, fetch_entry

if TYPE_CHECKING:
    from ..options import ReadOptions

__all__ = ["MalformedRecordError", "TypedBatchBuilder", "FieldDecoder", "FieldResult", "range_options"]

_ID_PREFIX = 5  # magic byte 0 + int32 id


class MalformedRecordError(RuntimeError):
    """A record that cannot be decoded, in FAILFAST mode."""


def range_options(options: ReadOptions) -> ReadOptions:
    """``options`` for the range readers of a typed read: with headers decoded when
    schema ids may be in them."""
    if options.formats.needs_headers and not options.include_headers:
        from dataclasses import replace

        return replace(options, include_headers=True)
    return options


@dataclass
class FieldResult:
    """One typed column of a batch: ``array`` (the Spark type's Arrow type), ``ids`` (the
    writer schema ids, int32; None for ``string``), ``bad`` and ``errors`` (row -> why)."""

    array: pa.Array
    ids: pa.Array | None
    bad: np.ndarray
    errors: dict[int, str] = field(default_factory=dict)


@dataclass
class _Group:
    """Records of one writer schema (``key``: ("id", n) or ("guid", g), plus Protobuf's
    message indexes), their row numbers and their payloads without the prefix."""

    key: tuple
    rows: np.ndarray
    payloads: pa.Array


class FieldDecoder:
    """Decodes one typed column (module docstring)."""

    def __init__(self, spec: FieldFormat, typed: TypedRead, schemas: PartitionSchemas | None) -> None:
        self.spec = spec
        self.typed = typed
        self.target = typed.arrow_types[spec.name]
        self.member_types = typed.member_types[spec.name]
        self.members: tuple[Member, ...] = schemas.members.get(spec.name, ()) if schemas is not None else \
            typed.members[spec.name].get("*", ())
        self.catalog = schemas.catalog if schemas is not None else SchemaCatalog()
        self.depth = typed.formats.recursive_depth
        self.union = len(self.members) > 1
        self._union_type = pa.struct([pa.field(str(m.record_name), t)
                                      for m, t in zip(self.members, self.member_types, strict=True)]) \
            if self.union else None

    # -- the column --

    def decode(self, payloads: pa.Array, headers: pa.Array | None) -> FieldResult:
        if self.spec.format == STRING:
            return self._strings(payloads)
        n = len(payloads)
        bad = np.zeros(n, dtype=bool)
        errors: dict[int, str] = {}
        ids = np.zeros(n, dtype=np.int32)
        has_id = np.zeros(n, dtype=bool)
        if self.spec.framing == CONFLUENT:
            groups = self._frames(payloads, headers, bad, errors)
        else:
            rows = np.flatnonzero(payloads.is_valid().to_numpy(zero_copy_only=False))
            groups = [_Group(("inline",), rows, payloads.take(pa.array(rows, pa.int64())))]
        pieces: list[pa.Array] = []
        placed: list[np.ndarray] = []
        for group in groups:
            array, group_bad, group_errors, schema_id = self._decode_group(group)
            pieces.append(array)
            placed.append(group.rows)
            if group_bad.any():
                bad[group.rows[group_bad]] = True
                for i, why in group_errors.items():
                    errors[int(group.rows[i])] = why
            if schema_id is not None:
                ids[group.rows] = schema_id
                has_id[group.rows] = True
        array = _place(pieces, placed, n, self.target)
        id_array = pa.array(ids, pa.int32(), mask=~has_id)
        return FieldResult(array, id_array, bad, errors)

    def _strings(self, payloads: pa.Array) -> FieldResult:
        n = len(payloads)
        bad = np.zeros(n, dtype=bool)
        try:
            return FieldResult(payloads.cast(pa.string()), None, bad)
        except pa.ArrowInvalid:
            pass
        errors: dict[int, str] = {}
        texts: list[str | None] = []
        for i, raw in enumerate(payloads.to_pylist()):
            try:
                texts.append(None if raw is None else raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                texts.append(None)
                bad[i] = True
                errors[i] = f"not UTF-8 text ({exc})"
        return FieldResult(pa.array(texts, pa.string()), None, bad, errors)

    # -- framing --

    def _frames(self, payloads: pa.Array, headers: pa.Array | None, bad: np.ndarray,
                errors: dict[int, str]) -> list[_Group]:
        """The groups of records by writer schema (module docstring, step 1)."""
        from broker.schema import framing

        n = len(payloads)
        protobuf = self.spec.format == PROTOBUF
        skip = _ID_PREFIX + (1 if protobuf else 0)
        valid = payloads.is_valid().to_numpy(zero_copy_only=False)
        if isinstance(payloads, pa.ChunkedArray):
            payloads = payloads.combine_chunks()
        if not isinstance(payloads, pa.BinaryArray):
            payloads = payloads.cast(pa.binary())
        buffers = payloads.buffers()
        offsets = np.frombuffer(buffers[1], dtype=np.int32, count=n + 1, offset=payloads.offset * 4) \
            if n else np.zeros(1, np.int32)
        data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None and n else np.zeros(0, np.uint8)
        starts = offsets[:-1].astype(np.int64)
        lengths = (offsets[1:] - offsets[:-1]).astype(np.int64)
        fast = valid & (lengths >= skip)
        if data.size:
            def byte(at: int) -> np.ndarray:
                return data[np.minimum(starts + at, data.size - 1)].astype(np.int64)

            fast &= byte(0) == framing.MAGIC_BYTE_V0
            if protobuf:
                fast &= byte(5) == 0  # message indexes [0]
            ids = (byte(1) << 24) | (byte(2) << 16) | (byte(3) << 8) | byte(4)
            fast &= ids <= INT32_MAX
        else:
            fast[:] = False
            ids = np.zeros(n, dtype=np.int64)
        if headers is not None and n:
            fast &= ~_rows_with_header(headers, framing.header_name(is_key=self.spec.is_key), n)
        groups: list[_Group] = []
        fast_rows = np.flatnonzero(fast)
        if fast_rows.size:
            unique, inverse = np.unique(ids[fast_rows], return_inverse=True)
            # (pyarrow 26 mis-sizes binary_slice without a stop)
            taken = pc.binary_slice(payloads.take(pa.array(fast_rows, pa.int64())), skip, INT32_MAX)
            for k, schema_id in enumerate(unique):
                selector = np.flatnonzero(inverse == k)
                groups.append(_Group(("id", int(schema_id), (0,) if protobuf else None), fast_rows[selector],
                                     taken if len(unique) == 1 else taken.take(pa.array(selector, pa.int64()))))
        slow_rows = np.flatnonzero(valid & ~fast)
        if slow_rows.size:
            groups += self._slow_frames(payloads, headers, slow_rows, bad, errors)
        return groups

    def _slow_frames(self, payloads: pa.Array, headers: pa.Array | None, rows: np.ndarray, bad: np.ndarray,
                     errors: dict[int, str]) -> list[_Group]:
        from broker.schema import framing

        index = pa.array(rows, pa.int64())
        raws = payloads.take(index).to_pylist()
        header_lists = headers.take(index).to_pylist() if headers is not None else [None] * len(rows)
        by_key: dict[tuple, tuple[list[int], list[bytes]]] = {}
        for row, raw, hdrs in zip(rows, raws, header_lists, strict=True):
            pairs = None if hdrs is None else [(h["key"], h["value"]) for h in hdrs]
            try:
                schema_id, pos = framing.decode_dual(raw, pairs, is_key=self.spec.is_key,
                                                     with_indexes=self.spec.format == PROTOBUF)
            except framing.FramingError as exc:
                bad[row] = True
                errors[int(row)] = str(exc)
                continue
            key = ("id", schema_id.id, schema_id.message_indexes) if schema_id.id is not None else \
                ("guid", str(schema_id.guid), schema_id.message_indexes)
            group_rows, group_payloads = by_key.setdefault(key, ([], []))
            group_rows.append(int(row))
            group_payloads.append(raw[pos:])
        return [_Group(key, np.array(r, dtype=np.int64), pa.array(p, pa.binary())) for key, (r, p) in by_key.items()]

    # -- decoding --

    def _writer(self, key: tuple) -> CatalogEntry | None:
        if key[0] == "inline":
            return self.members[0].reader
        if key[0] == "id":
            found = self.catalog.get(key[1])
            return found if found is not None else fetch_entry(self.typed.source, schema_id=key[1])
        found = self.catalog.by_guid(key[1])
        return found if found is not None else fetch_entry(self.typed.source, guid=key[1])

    def _decode_group(self, group: _Group) -> tuple[pa.Array, np.ndarray, dict[int, str], int | None]:
        n = len(group.rows)
        entry = self._writer(group.key)
        if entry is None:  # the frame's id is still reported: it says what wrote the record
            if group.key[0] == "id":
                return self._all_bad(n, f"unknown schema id {group.key[1]}: no such schema", group.key[1])
            return self._all_bad(n, f"unknown schema guid {group.key[1]}: no such schema")
        schema_id = entry.id if group.key[0] != "inline" else None  # framing none: no id in the record
        if entry.schema_type != self.spec.schema_type:
            return self._all_bad(n, f"schema id {schema_id} is a {entry.schema_type} schema, not "
                                    f"{self.spec.schema_type}", schema_id)
        try:
            writer: Any = entry.parsed()
        except Exception as exc:  # noqa: BLE001 - a schema the registry holds but this process cannot parse
            return self._all_bad(n, f"schema id {schema_id} cannot be parsed: {exc}", schema_id)
        writer_message = None
        if self.spec.format == PROTOBUF and group.key[0] == "inline":
            writer_message = writer.pool().FindMessageTypeByName(self.members[0].message)
        elif self.spec.format == PROTOBUF:
            indexes = group.key[2] if len(group.key) > 2 and group.key[2] is not None else (0,)
            try:
                writer_message = writer.message_descriptor(list(indexes))
            except IndexError:
                return self._all_bad(n, f"schema id {schema_id} has no message at indexes {list(indexes)}",
                                     schema_id)
        k = self._member_index(entry, writer, writer_message)
        if k is None:
            names = ", ".join(str(m.record_name) for m in self.members)
            written = writer_message.full_name if writer_message is not None else _record_name(entry, writer)
            return self._all_bad(n, f"schema id {schema_id} writes {written}, none of the records read ({names})",
                                 schema_id)
        member, member_type = self.members[k], self.member_types[k]
        result: Any  # each decoder's result: array, bad, errors
        if self.spec.format == AVRO:
            from .avro import decode as avro_decode

            same = member.reader.id is not None and member.reader.id == entry.id
            reader: Any = None if same else member.reader.parsed()
            result = avro_decode(group.payloads, writer, reader, recursive_depth=self.depth)
        elif self.spec.format == PROTOBUF:
            from broker.schema.protobuf_arrow import decode as protobuf_decode

            result = protobuf_decode(group.payloads, writer_message, member_type)
        else:
            from broker.schema.json_arrow import decode as json_decode

            result = json_decode(group.payloads, member_type)
        array = result.array
        if array.type != member_type:
            array = array.cast(member_type)
        bad = np.asarray(result.bad, dtype=bool)
        errors = _errors(result, bad)
        if self.union:
            array = self._wrap(array, k)
        return array.cast(self.target) if array.type != self.target else array, bad, errors, schema_id

    def _member_index(self, entry: CatalogEntry, writer: Any, writer_message: Any) -> int | None:
        if not self.union:
            return 0
        name = writer_message.full_name if writer_message is not None else _record_name(entry, writer)
        for k, member in enumerate(self.members):
            if member.record_name == name:
                return k
        return None

    def _wrap(self, array: pa.Array, k: int) -> pa.Array:
        assert self._union_type is not None
        n = len(array)
        children = [array if j == k else pa.nulls(n, t) for j, t in enumerate(self.member_types)]
        return pa.StructArray.from_arrays(children, fields=list(self._union_type), mask=array.is_null())

    def _all_bad(self, n: int, why: str, schema_id: int | None = None
                 ) -> tuple[pa.Array, np.ndarray, dict[int, str], int | None]:
        return pa.nulls(n, self.target), np.ones(n, dtype=bool), dict.fromkeys(range(n), why), schema_id


def _record_name(entry: CatalogEntry, writer: Any) -> str | None:
    if entry.schema_type == "AVRO":
        return getattr(writer, "name", None)
    if entry.schema_type == "JSON":
        from broker.schema.json_arrow import record_name

        return record_name(writer)
    return None


def _errors(result: Any, bad: np.ndarray) -> dict[int, str]:
    """Why each bad row is bad: a decoder's ``reason(i)`` when it has one (Avro), else its
    ``errors`` (a mapping row -> why, or (row, why) pairs), else a generic reason."""
    reason = getattr(result, "reason", None)
    errors = result.errors
    out: dict[int, str] = {}
    if isinstance(errors, dict):
        out = {int(k): str(v) for k, v in errors.items()}
    elif isinstance(errors, Sequence) and not isinstance(errors, str):
        out = {int(e[0]): str(e[1]) for e in errors if isinstance(e, tuple) and len(e) == 2}
    for i in np.flatnonzero(bad):
        if int(i) not in out:
            why = reason(int(i)) if callable(reason) else None
            out[int(i)] = why or "the payload could not be decoded"
    return out


def _rows_with_header(headers: pa.Array, name: str, n: int) -> np.ndarray:
    """Which rows have a header called ``name``."""
    out = np.zeros(n, dtype=bool)
    if headers.null_count == n:
        return out
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    flat = headers.flatten()
    if len(flat) == 0:
        return out
    matches = pc.equal(flat.field("key"), name).to_numpy(zero_copy_only=False)
    if matches.any():
        parents = pc.list_parent_indices(headers).to_numpy(zero_copy_only=False)
        out[parents[np.asarray(matches, dtype=bool)]] = True
    return out


def _place(pieces: list[pa.Array], placed: list[np.ndarray], n: int, typ: pa.DataType) -> pa.Array:
    """The groups' arrays put back in row order; rows in no group are null."""
    if len(pieces) == 1 and len(placed[0]) == n and n and (np.diff(placed[0]) > 0).all():
        return pieces[0]
    covered = np.zeros(n, dtype=bool)
    for rows in placed:
        covered[rows] = True
    rest = np.flatnonzero(~covered)
    order = np.concatenate([*placed, rest]) if placed else rest
    combined = pa.concat_arrays([*pieces, pa.nulls(len(rest), typ)]) if pieces else pa.nulls(n, typ)
    inverse = np.empty(n, dtype=np.int64)
    inverse[order.astype(np.int64)] = np.arange(n, dtype=np.int64)
    return combined.take(pa.array(inverse, pa.int64()))


class TypedBatchBuilder:
    """Binary Kafka batches of one topic-partition -> typed rows (module docstring)."""

    def __init__(self, options: ReadOptions, typed: TypedRead, schemas: PartitionSchemas | None,
                 topic: str, partition: int) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        from ..schema import SparkBatchBuilder

        self.topic, self.partition = topic, partition
        self.formats = typed.formats
        self.include_headers = options.include_headers
        self.headers_read = range_options(options).include_headers
        self._binary = SparkBatchBuilder(topic, partition, self.headers_read)
        self.schema = to_arrow_schema(typed.spark_schema(options.include_headers), timezone="UTC")
        self._decoders = [FieldDecoder(spec, typed, schemas) for spec in typed.formats.fields]

    def build(self, decoded: pa.RecordBatch) -> pa.RecordBatch:
        binary = self._binary.build(decoded)
        headers = binary.column("headers") if self.headers_read else None
        results = {d.spec.name: d.decode(binary.column(d.spec.name), headers) for d in self._decoders}
        n = binary.num_rows
        bad = np.zeros(n, dtype=bool)
        for result in results.values():
            bad |= result.bad
        mode = self.formats.mode
        if mode == FAILFAST and bad.any():
            raise self._failure(binary, results, int(np.flatnonzero(bad)[0]))
        columns: list[pa.Array] = []
        for name in self.schema.names:
            if name in results:
                columns.append(results[name].array)
            elif name in binary.schema.names and (name != "headers" or self.include_headers):
                columns.append(binary.column(name))
            else:
                columns.append(self._extra(name, binary, results))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        if mode == DROPMALFORMED and bad.any():
            batch = batch.filter(pa.array(~bad))
        return batch

    def _extra(self, name: str, binary: pa.RecordBatch, results: dict[str, FieldResult]) -> pa.Array:
        for spec in self.formats.fields:
            result = results[spec.name]
            if name == spec.id_column:
                assert result.ids is not None
                return result.ids
            if name == spec.corrupt_column and self.formats.mode == PERMISSIVE:
                raw = binary.column(spec.name)
                return pc.if_else(pa.array(result.bad), raw, pa.nulls(len(raw), pa.binary()))
        raise AssertionError(name)

    def _failure(self, binary: pa.RecordBatch, results: dict[str, FieldResult], row: int) -> MalformedRecordError:
        offset = binary.column("offset")[row].as_py()
        for spec in self.formats.fields:
            result = results[spec.name]
            if result.bad[row]:
                why = result.errors.get(row, "the payload could not be decoded")
                return MalformedRecordError(
                    f"Malformed record at offset {offset} of topic {self.topic} partition {self.partition}: its "
                    f"{spec.name} cannot be read as {spec.format} ({why}). mode=FAILFAST stops at the first "
                    "malformed record; mode=PERMISSIVE puts its bytes in "
                    f"{spec.corrupt_column}, mode=DROPMALFORMED leaves it out")
        raise AssertionError(row)
