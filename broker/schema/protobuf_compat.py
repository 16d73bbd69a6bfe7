"""Compatibility of Protobuf schemas: Confluent's ``SchemaDiff`` rules over compiled
``FileDescriptorProto`` messages.

``differences(original, update)`` lists every difference between two schemas (each a
``Files``: the main file, the files it imports and the schema's references), with the
names and paths of Confluent's ``Difference``; ``backward_errors(new, previous)`` is the
readable message of each one that breaks BACKWARD compatibility (data written with
``previous`` read with ``new``), Confluent's format::

    {errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at
    path '#/Order/2' in the new schema does not match its kind in the old schema"}

The rules (Confluent's ``SchemaDiff``, ``MessageSchemaDiff``, ``FieldSchemaDiff``,
``EnumSchemaDiff``):

* the file's package changing is PACKAGE_CHANGED (incompatible);
* messages and enums are matched by name, scope by scope: a message gone is
  MESSAGE_REMOVED (incompatible; map entries are not messages here), one added or moved
  (another message index) is compatible; enums added or removed, and enum constants
  added, removed or renamed (matched by number) are compatible;
* fields are matched by number across the whole message, oneof members included: one
  added or removed is compatible unless it is ``required`` (REQUIRED_FIELD_ADDED,
  REQUIRED_FIELD_REMOVED); a oneof member removed while its oneof stays is
  ONEOF_FIELD_REMOVED; a renamed field is compatible;
* a field's kind (scalar or enum, message, map) changing is FIELD_KIND_CHANGED; a scalar
  changing outside its group is FIELD_SCALAR_KIND_CHANGED, the groups being int32,
  uint32, int64, uint64, bool and enums; sint32 and sint64; string and bytes; fixed32
  and sfixed32; fixed64 and sfixed64; float; double; a map's key and value are compared
  the same way;
* a message-typed field changing to a message of another name (package aside) is
  FIELD_NAMED_TYPE_CHANGED; one of the same name defined by a referenced file is
  compared field by field unless both schemas reference the same subject and version
  (its own breaks are reported at the type's path, plus FIELD_NAMED_TYPE_CHANGED at the
  field's when there are any);
* ``optional`` and ``repeated`` (written labels; proto3's implicit one does not count)
  swapping on a numeric field is FIELD_NUMERIC_LABEL_CHANGED, on a string or bytes field
  compatible;
* oneofs: previously independent fields (more than one top-level field, or fields from
  different oneofs or a top-level field and a oneof's) becoming members of one oneof is
  MULTIPLE_FIELDS_MOVED_TO_ONEOF or FIELD_MOVED_TO_EXISTING_ONEOF; oneofs added or
  removed, members added, and a member moved out to a top-level field are compatible.

Deviations from Confluent's code: differences are reported in a deterministic order and
once each (Confluent repeats a referenced type's differences for every field using it);
Confluent's registry formats each message with "new" and "old" swapped for FORWARD
checks, which ``Difference.message(new=..., old=...)`` allows (``backward_errors`` says
"new" for the reading schema).

Paths are Confluent's: ``#/`` then message names, oneof name and field number
(``#/Order/Line/2``, ``#/Order/payment/5``). Pure functions over descriptors;
thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from google.protobuf import descriptor_pb2

from broker.schema.base import SchemaReference
from broker.schema.protobuf_text import SCALAR_NAMES, syntax_of

PACKAGE_CHANGED = "PACKAGE_CHANGED"
MESSAGE_ADDED = "MESSAGE_ADDED"
MESSAGE_REMOVED = "MESSAGE_REMOVED"
MESSAGE_MOVED = "MESSAGE_MOVED"
ENUM_ADDED = "ENUM_ADDED"
ENUM_REMOVED = "ENUM_REMOVED"
ENUM_CONST_ADDED = "ENUM_CONST_ADDED"
ENUM_CONST_CHANGED = "ENUM_CONST_CHANGED"
ENUM_CONST_REMOVED = "ENUM_CONST_REMOVED"
FIELD_ADDED = "FIELD_ADDED"
FIELD_REMOVED = "FIELD_REMOVED"
FIELD_NAME_CHANGED = "FIELD_NAME_CHANGED"
FIELD_KIND_CHANGED = "FIELD_KIND_CHANGED"
FIELD_SCALAR_KIND_CHANGED = "FIELD_SCALAR_KIND_CHANGED"
FIELD_NAMED_TYPE_CHANGED = "FIELD_NAMED_TYPE_CHANGED"
FIELD_NUMERIC_LABEL_CHANGED = "FIELD_NUMERIC_LABEL_CHANGED"
FIELD_STRING_OR_BYTES_LABEL_CHANGED = "FIELD_STRING_OR_BYTES_LABEL_CHANGED"
REQUIRED_FIELD_ADDED = "REQUIRED_FIELD_ADDED"
REQUIRED_FIELD_REMOVED = "REQUIRED_FIELD_REMOVED"
ONEOF_ADDED = "ONEOF_ADDED"
ONEOF_REMOVED = "ONEOF_REMOVED"
ONEOF_FIELD_ADDED = "ONEOF_FIELD_ADDED"
ONEOF_FIELD_REMOVED = "ONEOF_FIELD_REMOVED"
ONEOF_FIELD_MOVED_TO_TOP_LEVEL = "ONEOF_FIELD_MOVED_TO_TOP_LEVEL"
MULTIPLE_FIELDS_MOVED_TO_ONEOF = "MULTIPLE_FIELDS_MOVED_TO_ONEOF"
FIELD_MOVED_TO_EXISTING_ONEOF = "FIELD_MOVED_TO_EXISTING_ONEOF"

COMPATIBLE_CHANGES = frozenset({
    MESSAGE_ADDED, MESSAGE_MOVED, ENUM_ADDED, ENUM_REMOVED, ENUM_CONST_ADDED, ENUM_CONST_CHANGED,
    ENUM_CONST_REMOVED, FIELD_ADDED, FIELD_REMOVED, FIELD_NAME_CHANGED, FIELD_STRING_OR_BYTES_LABEL_CHANGED,
    ONEOF_ADDED, ONEOF_REMOVED, ONEOF_FIELD_ADDED, ONEOF_FIELD_MOVED_TO_TOP_LEVEL,
})

# {path}, {new} (the reading schema) and {old} (the writing one); Confluent's wording for
# the breaks, a short one for the compatible changes (Confluent leaves those empty)
_DESCRIPTIONS = {
    PACKAGE_CHANGED: "The package at '{path}' in the {new} schema does not match the package in the {old} schema",
    MESSAGE_REMOVED: "The {new} schema is missing a MESSAGE type at path '{path}' in the {old} schema",
    FIELD_KIND_CHANGED: "The type of a field at path '{path}' in the {new} schema does not match the {old} schema",
    FIELD_SCALAR_KIND_CHANGED: ("The kind of a SCALAR field at path '{path}' in the {new} schema does not match "
                                "its kind in the {old} schema"),
    FIELD_NAMED_TYPE_CHANGED: ("The type of a MESSAGE field at path '{path}' in the {new} schema does not match "
                               "its type in the {old} schema"),
    FIELD_NUMERIC_LABEL_CHANGED: ("The label for a NUMERIC field at path '{path}' in the {new} schema does not "
                                  "match its label in the {old} schema"),
    REQUIRED_FIELD_ADDED: "A required field at path '{path}' in the {new} schema is missing in the {old} schema",
    REQUIRED_FIELD_REMOVED: "The {new} schema is missing a required field at path: '{path}' in the {old} schema",
    ONEOF_FIELD_REMOVED: "The {new} schema is missing a oneof field at path '{path}' in the {old} schema",
    MULTIPLE_FIELDS_MOVED_TO_ONEOF: ("Multiple fields in the oneof at path '{path}' in the {new} schema are outside "
                                     "a oneof in the {old} schema"),
    FIELD_MOVED_TO_EXISTING_ONEOF: ("A field in the oneof at path '{path}' in the {new} schema is outside an "
                                    "existing oneof in the {old} schema"),
    ONEOF_FIELD_MOVED_TO_TOP_LEVEL: ("The oneof field at path '{path}' in the {old} schema was moved out of its "
                                     "oneof to a top-level field in the {new} schema"),
    MESSAGE_ADDED: "A MESSAGE type at path '{path}' was added",
    MESSAGE_MOVED: "The MESSAGE type at path '{path}' has another message index",
    ENUM_ADDED: "An ENUM type at path '{path}' was added",
    ENUM_REMOVED: "The ENUM type at path '{path}' was removed",
    ENUM_CONST_ADDED: "An enum constant at path '{path}' was added",
    ENUM_CONST_CHANGED: "The enum constant at path '{path}' was renamed",
    ENUM_CONST_REMOVED: "The enum constant at path '{path}' was removed",
    FIELD_ADDED: "A field at path '{path}' was added",
    FIELD_REMOVED: "The field at path '{path}' was removed",
    FIELD_NAME_CHANGED: "The field at path '{path}' was renamed",
    FIELD_STRING_OR_BYTES_LABEL_CHANGED: "The label of the STRING or BYTES field at path '{path}' changed",
    ONEOF_ADDED: "A oneof at path '{path}' was added",
    ONEOF_REMOVED: "The oneof at path '{path}' was removed",
    ONEOF_FIELD_ADDED: "A oneof field at path '{path}' was added",
}

_F = descriptor_pb2.FieldDescriptorProto
_LEGACY_REQUIRED = descriptor_pb2.FeatureSet.LEGACY_REQUIRED

# scalar groups: the types whose values read back under one another
_SCALAR_KINDS = {
    "int32": "GENERAL_NUMBER", "int64": "GENERAL_NUMBER", "uint32": "GENERAL_NUMBER", "uint64": "GENERAL_NUMBER",
    "bool": "GENERAL_NUMBER", "sint32": "SIGNED_NUMBER", "sint64": "SIGNED_NUMBER", "string": "STRING_OR_BYTES",
    "bytes": "STRING_OR_BYTES", "fixed32": "FIXED32", "sfixed32": "FIXED32", "fixed64": "FIXED64",
    "sfixed64": "FIXED64", "float": "FLOAT", "double": "DOUBLE",
}


class Files(NamedTuple):
    """One side of a comparison: the schema's file, every file it imports (transitively)
    and its references."""

    main: descriptor_pb2.FileDescriptorProto
    dependencies: Sequence[descriptor_pb2.FileDescriptorProto] = ()
    references: Sequence[SchemaReference] = ()


@dataclass(frozen=True)
class Difference:
    """One difference between two schemas: Confluent's type and path."""

    type: str
    path: str

    @property
    def compatible(self) -> bool:
        return self.type in COMPATIBLE_CHANGES

    def description(self, new: str = "new", old: str = "old") -> str:
        return _DESCRIPTIONS[self.type].format(path=self.path, new=new, old=old)

    def message(self, new: str = "new", old: str = "old") -> str:
        """Confluent's ``{errorType:"...", description:"..."}``."""
        return f'{{errorType:"{self.type}", description:"{self.description(new, old)}"}}'


