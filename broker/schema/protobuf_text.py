"""A ``FileDescriptorProto`` rendered as ``.proto`` text: the canonical string of a
Protobuf schema (``broker.schema.protobuf``).

``render(file, sort_options=False)`` writes one ``.proto`` file that protoc compiles back
into an equal descriptor (the round trip the tests check): ``syntax`` (or ``edition``),
``package``, imports (``public``, ``weak``, ``option``), options (file, message, field,
enum, enum value, oneof, extension range, service and method options, custom options
among them), messages with nested messages and enums, oneofs, ``map<K, V>`` fields (not
their synthetic ``...Entry`` messages), proto2 groups, proto3 ``optional`` (not its
synthetic oneof), ``reserved`` ranges and names, ``extensions`` ranges, ``extend``
blocks, services with streaming methods, proto2 ``default`` values, ``json_name`` where it
is not the default one, and edition 2024's ``export``/``local``.

Format: two-space indentation, one declaration a line, a blank line between top-level
declarations, no comments (a descriptor keeps none). Every type is written by its
fully-qualified name with the leading dot (``.shop.Order.Line``), custom options too
(``(.shop.owner)``): it resolves to the same thing wherever it stands, so no scoping rule
can make the text mean something else.

Invariants: declarations keep their descriptor order within each kind, and nested
messages keep their order relative to the map fields and groups that declare their
synthetic messages, so the message indexes Confluent's serializers compute (the position
of a message among its siblings, map entries counted) are the same in the descriptor
and in protoc's compilation of the text. Options are written in the order ``ListFields``
gives them (field number, extensions after the fields they follow), or sorted by name
with ``sort_options``. Custom options are written only when the descriptor was parsed by
a message class that knows their extensions (``broker.schema.protobuf`` parses it with a
pool holding the file and what it imports); unknown option fields are skipped. A map
entry without the shape protoc gives it is written as the message it is (protoc then
refuses it); what ``.proto`` cannot say (an edition without a spelling, a field of an
undeclared oneof) raises ``ValueError``.

``file`` is a ``descriptor_pb2.FileDescriptorProto`` or a dynamic message of the same
type; it is only read. Thread-safety: pure functions.
"""

from __future__ import annotations

import math
import struct
from typing import Any

from google.protobuf import descriptor_pb2, text_encoding, text_format

_F = descriptor_pb2.FieldDescriptorProto
SCALAR_NAMES = {
    _F.TYPE_DOUBLE: "double", _F.TYPE_FLOAT: "float", _F.TYPE_INT64: "int64", _F.TYPE_UINT64: "uint64",
    _F.TYPE_INT32: "int32", _F.TYPE_FIXED64: "fixed64", _F.TYPE_FIXED32: "fixed32", _F.TYPE_BOOL: "bool",
    _F.TYPE_STRING: "string", _F.TYPE_BYTES: "bytes", _F.TYPE_UINT32: "uint32", _F.TYPE_SFIXED32: "sfixed32",
    _F.TYPE_SFIXED64: "sfixed64", _F.TYPE_SINT32: "sint32", _F.TYPE_SINT64: "sint64",
}
_EDITIONS = {descriptor_pb2.EDITION_2023: "2023", descriptor_pb2.EDITION_2024: "2024"}
_VISIBILITY = {1: "local ", 2: "export "}  # SymbolVisibility: VISIBILITY_LOCAL, VISIBILITY_EXPORT
_INDENT = "  "


def json_name(name: str) -> str:
    """protoc's default ``json_name`` of a field: underscores dropped, the letter after
    each one upper-cased (``order_id`` -> ``orderId``)."""
    out: list[str] = []
    upper = False
    for ch in name:
        if ch == "_":
            upper = True
        elif upper:
            out.append(ch.upper())
            upper = False
        else:
            out.append(ch)
    return "".join(out)


def quote(text: str) -> str:
    """A ``.proto`` string literal of ``text`` (C escapes, UTF-8 kept as is)."""
    return '"' + text_encoding.CEscape(text, as_utf8=True) + '"'


def syntax_of(file: Any) -> str:
    """``proto2``, ``proto3`` or ``editions`` (an unset syntax is proto2)."""
    return file.syntax or "proto2"


def render(file: Any, sort_options: bool = False) -> str:
    """The ``.proto`` text of ``file`` (module docstring)."""
    return _Renderer(file, sort_options).render()


