"""The Avro schema format of the Schema Registry: parsing, identity, normal form and
compatibility (``AVRO`` in Confluent's schema types).

Owns ``parse(text, references, resolved) -> AvroSchema`` and ``named_types(schema)``.

Parsing. ``text`` is Avro's JSON: an object (a record, enum, fixed, array, map, or a
primitive with properties), a list (a union) or a string (a primitive, or the name of a
named type, e.g. one defined by a reference). Each text of ``resolved`` (dependencies
first) is parsed the same way, and the named types it defines are known to the ones after
it and to ``text``. The checks are Avro Java's ``Schema.Parser`` with default validation:

* the JSON is well formed (no ``NaN``/``Infinity``), nested at most ``MAX_DEPTH`` schemas
  deep;
* names, namespaces and aliases follow the specification's grammar (dot-separated
  ``[A-Za-z_][A-Za-z0-9_]*``), a named type is not named after a primitive, and a full
  name is defined once (a reference's types included); a reference to a type resolves
  per the specification (a name without a dot is in the enclosing namespace);
* records have ``fields`` (each with a valid, unique ``name`` and a ``type``; ``order``
  is ``ascending``, ``descending`` or ``ignore``), enums ``symbols`` (valid, unique; a
  ``default`` among them), fixed a ``size`` (an int, 0 to 2^31-1), arrays ``items``,
  maps ``values``; ``doc`` is a string; a union holds no union and no two branches of
  one type (two named types of different full names are fine);
* a field's ``default`` matches its type (Java's ``validateDefaults``): null, boolean,
  an int in int's or long's range, any number for float and double (also a numeric
  string, as Java takes ``"NaN"``), a string for string and bytes, a symbol of the enum,
  a string of ``size`` characters up to U+00FF for fixed, a list or an object whose
  values match for arrays and maps, an object for a record (each field from it or from
  the field's own default), and for a union its first branch;
* each named reference of ``references`` is in ``resolved``;
* fastavro then parses the schema (references inlined): what it rejects (a decimal's
  precision and scale, for one) is invalid too.

Any failure is an ``InvalidSchemaError`` whose message says what and where (a JSON
pointer into the text). Where this is stricter than Avro Java: names are ASCII (Java
also takes other Unicode letters), a non-string ``doc``/``namespace`` is an error (Java
ignores it), an enum or fixed default is checked against the symbols or the size, and
``{"type": "SomeNamedType"}`` is not taken as a reference (write the name as a string).

The canonical string (the identity; what the registry stores and returns) is the schema
re-serialised as Avro Java's ``Schema.toString()`` writes it, compact JSON without
whitespace, with these rules:

* a primitive without properties is its name (``"int"``, also for ``{"type": "int"}``);
  with properties ``{"type":"int","logicalType":...,<properties>}``;
* a named type, at its first occurrence, is an object: ``type``, ``name`` (the simple
  name), ``namespace`` (only when it differs from the enclosing one, ``""`` for none
  inside a namespace), ``doc``, then ``fields`` / ``symbols`` / ``size``, the enum's
  ``default``, ``logicalType``, ``aliases`` (each relative to the type's namespace);
  later occurrences are its name, simple when in the enclosing namespace, else full;
* a field: ``name``, ``type``, ``doc``, ``default``, ``order`` (left out when
  ``ascending``), ``aliases``, then its custom properties; arrays and maps: ``type``,
  ``items`` / ``values``, ``logicalType``, custom properties;
* custom properties (every other key) come last, sorted by key; defaults and property
  values are written with the keys of their objects sorted; numbers as Python's ``json``
  writes them; non-ASCII characters unescaped;
* named types defined by references (nested ones too; Confluent's ``canonicalString``
  knows only each reference's top-level type) are written by name, never inlined;
  ``formatted("resolved")`` inlines them at their first use.

So texts differing only in whitespace, key order or redundant namespaces give one
string; a different default, doc, alias, order or property gives another. Avro Java keeps
properties in the order written; they are sorted here so that key order never matters.

The normal form (``normalize()``, the registry's ``normalize=true``) is Avro's Parsing
Canonical Form extended as Confluent's registry extends it (``AvroSchemaUtils``), so
that defaults and docs survive normalisation: full names, attributes in the order
``name``, ``type``, ``fields`` / ``symbols`` / ``items`` / ``values`` / ``size``, then
``logicalType``, ``doc``, ``aliases`` (full names, sorted), ``default``, the other
properties sorted (fields: ``name``, ``type``, ``order`` when not ascending, ``doc``,
``aliases`` sorted, ``default``, properties); ``error`` is written ``record``;
referenced types by full name; references sorted and deduplicated. Without docs,
defaults, aliases, orders and properties it is exactly the Parsing Canonical Form.
``parsing_canonical_form()`` is the plain form of the whole schema (references inlined,
fastavro's ``to_parsing_canonical_form``) and ``fingerprint()`` hashes it.

Compatibility (``backward_errors``): ``avro_compat``, reader = this schema, writer = the
previous one.

Thread-safety: parsing is pure; an ``AvroSchema`` is immutable (``parsed``, fastavro's
form, must not be modified) and may be shared between threads.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from fastavro.schema import fingerprint as _fastavro_fingerprint
from fastavro.schema import parse_schema as _fastavro_parse
from fastavro.schema import to_parsing_canonical_form as _fastavro_pcf

from broker.record.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from broker.schema.avro_compat import Incompatibility
from broker.schema.avro_compat import incompatibilities as _incompatibilities
from broker.schema.base import AVRO, InvalidSchemaError, ParsedSchema, SchemaReference, type_mismatch

MAX_DEPTH = 100  # schemas nested deeper than this are refused (the checks recurse)

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "error", "enum", "fixed"})
_COMPLEX = _NAMED | {"array", "map"}
# Avro Java's Schema.Type names: a reference with one of these as simple name is written in full
_TYPE_NAMES = PRIMITIVES | _COMPLEX | {"union"}
_NAME_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ORDERS = ("ascending", "descending", "ignore")

# Avro Java's attributes of a schema object: never custom properties (dropped where they mean
# nothing, e.g. "doc" on a primitive); an enum's "default" too; every other key is a property
_SCHEMA_KEYS = frozenset({"type", "name", "namespace", "doc", "aliases", "fields", "items", "size", "symbols",
                          "values"})
_ENUM_KEYS = _SCHEMA_KEYS | {"default"}
_FIELD_RESERVED = frozenset({"name", "type", "doc", "default", "order", "aliases"})
_EMPTY: Mapping[str, str] = MappingProxyType({})


def _fail(path: str, message: str) -> InvalidSchemaError:
    return InvalidSchemaError(f"{message} (at {path or '/'})")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _load_json(text: Any, what: str) -> Any:
    if not isinstance(text, str):
        raise InvalidSchemaError(f"{what} must be a string of Avro JSON, not {type(text).__name__}")
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite)
    except RecursionError:
        raise InvalidSchemaError(f"{what} is nested too deeply") from None
    except ValueError as e:
        raise InvalidSchemaError(f"{what} is not valid JSON: {e}") from None


def _valid_name(name: str) -> bool:
    return all(_NAME_PART.fullmatch(part) for part in name.split("."))


def _split(full: str) -> tuple[str, str]:
    """(namespace, simple name) of a full name; ``""`` is the null namespace."""
    space, _, simple = full.rpartition(".")
    return space, simple


class _Walker:
    """Checks one schema text and adds its named types to ``names`` (shared by the texts
    of one parse). Nodes are the module's resolved form (``avro_compat`` describes it)."""

    def __init__(self, names: dict[str, dict]) -> None:
        self.names = names
        self.defaults: list[tuple[dict, str]] = []  # fields with a default, checked at the end

    def schema(self, obj: Any, space: str, path: str, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise _fail(path, f"schemas are nested more than {MAX_DEPTH} deep")
        if isinstance(obj, str):
            return self.reference(obj, space, path)
        if isinstance(obj, list):
            return self.union(obj, space, path, depth)
        if not isinstance(obj, dict):
            raise _fail(path, f"not a schema: {json.dumps(obj)[:60]}; a schema is a type name, an object or a list")
        if "type" not in obj:
            raise _fail(path, 'a schema object needs a "type"')
        kind = obj["type"]
        if not isinstance(kind, str):
            raise _fail(path, f'"type" must be a type name, not {json.dumps(kind)[:60]}; a nested schema goes '
                              'in a field\'s "type", an array\'s "items" or a map\'s "values"')
        if kind in _NAMED:
            return self.named(obj, kind, space, path, depth)
        if kind in ("array", "map"):
            key = "items" if kind == "array" else "values"
            if key not in obj:
                raise _fail(path, f'{"an" if kind == "array" else "a"} {kind} needs "{key}"')
            node = {"type": kind, key: self.schema(obj[key], space, f"{path}/{key}", depth + 1)}
            node.update(self.properties(obj, _SCHEMA_KEYS))
            return node
        if kind in PRIMITIVES:
            props = self.properties(obj, _SCHEMA_KEYS)
            return {"type": kind, **props} if props else kind
        raise _fail(path, f'unknown type {kind!r} in "type" (a named type is referenced by its name, as a '
                          'string, not as {"type": name})')

    @staticmethod
    def properties(obj: dict, reserved: frozenset[str]) -> dict:
        return {k: v for k, v in obj.items() if k not in reserved}

    def reference(self, name: str, space: str, path: str) -> str:
        if name in PRIMITIVES:
            return name
        if "." in name:
            ns, simple = _split(name)
            full = f"{ns}.{simple}" if ns else simple
        else:
            full = f"{space}.{name}" if space else name
        if full not in self.names:
            hint = (f'; a {name} is written as an object, {{"type": "{name}", ...}}' if name in _COMPLEX else "")
            raise _fail(path, f"unknown type {full!r}{hint}")
        return full

    def union(self, branches: list, space: str, path: str, depth: int) -> list:
        nodes: list = []
        seen: set[str] = set()
        for i, branch in enumerate(branches):
            where = f"{path}/{i}"
            if isinstance(branch, list):
                raise _fail(where, "a union cannot contain a union")
            node = self.schema(branch, space, where, depth + 1)
            key = node if isinstance(node, str) else node["type"]
            if key in seen:
                raise _fail(where, f"the union has two branches of type {key!r}")
            seen.add(key)
            nodes.append(node)
        return nodes

    def text(self, obj: dict, key: str, path: str) -> str | None:
        value = obj.get(key)
        if value is not None and not isinstance(value, str):
            raise _fail(path, f'"{key}" must be a string, not {json.dumps(value)[:60]}')
        return value

    def named(self, obj: dict, kind: str, space: str, path: str, depth: int) -> str:
        name = obj.get("name")
        if not isinstance(name, str):
            raise _fail(path, f'a {kind} needs a "name" (a string)')
        if "." in name:
            space, simple = _split(name)
        else:
            given = self.text(obj, "namespace", path)
            space, simple = (space if given is None else given), name
        if not simple or not _valid_name(simple):
            raise _fail(path, f"invalid name {name!r}: a name is letters, digits and '_', not starting with a "
                              "digit")
        if space and not _valid_name(space):
            raise _fail(path, f"invalid namespace {space!r}: dot-separated names of letters, digits and '_'")
        if simple in PRIMITIVES:
            raise _fail(path, f"a {kind} cannot be named after the primitive type {simple!r}")
        full = f"{space}.{simple}" if space else simple
        if full in self.names:
            raise _fail(path, f"the named type {full!r} is defined twice")
        node: dict = {"type": kind, "name": full}
        doc = self.text(obj, "doc", path)
        if doc is not None:
            node["doc"] = doc
        aliases = obj.get("aliases")
        if aliases is not None:
            if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
                raise _fail(path, '"aliases" must be a list of names')
            fulls = []
            for alias in aliases:
                if not alias or not _valid_name(alias.lstrip(".")):
                    raise _fail(path, f"invalid alias {alias!r}")
                a_space, a_simple = _split(alias) if "." in alias else (space, alias)
                fulls.append(f"{a_space}.{a_simple}" if a_space else a_simple)
            if fulls:
                node["aliases"] = list(dict.fromkeys(fulls))
        self.names[full] = node  # before the fields: a record may refer to itself
        if kind == "enum":
            self.symbols(obj, node, path)
        elif kind == "fixed":
            size = obj.get("size")
            if type(size) is not int or not 0 <= size <= INT32_MAX:
                raise _fail(path, f'a fixed needs a "size", an int from 0 to {INT32_MAX}')
            node["size"] = size
        else:
            fields = obj.get("fields")
            if not isinstance(fields, list):
                raise _fail(path, 'a record needs "fields", a list')
            node["fields"] = []
            for i, field in enumerate(fields):
                node["fields"].append(self.field(field, node, space, f"{path}/fields/{i}", depth))
        node.update(self.properties(obj, _ENUM_KEYS if kind == "enum" else _SCHEMA_KEYS))
        return full

    def symbols(self, obj: dict, node: dict, path: str) -> None:
        symbols = obj.get("symbols")
        if not isinstance(symbols, list):
            raise _fail(path, 'an enum needs "symbols", a list')
        for symbol in symbols:
            if not isinstance(symbol, str) or not _NAME_PART.fullmatch(symbol):
                raise _fail(path, f"invalid enum symbol {json.dumps(symbol)}: a symbol is letters, digits and '_', "
                                  "not starting with a digit")
        if len(set(symbols)) != len(symbols):
            raise _fail(path, "the enum has a symbol twice")
        node["symbols"] = list(symbols)
        if "default" in obj:
            default = obj["default"]
            if default not in symbols or not isinstance(default, str):
                raise _fail(path, f"the enum's default {json.dumps(default)[:60]} is not one of its symbols")
            node["default"] = default

    def field(self, obj: Any, record: dict, space: str, path: str, depth: int) -> dict:
        if not isinstance(obj, dict):
            raise _fail(path, "a field must be an object")
        name = obj.get("name")
        if not isinstance(name, str) or not _NAME_PART.fullmatch(name):
            raise _fail(path, f"invalid field name {json.dumps(name)}: a name is letters, digits and '_', "
                              "not starting with a digit")
        if any(f["name"] == name for f in record["fields"]):
            raise _fail(path, f"the record {record['name']!r} has two fields named {name!r}")
        if "type" not in obj:
            raise _fail(path, f'the field {name!r} needs a "type"')
        node: dict = {"name": name, "type": self.schema(obj["type"], space, f"{path}/type", depth + 1)}
        doc = self.text(obj, "doc", path)
        if doc is not None:
            node["doc"] = doc
        if "default" in obj:
            node["default"] = obj["default"]
            self.defaults.append((node, path))
        order = obj.get("order")
        if order is not None:
            if not isinstance(order, str) or order.lower() not in _ORDERS:
                raise _fail(path, f'"order" must be one of {", ".join(_ORDERS)}')
            if order.lower() != "ascending":
                node["order"] = order.lower()
        aliases = obj.get("aliases")
        if aliases is not None:
            if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
                raise _fail(path, '"aliases" must be a list of names')
            if aliases:
                node["aliases"] = list(dict.fromkeys(aliases))
        node.update(self.properties(obj, _FIELD_RESERVED))
        return node

    def check_defaults(self) -> None:
        for field, path in self.defaults:
            value, node = field["default"], field["type"]
            kind = node["type"] if isinstance(node, dict) else node
            if kind in ("float", "double") and isinstance(value, str) and _is_float_text(value):
                continue  # Java converts a numeric string default of a float or double field
            if not _default_matches(node, value, self.names):
                first = (f"; a union's default must match its first branch, {_describe(node[0], self.names)}"
                         if isinstance(node, list) and node else "")
                raise _fail(path, f"the default {json.dumps(value)[:80]} of field {field['name']!r} does not "
                                  f"match its type {_describe(node, self.names)}{first}")


def _is_float_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _describe(node: Any, names: Mapping[str, dict]) -> str:
    if isinstance(node, list):
        return "union [" + ", ".join(_describe(b, names) for b in node) + "]"
    if isinstance(node, dict):
        return str(node["type"])
    if node in PRIMITIVES:
        return str(node)
    return f"{names[node]['type']} {node}"


def _is_int(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


_PRIMITIVE_DEFAULTS = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "int": lambda v: _is_int(v, INT32_MIN, INT32_MAX),
    "long": lambda v: _is_int(v, INT64_MIN, INT64_MAX),
    "float": lambda v: type(v) in (int, float),
    "double": lambda v: type(v) in (int, float),
    "string": lambda v: isinstance(v, str),
    "bytes": lambda v: isinstance(v, str),
}


def _default_matches(node: Any, value: Any, names: Mapping[str, dict]) -> bool:
    """Whether ``value`` (JSON) is a valid default of a ``node`` (module docstring)."""
    if isinstance(node, list):
        return bool(node) and _default_matches(node[0], value, names)
    if isinstance(node, dict):
        if node["type"] == "array":
            return isinstance(value, list) and all(_default_matches(node["items"], v, names) for v in value)
        if node["type"] == "map":
            return isinstance(value, dict) and all(_default_matches(node["values"], v, names)
                                                   for v in value.values())
        node = node["type"]
    if node in PRIMITIVES:
        return bool(_PRIMITIVE_DEFAULTS[node](value))
    definition = names[node]
    kind = definition["type"]
    if kind == "enum":
        return isinstance(value, str) and value in definition["symbols"]
    if kind == "fixed":
        return (isinstance(value, str) and len(value) == definition["size"]
                and all(ord(c) <= 0xFF for c in value))
    if not isinstance(value, dict):
        return False
    for field in definition["fields"]:
        if field["name"] in value:
            if not _default_matches(field["type"], value[field["name"]], names):
                return False
        elif "default" not in field:
            return False
    return True


def _sorted_json(value: Any) -> Any:
    """``value`` with the keys of every object sorted (the order of the written JSON)."""
    if isinstance(value, dict):
        return {k: _sorted_json(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_json(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _qualified(full: str, space: str) -> str:
    """A reference to ``full`` written in namespace ``space`` (Avro Java's ``getQualified``)."""
    ns, simple = _split(full)
    return simple if ns and ns == space and simple not in _TYPE_NAMES else full


def _tail(out: dict, node: dict, reserved: frozenset[str]) -> None:
    """``logicalType`` then the other custom properties of ``node``, sorted, into ``out``."""
    props = {k: v for k, v in node.items() if k not in reserved}
    if "logicalType" in props:
        out["logicalType"] = _sorted_json(props.pop("logicalType"))
    for key in sorted(props):
        out[key] = _sorted_json(props[key])


class _JavaWriter:
    """Writes nodes as Avro Java's ``Schema.toString()`` (module docstring)."""

    def __init__(self, names: Mapping[str, dict], known: set[str]) -> None:
        self.names = names
        self.known = known  # named types written already (or by reference)

    def node(self, node: Any, space: str) -> Any:
        if isinstance(node, list):
            return [self.node(b, space) for b in node]
        if isinstance(node, dict):
            kind = node["type"]
            out: dict = {"type": kind}
            if kind in ("array", "map"):
                key = "items" if kind == "array" else "values"
                out[key] = self.node(node[key], space)
            _tail(out, node, _SCHEMA_KEYS)
            return out
        if node in PRIMITIVES:
            return node
        if node in self.known:
            return _qualified(node, space)
        self.known.add(node)
        return self.definition(self.names[node], space)

    def definition(self, d: dict, space: str) -> dict:
        ns, simple = _split(d["name"])
        out: dict = {"type": d["type"], "name": simple}
        if ns != space:
            out["namespace"] = ns
        if "doc" in d:
            out["doc"] = d["doc"]
        if d["type"] in ("record", "error"):
            out["fields"] = [self.field(f, ns) for f in d["fields"]]
        elif d["type"] == "enum":
            out["symbols"] = d["symbols"]
            if "default" in d:
                out["default"] = d["default"]
        else:
            out["size"] = d["size"]
        props = {k: v for k, v in d.items() if k not in (_ENUM_KEYS if d["type"] == "enum" else _SCHEMA_KEYS)}
        if "logicalType" in props:
            out["logicalType"] = _sorted_json(props.pop("logicalType"))
        if "aliases" in d:
            out["aliases"] = [_qualified(a, ns) for a in d["aliases"]]
        for key in sorted(props):
            out[key] = _sorted_json(props[key])
        return out

    def field(self, f: dict, space: str) -> dict:
        out: dict = {"name": f["name"], "type": self.node(f["type"], space)}
        for key in ("doc", "default", "order", "aliases"):
            if key in f:
                out[key] = _sorted_json(f[key])
        for key in sorted(k for k in f if k not in _FIELD_RESERVED):
            out[key] = _sorted_json(f[key])
        return out


class _NormalWriter:
    """Writes nodes in the normal form (module docstring)."""

    def __init__(self, names: Mapping[str, dict], known: set[str]) -> None:
        self.names = names
        self.known = known

    def node(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.node(b) for b in node]
        if isinstance(node, dict):
            kind = node["type"]
            out: dict = {"type": kind}
            if kind in ("array", "map"):
                key = "items" if kind == "array" else "values"
                out[key] = self.node(node[key])
            _tail(out, node, _SCHEMA_KEYS)
            return out
        if node in PRIMITIVES or node in self.known:
            return node
        self.known.add(node)
        d = self.names[node]
        out = {"name": d["name"], "type": "record" if d["type"] == "error" else d["type"]}
        if d["type"] in ("record", "error"):
            out["fields"] = [self.field(f) for f in d["fields"]]
        elif d["type"] == "enum":
            out["symbols"] = d["symbols"]
        else:
            out["size"] = d["size"]
        props = {k: v for k, v in d.items() if k not in (_ENUM_KEYS if d["type"] == "enum" else _SCHEMA_KEYS)}
        if "logicalType" in props:
            out["logicalType"] = _sorted_json(props.pop("logicalType"))
        if "doc" in d:
            out["doc"] = d["doc"]
        if "aliases" in d:
            out["aliases"] = sorted(d["aliases"])
        if d["type"] == "enum" and "default" in d:
            out["default"] = d["default"]
        for key in sorted(props):
            out[key] = _sorted_json(props[key])
        return out

    def field(self, f: dict) -> dict:
        out: dict = {"name": f["name"], "type": self.node(f["type"])}
        for key in ("order", "doc", "aliases", "default"):
            if key in f:
                out[key] = sorted(f[key]) if key == "aliases" else _sorted_json(f[key])
        for key in sorted(k for k in f if k not in _FIELD_RESERVED):
            out[key] = _sorted_json(f[key])
        return out


class AvroSchema(ParsedSchema):
    """A parsed Avro schema (module docstring); made by ``parse``.

    ``parsed`` is fastavro's parsed form of the whole schema (references inlined), what
    fastavro's ``schemaless_writer``/``schemaless_reader`` take; ``name`` is the full
    name of a named top-level type, else None."""

    schema_type = AVRO

    def __init__(self, root: Any, names: Mapping[str, dict], reference_names: frozenset[str],
                 references: tuple[SchemaReference, ...], resolved: Mapping[str, str], parsed: Any,
                 canonical: str | None = None) -> None:
        self._root = root
        self._names = MappingProxyType(dict(names))
        self._reference_names = reference_names
        self.references = references
        self._resolved = MappingProxyType(dict(resolved))
        self.parsed = parsed
        self._canonical = canonical if canonical is not None else _dumps(
            _JavaWriter(self._names, set(reference_names)).node(root, ""))

    @property
    def name(self) -> str | None:
        return self._root if isinstance(self._root, str) and self._root not in PRIMITIVES else None

    @property
    def root(self) -> Any:
        """The top-level node in the resolved form (a copy; ``avro_compat`` describes it)."""
        return copy.deepcopy(self._root)

    def canonical_string(self) -> str:
        return self._canonical

    def formatted(self, fmt: str = "") -> str:
        if fmt == "resolved":
            return _dumps(_JavaWriter(self._names, set()).node(self._root, ""))
        return self._canonical

    def normal_string(self) -> str:
        """The schema in the normal form (module docstring)."""
        return _dumps(_NormalWriter(self._names, set(self._reference_names)).node(self._root))

    def normalize(self) -> AvroSchema:
        """This schema with the normal form as its canonical string and its references
        sorted and deduplicated (the same types: the normal form loses no meaning)."""
        references = tuple(sorted(set(self.references), key=lambda r: (r.name, r.subject, r.version)))
        return AvroSchema(self._root, self._names, self._reference_names, references, self._resolved,
                          self.parsed, canonical=self.normal_string())

    def parsing_canonical_form(self) -> str:
        """Avro's Parsing Canonical Form of the whole schema, references inlined."""
        return str(_fastavro_pcf(self.parsed))

    def fingerprint(self, algorithm: str = "CRC-64-AVRO") -> str:
        """The hex fingerprint of ``parsing_canonical_form()``: ``CRC-64-AVRO`` (Avro's
        Rabin fingerprint, little-endian as Avro Java writes it), ``SHA-256``, ``MD5`` or
        any ``hashlib`` name. An unknown algorithm raises ``ValueError``."""
        return str(_fastavro_fingerprint(self.parsing_canonical_form(), algorithm))

    def fingerprint_sha256(self) -> str:
        return self.fingerprint("SHA-256")

    def incompatibilities(self, previous: AvroSchema) -> list[Incompatibility]:
        """The breaks of reading data written with ``previous`` using this schema."""
        return _incompatibilities(self._root, self._names, previous._root, previous._names)

    def backward_errors(self, previous: ParsedSchema) -> list[str]:
        if not isinstance(previous, AvroSchema):
            return type_mismatch(self, previous) or [f"cannot compare an Avro schema with a {type(previous).__name__}"]
        return [str(i) for i in self.incompatibilities(previous)]


def _walk(obj: Any, names: dict[str, dict]) -> Any:
    """The root node of one parsed schema text; its named types are added to ``names``."""
    walker = _Walker(names)
    try:
        root = walker.schema(obj, "", "", 1)
        walker.check_defaults()
    except RecursionError:  # a default nested deeper than the stack can follow (schemas are bounded)
        raise InvalidSchemaError("the schema is nested too deeply") from None
    return root


def parse(text: str, references: Sequence[SchemaReference] = (), resolved: Mapping[str, str] = _EMPTY) -> AvroSchema:
    """Parse an Avro schema (module docstring); ``InvalidSchemaError`` if it is not one."""
    resolved = dict(resolved)
    missing = [r for r in references if r.name not in resolved]
    if missing:
        r = missing[0]
        raise InvalidSchemaError(f"the reference {r.name!r} (subject {r.subject!r}, version {r.version}) is not "
                                 "resolved")
    names: dict[str, dict] = {}
    for ref_name, ref_text in resolved.items():
        what = f"the referenced schema {ref_name!r}"
        obj = _load_json(ref_text, what)
        try:
            _walk(obj, names)
        except InvalidSchemaError as e:
            hint = " (a missing or cyclic reference? dependencies come first)" if "unknown type" in str(e) else ""
            raise InvalidSchemaError(f"{what} is invalid: {e}{hint}") from None
    reference_names = frozenset(names)
    root = _walk(_load_json(text, "the schema"), names)
    schema = AvroSchema(root, names, reference_names, tuple(references), resolved, None)
    try:
        inlined = schema.formatted("resolved")
        inlined.encode("utf-8")
        schema.parsed = _fastavro_parse(json.loads(inlined))
    except UnicodeEncodeError:
        raise InvalidSchemaError("the schema holds an unpaired surrogate (\\ud800-\\udfff)") from None
    except Exception as e:  # fastavro's own checks: SchemaParseException, and ValueError for a bad decimal
        raise InvalidSchemaError(f"fastavro rejects the schema: {e}") from None
    return schema


def named_types(schema: AvroSchema) -> dict[str, dict]:
    """Every named type the schema can use, its own and its references': full name ->
    definition in the resolved form (a copy): ``type``, the full ``name``, ``aliases`` as
    full names, ``fields`` / ``symbols`` / ``size``, doc, default and custom properties,
    named types inside as full names (``avro_compat`` describes the form)."""
    return copy.deepcopy(dict(schema._names))


__all__ = ["AvroSchema", "MAX_DEPTH", "PRIMITIVES", "named_types", "parse"]