@dataclass(frozen=True)
class _Type:
    """A message or enum of one side, and where it is defined."""

    proto: Any
    package: str
    syntax: str
    reference: tuple[str, int] | None  # subject and version of its file; None: not a reference
    is_enum: bool
    is_map: bool


def _types(files: Files) -> dict[str, _Type]:
    by_reference = {r.name: (r.subject, r.version) for r in files.references}
    types: dict[str, _Type] = {}

    def walk(scope: str, messages: Any, enums: Any, package: str, syntax: str, reference: Any) -> None:
        for enum in enums:
            types[f"{scope}.{enum.name}" if scope else enum.name] = _Type(enum, package, syntax, reference, True, False)
        for message in messages:
            full = f"{scope}.{message.name}" if scope else message.name
            types[full] = _Type(message, package, syntax, reference, False, bool(message.options.map_entry))
            walk(full, message.nested_type, message.enum_type, package, syntax, reference)

    for file in files.dependencies:
        walk(file.package, file.message_type, file.enum_type, file.package, syntax_of(file),
             by_reference.get(file.name))
    # the schema's own types: one "reference" for both sides, never compared field by field
    walk(files.main.package, files.main.message_type, files.main.enum_type, files.main.package,
         syntax_of(files.main), ("", -1))
    return types