def _float_text(value: float, single: bool) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if single:  # the shortest decimal that reads back as the same float32
        packed = struct.pack("<f", value)
        for digits in range(6, 10):
            text = f"{value:.{digits}g}"
            if struct.pack("<f", float(text)) == packed:
                return text
    return repr(value)


def _is_repeated(field: Any) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf 7 dropped FieldDescriptor.label
    if flag is not None:
        return bool(flag)
    return bool(field.label == _F.LABEL_REPEATED)


def option_value(field: Any, value: Any) -> str:
    """The ``.proto`` text of one value of an option field (a ``FieldDescriptor``)."""
    kind = field.type
    if kind in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
        body = text_format.MessageToString(value, as_one_line=True, as_utf8=True).strip()
        return "{ " + body + " }" if body else "{}"
    if kind == _F.TYPE_ENUM:
        symbol = field.enum_type.values_by_number.get(value)
        return symbol.name if symbol is not None else str(value)
    if kind == _F.TYPE_BOOL:
        return "true" if value else "false"
    if kind == _F.TYPE_STRING:
        return quote(value)
    if kind == _F.TYPE_BYTES:
        return '"' + text_encoding.CEscape(value, as_utf8=False) + '"'
    if kind in (_F.TYPE_FLOAT, _F.TYPE_DOUBLE):
        return _float_text(value, kind == _F.TYPE_FLOAT)
    return str(value)


def option_items(options: Any, sort: bool = False) -> list[tuple[str, str]]:
    """``(name, value text)`` of every option set in an ``*Options`` message, a repeated
    option once per value; custom options as ``(.full.name)``."""
    items: list[tuple[str, str]] = []
    for field, value in options.ListFields():
        if field.is_extension:
            name = f"(.{field.full_name})"
        elif field.name == "uninterpreted_option":  # protoc interprets them all
            continue
        else:
            name = field.name
        for one in (value if _is_repeated(field) else (value,)):
            items.append((name, option_value(field, one)))
    if sort:
        items.sort(key=lambda item: item[0])
    return items


def _is_map_entry(message: Any) -> bool:
    """Whether ``message`` has a map entry's shape: ``key = 1`` and ``value = 2``, nothing
    else (anything else is left for protoc to refuse)."""
    fields = [(f.name, f.number) for f in message.field]
    return fields == [("key", 1), ("value", 2)] and not (
        message.nested_type or message.enum_type or message.oneof_decl or message.extension
        or message.extension_range)


def _ranges(ranges: Any, inclusive: bool) -> str:
    parts = []
    for r in ranges:
        end = r.end if inclusive else r.end - 1
        parts.append(str(r.start) if end == r.start else f"{r.start} to {end}")
    return ", ".join(parts)


