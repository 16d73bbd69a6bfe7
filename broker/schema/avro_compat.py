"""Avro schema compatibility: Avro's schema resolution rules (the specification's "Schema
Resolution") as Avro Java's ``SchemaCompatibility`` checks them, reported in Confluent's
verbose style.

Owns ``incompatibilities(reader, reader_names, writer, writer_names)``: every way data
written with the writer schema cannot be read with the reader schema, as
``Incompatibility`` values; ``str()`` of one is the message Confluent's registry returns
(``{errorType:'...', description:'...', additionalInfo:'...'}``), the reader being the
"new" schema and the writer the "old" one (``AvroSchema.backward_errors``: reader = the
schema being registered, writer = the one before it); ``message("old", "new")`` words it
for a FORWARD check, where the old schema reads the new one's data.

Format of the input (``broker.schema.avro``'s resolved form): a schema node is a
primitive name (``"int"``), the full name of a named type (looked up in the names
table), a list (a union), or an object with ``type`` ``array`` (``items``), ``map``
(``values``) or a primitive with properties. A named type's definition carries its full
``name``, its ``aliases`` as full names, and ``fields`` (each with ``name``, ``type``,
``aliases`` and, when it has one, ``default``), ``symbols`` (and ``default``) or ``size``.

The rules (reader against writer), each break with its Confluent/Avro
``SchemaIncompatibilityType`` and location:

* same type: primitives match; arrays and maps recurse into ``items``/``values``;
  records, enums and fixed match by unqualified name, or when the reader's aliases hold
  the writer's full name (``NAME_MISMATCH`` at ``.../name``);
* fixed: equal sizes (``FIXED_SIZE_MISMATCH`` at ``.../size``);
* enums: every writer symbol is a reader symbol, unless the reader has a default
  (``MISSING_ENUM_SYMBOLS`` at ``.../symbols``, the missing symbols sorted);
* records: each reader field (``.../fields/<reader position>``) takes the writer field of
  its name, else of one of its aliases, and recurses into ``.../type``; a reader field no
  writer field feeds needs a default (``READER_FIELD_MISSING_DEFAULT_VALUE``); writer
  fields the reader lacks are skipped;
* promotions: int to long, float or double; long to float or double; float to double;
  string to bytes and bytes to string; any other pair of types is a ``TYPE_MISMATCH``;
* unions: a writer union resolves when each of its branches does: against a reader union,
  a branch no reader branch reads is a ``MISSING_UNION_BRANCH`` at ``.../<branch>``;
  against any other reader each branch is checked in turn under ``.../<branch>``; a
  non-union writer against a reader union needs one reader branch that reads it
  (``MISSING_UNION_BRANCH``).

Recursive named types: a (reader, writer) pair of named types is checked once; met again
while it is being checked, it counts as compatible (Avro Java's memo), so recursion ends.
Where Avro Java differs, this module says so (``_fields``).

Thread-safety: pure functions over immutable inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NAME_MISMATCH = "NAME_MISMATCH"
FIXED_SIZE_MISMATCH = "FIXED_SIZE_MISMATCH"
MISSING_ENUM_SYMBOLS = "MISSING_ENUM_SYMBOLS"
READER_FIELD_MISSING_DEFAULT_VALUE = "READER_FIELD_MISSING_DEFAULT_VALUE"
TYPE_MISMATCH = "TYPE_MISMATCH"
MISSING_UNION_BRANCH = "MISSING_UNION_BRANCH"

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})

# reader type -> writer types it reads besides its own (the specification's promotions)
_PROMOTIONS = {
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "bytes": frozenset({"string"}),
    "string": frozenset({"bytes"}),
}

# Confluent's descriptions (io.confluent.kafka.schemaregistry.avro.Difference); {reader} and
# {writer} are "new" and "old" for a BACKWARD check, the other way round for a FORWARD one
_DESCRIPTIONS = {
    NAME_MISMATCH: "The name of the schema has changed (path '{path}')",
    FIXED_SIZE_MISMATCH: "The size of FIXED type field at path '{path}' in the {reader} schema does not match "
                         "with the {writer} schema",
    MISSING_ENUM_SYMBOLS: "The {reader} schema is missing enum symbols '{info}' at path '{path}' in the "
                          "{writer} schema",
    MISSING_UNION_BRANCH: "The {reader} schema is missing a type inside a union field at path '{path}' in the "
                          "{writer} schema",
    READER_FIELD_MISSING_DEFAULT_VALUE: "The field '{info}' at path '{path}' in the {reader} schema has no "
                                        "default value and is missing in the {writer} schema",
    TYPE_MISMATCH: "The type (path '{path}') of a field in the {reader} schema does not match with the "
                   "{writer} schema",
}


@dataclass(frozen=True)
class Incompatibility:
    """One break: its ``error_type`` (Avro's ``SchemaIncompatibilityType`` name), its
    ``location`` (the tokens of the JSON-pointer-like path, ``()`` for the root) and
    ``additional_info`` (Avro's message: the field name, the missing symbols, ...)."""

    error_type: str
    location: tuple[str, ...]
    additional_info: str

    @property
    def path(self) -> str:
        """The location as Avro writes it: ``/`` for the root, else ``/fields/1/type``."""
        return "/" + "/".join(t.replace("~", "~0").replace("/", "~1") for t in self.location)

    def description(self, reader: str = "new", writer: str = "old") -> str:
        return _DESCRIPTIONS[self.error_type].format(path=self.path, info=self.additional_info, reader=reader,
                                                     writer=writer)

    def message(self, reader: str = "new", writer: str = "old") -> str:
        """Confluent's message, the reader schema called ``reader`` and the writer
        ``writer``: ``message("old", "new")`` for a FORWARD check (the old schema reading
        the new one's data), as Confluent's registry words it."""
        return (f"{{errorType:'{self.error_type}', description:'{self.description(reader, writer)}', "
                f"additionalInfo:'{self.additional_info}'}}")

    def __str__(self) -> str:
        return self.message()


def type_name(node: Any, names: Mapping[str, dict]) -> str:
    """Avro Java's ``Schema.Type`` name of a node: ``INT``, ``RECORD``, ``UNION``, ..."""
    if isinstance(node, list):
        return "UNION"
    if isinstance(node, dict):
        return str(node["type"]).upper()
    if node in _PRIMITIVES:
        return str(node).upper()
    kind = names[node]["type"]
    return "RECORD" if kind == "error" else str(kind).upper()


class _Checker:
    """One comparison: the two names tables and the memo of named-type pairs."""

    def __init__(self, reader_names: Mapping[str, dict], writer_names: Mapping[str, dict]) -> None:
        self.rnames = reader_names
        self.wnames = writer_names
        # (reader full name, writer full name) -> its breaks, or None while being checked
        self.memo: dict[tuple[str, str], list[Incompatibility] | None] = {}

    def check(self, reader: Any, writer: Any, loc: tuple[str, ...]) -> list[Incompatibility]:
        named = (isinstance(reader, str) and reader not in _PRIMITIVES
                 and isinstance(writer, str) and writer not in _PRIMITIVES)
        if not named:
            return self._calculate(reader, writer, loc)
        key = (reader, writer)
        if key in self.memo:
            return self.memo[key] or []
        self.memo[key] = None
        found = self._calculate(reader, writer, loc)
        self.memo[key] = found
        return found

    def _calculate(self, reader: Any, writer: Any, loc: tuple[str, ...]) -> list[Incompatibility]:
        rtype, wtype = type_name(reader, self.rnames), type_name(writer, self.wnames)
        if rtype == wtype:
            if rtype == "ARRAY":
                return self.check(reader["items"], writer["items"], (*loc, "items"))
            if rtype == "MAP":
                return self.check(reader["values"], writer["values"], (*loc, "values"))
            if rtype == "UNION":
                found = []
                for i, branch in enumerate(writer):
                    if self.check(reader, branch, (*loc, str(i))):
                        found.append(Incompatibility(MISSING_UNION_BRANCH, (*loc, str(i)),
                                                     f"reader union lacking writer type: "
                                                     f"{type_name(branch, self.wnames)}"))
                return found
            if rtype in ("RECORD", "ENUM", "FIXED"):
                rdef, wdef = self.rnames[reader], self.wnames[writer]
                found = self._names(rdef, wdef, loc)
                if rtype == "FIXED" and rdef["size"] != wdef["size"]:
                    found.append(Incompatibility(FIXED_SIZE_MISMATCH, (*loc, "size"),
                                                 f"expected: {wdef['size']}, found: {rdef['size']}"))
                elif rtype == "ENUM":
                    found += self._symbols(rdef, wdef, loc)
                elif rtype == "RECORD":
                    found += self._fields(rdef, wdef, loc)
                return found
            return []  # the same primitive
        if wtype == "UNION":
            found = []
            for i, branch in enumerate(writer):
                found += self.check(reader, branch, (*loc, str(i)))
            return found
        if rtype == "UNION":
            if any(not self.check(branch, writer, loc) for branch in reader):
                return []
            return [Incompatibility(MISSING_UNION_BRANCH, loc, f"reader union lacking writer type: {wtype}")]
        if wtype.lower() in _PROMOTIONS.get(rtype.lower(), ()):
            return []
        return [Incompatibility(TYPE_MISMATCH, loc,
                                f"reader type: {rtype} not compatible with writer type: {wtype}")]

    @staticmethod
    def _names(rdef: dict, wdef: dict, loc: tuple[str, ...]) -> list[Incompatibility]:
        wfull = wdef["name"]
        if rdef["name"].rpartition(".")[2] == wfull.rpartition(".")[2] or wfull in rdef.get("aliases", ()):
            return []
        return [Incompatibility(NAME_MISMATCH, (*loc, "name"), f"expected: {wfull}")]

    @staticmethod
    def _symbols(rdef: dict, wdef: dict, loc: tuple[str, ...]) -> list[Incompatibility]:
        missing = sorted(set(wdef["symbols"]) - set(rdef["symbols"]))
        if not missing or rdef.get("default") in rdef["symbols"]:
            return []
        return [Incompatibility(MISSING_ENUM_SYMBOLS, (*loc, "symbols"), "[" + ", ".join(missing) + "]")]

    def _fields(self, rdef: dict, wdef: dict, loc: tuple[str, ...]) -> list[Incompatibility]:
        """Each reader field against the writer field it reads. Where Avro Java differs:
        a reader field matching several writer fields (its name and an alias) takes the
        one of its name (Java throws); a reader enum field with no field default but an
        enum default, missing from the writer, is a READER_FIELD_MISSING_DEFAULT_VALUE
        (Java reports it as a TYPE_MISMATCH of the enum against the writer record)."""
        by_name = {f["name"]: f for f in wdef["fields"]}
        found = []
        for i, field in enumerate(rdef["fields"]):
            here = (*loc, "fields", str(i))
            source = by_name.get(field["name"])
            if source is None:
                source = next((by_name[a] for a in field.get("aliases", ()) if a in by_name), None)
            if source is not None:
                found += self.check(field["type"], source["type"], (*here, "type"))
            elif "default" not in field:
                found.append(Incompatibility(READER_FIELD_MISSING_DEFAULT_VALUE, here, field["name"]))
        return found


def incompatibilities(reader: Any, reader_names: Mapping[str, dict], writer: Any,
                      writer_names: Mapping[str, dict]) -> list[Incompatibility]:
    """The breaks of reading data written with ``writer`` using ``reader`` (module
    docstring), each once, in the order Avro Java finds them; empty when compatible."""
    found = _Checker(reader_names, writer_names).check(reader, writer, ())
    return list(dict.fromkeys(found))


__all__ = ["FIXED_SIZE_MISMATCH", "Incompatibility", "MISSING_ENUM_SYMBOLS", "MISSING_UNION_BRANCH",
           "NAME_MISMATCH", "READER_FIELD_MISSING_DEFAULT_VALUE", "TYPE_MISMATCH", "incompatibilities",
           "type_name"]