@dataclass
class _Context:
    old: dict[str, _Type]
    new: dict[str, _Type]
    path: list[str]
    visiting: set[str] = field(default_factory=set)
    diffs: list[Difference] = field(default_factory=list)
    cache: dict[tuple[str, str, frozenset[str]], list[Difference]] = field(default_factory=dict)

    def add(self, kind: str, *more: object) -> None:
        self.diffs.append(Difference(kind, "#/" + "/".join([*self.path, *(str(m) for m in more)])))


def differences(original: Files, update: Files) -> list[Difference]:
    """Every difference from ``original`` to ``update`` (module docstring), in a
    deterministic order, each once."""
    ctx = _Context(_types(original), _types(update), [])
    if original.main.package != update.main.package:
        ctx.add(PACKAGE_CHANGED)
    _compare_types(ctx, original.main.message_type, original.main.enum_type, update.main.message_type,
                   update.main.enum_type, original.main.package, update.main.package)
    return list(dict.fromkeys(ctx.diffs))


def backward_errors(new: Files, previous: Files) -> list[str]:
    """The messages of the differences that keep ``new`` from reading data written with
    ``previous``; empty when it can."""
    return [d.message() for d in differences(previous, update=new) if not d.compatible]


def _full(scope: str, name: str) -> str:
    return f"{scope}.{name}" if scope else name