class _Renderer:
    def __init__(self, file: Any, sort_options: bool) -> None:
        self.file = file
        self.syntax = syntax_of(file)
        self.sort_options = sort_options
        self.lines: list[str] = []
        self.depth = 0

    # -- output helpers --------------------------------------------------------------

    def emit(self, line: str) -> None:
        self.lines.append(_INDENT * self.depth + line if line else "")

    def blank(self) -> None:
        if self.lines and self.lines[-1] != "":
            self.lines.append("")

    def options(self, holder: Any) -> list[tuple[str, str]]:
        if not holder.HasField("options"):
            return []
        return option_items(holder.options, self.sort_options)

    def option_statements(self, holder: Any) -> None:
        for name, value in self.options(holder):
            self.emit(f"option {name} = {value};")

    @staticmethod
    def bracket(items: list[tuple[str, str]]) -> str:
        return " [" + ", ".join(f"{name} = {value}" for name, value in items) + "]" if items else ""

    # -- file ------------------------------------------------------------------------

    def render(self) -> str:
        file = self.file
        if self.syntax == "editions":
            edition = _EDITIONS.get(file.edition)
            if edition is None:
                raise ValueError(f"edition {file.edition} has no .proto spelling")
            self.emit(f'edition = "{edition}";')
        else:
            self.emit(f'syntax = "{self.syntax}";')
        if file.package:
            self.emit(f"package {file.package};")
        if file.dependency or list(getattr(file, "option_dependency", ())):
            self.blank()
            public, weak = set(file.public_dependency), set(file.weak_dependency)
            for i, dependency in enumerate(file.dependency):
                kind = "public " if i in public else "weak " if i in weak else ""
                self.emit(f"import {kind}{quote(dependency)};")
            for dependency in getattr(file, "option_dependency", ()):
                self.emit(f"import option {quote(dependency)};")
        if file.HasField("options"):
            self.blank()
            self.option_statements(file)
        self.scope(file.package, [], [], file.message_type, file.enum_type, file.extension, top=True)
        for service in file.service:
            self.blank()
            self.service(service)
        return "\n".join(self.lines).strip("\n") + "\n"

    # -- declarations of a scope (the file or a message) ------------------------------

    def scope(self, name: str, fields: Any, oneofs: Any, nested: Any, enums: Any, extensions: Any,
              top: bool = False) -> None:
        fields, nested, extensions = list(fields), list(nested), list(extensions)
        prefix = "." + name + "." if name else "."
        by_name = {prefix + m.name: i for i, m in enumerate(nested)}
        # ("f" or "x", position among the fields or extensions) -> the nested message that
        # field declares: a map field's entry, a group's type
        linked: dict[tuple[str, int], int] = {}
        for kind, members in (("f", fields), ("x", extensions)):
            for position, field in enumerate(members):
                index = by_name.get(field.type_name)
                if index is None or index in linked.values():
                    continue
                message = nested[index]
                is_map = (kind == "f" and message.options.map_entry and field.type == _F.TYPE_MESSAGE
                          and field.label == _F.LABEL_REPEATED and _is_map_entry(message))
                is_group = field.type == _F.TYPE_GROUP and field.name == message.name.lower()
                if is_map or is_group:
                    linked[(kind, position)] = index
        declared = set(linked.values())
        emitted: set[int] = set()

        def flush(upto: int) -> None:
            for i in range(upto):
                if i not in emitted and i not in declared:
                    emitted.add(i)
                    if top:
                        self.blank()
                    self.message(nested[i], name)

        def declared_by(kind: str, position: int) -> Any:
            index = linked.get((kind, position))
            return None if index is None else nested[index]

        synthetic = {f.oneof_index for f in fields if f.proto3_optional and f.HasField("oneof_index")}
        done: set[int] = set()
        for position, field in enumerate(fields):
            if field.HasField("oneof_index") and field.oneof_index not in synthetic:
                which = field.oneof_index
                if not 0 <= which < len(oneofs):
                    raise ValueError(f"field {field.name!r} names oneof {which}, which is not declared")
                if which in done:
                    continue
                done.add(which)
                members = [p for p, f in enumerate(fields) if f.HasField("oneof_index") and f.oneof_index == which]
                links = [linked[("f", p)] for p in members if ("f", p) in linked]
                if links:
                    flush(min(links))
                self.emit(f"oneof {oneofs[which].name} {{")
                self.depth += 1
                self.option_statements(oneofs[which])
                for p in members:
                    self.field(fields[p], declared_by("f", p), name, in_oneof=True)
                self.depth -= 1
                self.emit("}")
            else:
                if ("f", position) in linked:
                    flush(linked[("f", position)])
                self.field(field, declared_by("f", position), name, in_oneof=False)
        extension_links = [index for (kind, _), index in linked.items() if kind == "x"]
        flush(min(extension_links) if extension_links else len(nested))
        for enum in enums:
            if top:
                self.blank()
            self.enum(enum)
        # extend blocks: consecutive extensions of one extendee
        start = 0
        while start < len(extensions):
            stop = start
            while stop < len(extensions) and extensions[stop].extendee == extensions[start].extendee:
                stop += 1
            links = [linked[("x", p)] for p in range(start, stop) if ("x", p) in linked]
            if links:
                flush(min(links))
            if top:
                self.blank()
            self.emit(f"extend {extensions[start].extendee} {{")
            self.depth += 1
            for p in range(start, stop):
                self.field(extensions[p], declared_by("x", p), name, in_oneof=False)
            self.depth -= 1
            self.emit("}")
            start = stop
        flush(len(nested))

    # -- messages, fields, oneofs ------------------------------------------------------

    def block(self, head: str, body: Any) -> None:
        """``head {`` the lines ``body()`` emits ``}``; ``head {}`` when it emits none."""
        self.emit(head + " {")
        start = len(self.lines)
        self.depth += 1
        body()
        self.depth -= 1
        if len(self.lines) == start:
            self.lines[-1] += "}"
        else:
            self.emit("}")

    def message(self, message: Any, scope: str) -> None:
        visibility = _VISIBILITY.get(getattr(message, "visibility", 0), "")
        self.block(f"{visibility}message {message.name}", lambda: self.message_body(message, scope))

    def message_body(self, message: Any, scope: str) -> None:
        full = f"{scope}.{message.name}" if scope else message.name
        self.option_statements(message)
        self.scope(full, message.field, message.oneof_decl, message.nested_type, message.enum_type,
                   message.extension)
        for r in message.extension_range:
            end = r.end - 1
            span = str(r.start) if end == r.start else f"{r.start} to {end}"
            self.emit(f"extensions {span}{self.bracket(self.options(r))};")
        if message.reserved_range:
            self.emit(f"reserved {_ranges(message.reserved_range, inclusive=False)};")
        if message.reserved_name:
            self.emit(f"reserved {self.reserved_names(message.reserved_name)};")

    def reserved_names(self, names: Any) -> str:
        if self.syntax == "editions":
            return ", ".join(names)
        return ", ".join(quote(n) for n in names)

    def label(self, field: Any, in_oneof: bool) -> str:
        if in_oneof:
            return ""
        if field.label == _F.LABEL_REPEATED:
            return "repeated "
        if self.syntax == "editions":
            return ""
        if self.syntax == "proto3":
            return "optional " if field.proto3_optional else ""
        return "required " if field.label == _F.LABEL_REQUIRED else "optional "

    def type_text(self, field: Any) -> str:
        scalar = SCALAR_NAMES.get(field.type)
        return scalar if scalar is not None else field.type_name

    def field_items(self, field: Any) -> list[tuple[str, str]]:
        items: list[tuple[str, str]] = []
        if field.HasField("default_value"):
            items.append(("default", self.default_text(field)))
        if field.HasField("json_name") and not field.extendee and field.json_name != json_name(field.name):
            items.append(("json_name", quote(field.json_name)))
        return items + self.options(field)

    @staticmethod
    def default_text(field: Any) -> str:
        value = field.default_value
        if field.type == _F.TYPE_STRING:
            return quote(value)
        if field.type == _F.TYPE_BYTES:
            return '"' + value + '"'  # already C-escaped in the descriptor
        return str(value)

    def field(self, field: Any, declares: Any, scope: str, in_oneof: bool) -> None:
        """One field; ``declares`` is the nested message it declares (a group's type, a
        map field's entry) or None."""
        suffix = self.bracket(self.field_items(field))
        if declares is not None and field.type == _F.TYPE_GROUP:
            self.block(f"{self.label(field, in_oneof)}group {declares.name} = {field.number}{suffix}",
                       lambda: self.message_body(declares, scope))
        elif declares is not None:  # a map field: its entry's key and value
            key, value = declares.field
            kind = f"map<{self.type_text(key)}, {self.type_text(value)}>"
            self.emit(f"{kind} {field.name} = {field.number}{suffix};")
        else:
            self.emit(f"{self.label(field, in_oneof)}{self.type_text(field)} {field.name} = {field.number}{suffix};")

    # -- enums and services ------------------------------------------------------------

    def enum(self, enum: Any) -> None:
        visibility = _VISIBILITY.get(getattr(enum, "visibility", 0), "")
        self.emit(f"{visibility}enum {enum.name} {{")
        self.depth += 1
        self.option_statements(enum)
        for value in enum.value:
            self.emit(f"{value.name} = {value.number}{self.bracket(self.options(value))};")
        if enum.reserved_range:
            self.emit(f"reserved {_ranges(enum.reserved_range, inclusive=True)};")
        if enum.reserved_name:
            self.emit(f"reserved {self.reserved_names(enum.reserved_name)};")
        self.depth -= 1
        self.emit("}")

    def service(self, service: Any) -> None:
        self.emit(f"service {service.name} {{")
        self.depth += 1
        self.option_statements(service)
        for method in service.method:
            request = ("stream " if method.client_streaming else "") + method.input_type
            response = ("stream " if method.server_streaming else "") + method.output_type
            head = f"rpc {method.name} ({request}) returns ({response})"
            options = self.options(method)
            if not options:
                self.emit(head + ";")
                continue
            self.emit(head + " {")
            self.depth += 1
            for name, value in options:
                self.emit(f"option {name} = {value};")
            self.depth -= 1
            self.emit("}")
        self.depth -= 1
        self.emit("}")


__all__ = ["SCALAR_NAMES", "json_name", "option_items", "option_value", "quote", "render", "syntax_of"]