def _ordered_union(first: Iterable[Any], second: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys([*first, *second]))


def _compare_types(ctx: _Context, old_messages: Any, old_enums: Any, new_messages: Any, new_enums: Any,
                   old_scope: str, new_scope: str) -> None:
    def named(messages: Any) -> dict[str, tuple[Any, int]]:
        found: dict[str, tuple[Any, int]] = {}
        for message in messages:
            if not message.options.map_entry:
                found[message.name] = (message, len(found))
        return found

    old, new = named(old_messages), named(new_messages)
    for name in _ordered_union(old, new):
        ctx.path.append(name)
        if name not in new:
            ctx.add(MESSAGE_REMOVED)
        elif name not in old:
            ctx.add(MESSAGE_ADDED)
        else:
            _compare_message(ctx, old[name][0], new[name][0], _full(old_scope, name), _full(new_scope, name))
            if old[name][1] != new[name][1]:
                ctx.add(MESSAGE_MOVED)
        ctx.path.pop()
    old_e = {e.name: e for e in old_enums}
    new_e = {e.name: e for e in new_enums}
    for name in _ordered_union(old_e, new_e):
        ctx.path.append(name)
        if name not in new_e:
            ctx.add(ENUM_REMOVED)
        elif name not in old_e:
            ctx.add(ENUM_ADDED)
        else:
            _compare_enum(ctx, old_e[name], new_e[name])
        ctx.path.pop()


def _compare_enum(ctx: _Context, old: Any, new: Any) -> None:
    old_by_number = {v.number: v.name for v in old.value}
    new_by_number = {v.number: v.name for v in new.value}
    for number in sorted(set(old_by_number) | set(new_by_number)):
        if number not in new_by_number:
            ctx.add(ENUM_CONST_REMOVED, number)
        elif number not in old_by_number:
            ctx.add(ENUM_CONST_ADDED, number)
        elif old_by_number[number] != new_by_number[number]:
            ctx.add(ENUM_CONST_CHANGED, number)


class _Fields(NamedTuple):
    by_number: dict[int, Any]
    oneof_of: dict[int, str]  # field number -> its (real) oneof's name
    oneofs: dict[str, list[int]]  # oneof name -> member numbers


def _fields(message: Any) -> _Fields:
    synthetic = {f.oneof_index for f in message.field if f.proto3_optional and f.HasField("oneof_index")}
    by_number = {f.number: f for f in message.field}
    oneof_of: dict[int, str] = {}
    oneofs: dict[str, list[int]] = {}
    for i, oneof in enumerate(message.oneof_decl):
        if i not in synthetic:
            oneofs[oneof.name] = []
    for f in message.field:
        if f.HasField("oneof_index") and f.oneof_index not in synthetic:
            name = message.oneof_decl[f.oneof_index].name
            oneof_of[f.number] = name
            oneofs[name].append(f.number)
    return _Fields(by_number, oneof_of, oneofs)


def _is_required(f: Any) -> bool:
    if f.label == _F.LABEL_REQUIRED:
        return True
    return f.HasField("options") and f.options.features.field_presence == _LEGACY_REQUIRED


def _compare_message(ctx: _Context, old: Any, new: Any, old_full: str, new_full: str) -> None:
    if old_full not in ctx.visiting:
        ctx.visiting.add(old_full)
        try:
            _compare_fields(ctx, old, new, old_full, new_full)
        finally:
            ctx.visiting.discard(old_full)
    _compare_types(ctx, old.nested_type, old.enum_type, new.nested_type, new.enum_type, old_full, new_full)


def _compare_fields(ctx: _Context, old_message: Any, new_message: Any, old_full: str, new_full: str) -> None:
    old, new = _fields(old_message), _fields(new_message)
    deleted_oneofs = {name for name, numbers in old.oneofs.items()
                      if name not in new.oneofs and not any(n in new.by_number for n in numbers)}
    # fields that could be set together before and can't any more
    for name, numbers in new.oneofs.items():
        origins: set[str] = set()
        moved_in = 0
        for number in numbers:
            if number in old.oneof_of:
                origins.add("oneof:" + old.oneof_of[number])
            elif number in old.by_number:
                origins.add(f"field:{number}")
                moved_in += 1
        if len(origins) > 1:
            ctx.add(MULTIPLE_FIELDS_MOVED_TO_ONEOF if moved_in > 1 else FIELD_MOVED_TO_EXISTING_ONEOF, name)
    for name in sorted(set(old.oneofs) | set(new.oneofs)):
        if name not in new.oneofs:
            ctx.add(ONEOF_REMOVED, name)
        elif name not in old.oneofs:
            ctx.add(ONEOF_ADDED, name)
    old_syntax = ctx.old[old_full].syntax if old_full in ctx.old else "proto3"
    new_syntax = ctx.new[new_full].syntax if new_full in ctx.new else "proto3"
    for number in sorted(set(old.by_number) | set(new.by_number)):
        before, after = old.by_number.get(number), new.by_number.get(number)
        old_oneof, new_oneof = old.oneof_of.get(number), new.oneof_of.get(number)
        if after is None:
            if old_oneof is not None:
                if old_oneof not in deleted_oneofs:
                    ctx.add(ONEOF_FIELD_REMOVED, old_oneof, number)
            else:
                ctx.add(REQUIRED_FIELD_REMOVED if _is_required(before) else FIELD_REMOVED, number)
        elif before is None:
            if new_oneof is not None:
                ctx.add(ONEOF_FIELD_ADDED, new_oneof, number)
            else:
                ctx.add(REQUIRED_FIELD_ADDED if _is_required(after) else FIELD_ADDED, number)
        else:
            if old_oneof is not None and new_oneof is None:
                ctx.add(ONEOF_FIELD_MOVED_TO_TOP_LEVEL, number)
            where = [new_oneof, str(number)] if new_oneof is not None else [str(number)]
            ctx.path.extend(where)
            if before.name != after.name:
                ctx.add(FIELD_NAME_CHANGED)
            _compare_labels_and_types(
                ctx, _label(before, old_syntax, old_oneof is not None, ctx.old),
                _label(after, new_syntax, new_oneof is not None, ctx.new),
                _type_of(before, ctx.old), _type_of(after, ctx.new))
            del ctx.path[-len(where):]


def _type_of(f: Any, types: dict[str, _Type]) -> tuple[Any, ...]:
    """("scalar", name) for scalars and enums (("enum", full name)), ("map", key, value),
    ("message", full name)."""
    scalar = SCALAR_NAMES.get(f.type)
    if scalar is not None:
        return ("scalar", scalar)
    full = f.type_name.lstrip(".")
    info = types.get(full)
    if info is not None and info.is_enum:
        return ("enum", full)
    if info is not None and info.is_map and f.label == _F.LABEL_REPEATED:
        key, value = sorted(info.proto.field, key=lambda e: e.number)[:2]
        return ("map", _type_of(key, types), _type_of(value, types))
    return ("message", full)


def _label(f: Any, syntax: str, in_oneof: bool, types: dict[str, _Type]) -> str | None:
    """The label written in the ``.proto`` text (Confluent compares those): None for
    oneof members, map fields and proto3's implicit presence."""
    if in_oneof or _type_of(f, types)[0] == "map":
        return None
    if f.label == _F.LABEL_REPEATED:
        return "repeated"
    if _is_required(f):
        return "required"
    if syntax == "proto2" or f.proto3_optional:
        return "optional"
    return None


def _kind(t: tuple[Any, ...]) -> str:
    return {"scalar": "SCALAR", "enum": "SCALAR", "map": "MAP"}.get(t[0], "MESSAGE")


def _scalar_kind(t: tuple[Any, ...]) -> str:
    return "GENERAL_NUMBER" if t[0] == "enum" else _SCALAR_KINDS[t[1]]


def _compare_labels_and_types(ctx: _Context, old_label: str | None, new_label: str | None, old: tuple[Any, ...],
                              new: tuple[Any, ...]) -> None:
    kind = _kind(old)
    if kind != _kind(new):
        ctx.add(FIELD_KIND_CHANGED)
    elif kind == "SCALAR":
        old_kind, new_kind = _scalar_kind(old), _scalar_kind(new)
        if old_kind != new_kind:
            ctx.add(FIELD_SCALAR_KIND_CHANGED)
        elif old_label is not None and new_label is not None and old_label != new_label:
            ctx.add(FIELD_STRING_OR_BYTES_LABEL_CHANGED if old_kind == "STRING_OR_BYTES"
                    else FIELD_NUMERIC_LABEL_CHANGED)
    elif kind == "MAP":
        _compare_labels_and_types(ctx, None, None, old[1], new[1])
        _compare_labels_and_types(ctx, None, None, old[2], new[2])
    else:
        _compare_message_types(ctx, old[1], new[1])


def _local_name(full: str, info: _Type) -> str:
    return full[len(info.package) + 1:] if info.package and full.startswith(info.package + ".") else full


def _compare_message_types(ctx: _Context, old_full: str, new_full: str) -> None:
    old, new = ctx.old.get(old_full), ctx.new.get(new_full)
    if old is None or new is None:
        if old_full != new_full:
            ctx.add(FIELD_NAMED_TYPE_CHANGED)
        return
    old_local, new_local = _local_name(old_full, old), _local_name(new_full, new)
    if old_local != new_local:
        ctx.add(FIELD_NAMED_TYPE_CHANGED)
        return
    if old.reference is not None and old.reference == new.reference:
        return  # both the schema's own type, or one subject and version: compared once, elsewhere
    # what a comparison finds depends on the messages already being compared (a cycle
    # stops there), so those are part of the key
    key = (old_full, new_full, frozenset(ctx.visiting))
    found = ctx.cache.get(key)
    if found is None:
        sub = _Context(ctx.old, ctx.new, old_local.split("."), set(ctx.visiting), [], ctx.cache)
        _compare_message(sub, old.proto, new.proto, old_full, new_full)
        found = ctx.cache[key] = sub.diffs
    ctx.diffs.extend(found)
    if any(not d.compatible for d in found):
        ctx.add(FIELD_NAMED_TYPE_CHANGED)


__all__ = ["COMPATIBLE_CHANGES", "Difference", "Files", "backward_errors", "differences"]
