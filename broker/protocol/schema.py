"""Table-driven message schemas: the ``Field`` / ``Message`` tables and their codec.

Owns the interpretation of the tables in ``broker/protocol/messages/`` (generated from
Kafka's JSON message definitions by ``tools/gen_protocol_schemas.py``):

* ``Field``: one field of a struct: snake_case name, Kafka type string (``int32``,
  ``string``, ``records``, ``[]int32``, ``[]TopicProduceData``, ``LeaderIdAndEpoch``...),
  the versions it exists in, the versions it is nullable / tagged in, its tag, its
  default and, for struct types, its nested fields. Versions use Kafka's notation
  (``"3+"``, ``"0-8"``, ``"none"``) and are stored as inclusive ``(lo, hi)`` tuples.
* ``Message``: a request or response: name, API key, valid and flexible versions, fields.
  Each struct of a message gets one lightweight class (``Struct`` subclass with
  ``__slots__`` holding every field of every version); ``message.cls`` is the top-level
  class and ``message.structs[name]`` the nested ones.
* ``decode(message, version, reader)`` / ``encode(message, version, value, writer)``.

Wire rules applied per version (KIP-482 for flexible versions):

* In a flexible version strings, bytes, records and arrays use their compact forms, and
  every struct (the message itself and each array element) ends with a tagged-field
  section; fields tagged in that version are written there, ascending by tag, only when
  they differ from their default. Unknown tags are skipped on decode.
* Fields absent from a version are not on the wire: decode sets them to their default,
  encode ignores them. Fields missing from the value given to encode take the default.
* ``records`` decode to a zero-copy memoryview of the input; ``bytes`` to ``bytes``.

For speed each (message, version) is compiled on first use into straight-line Python
functions (one per struct, like ``dataclasses`` builds ``__init__``) calling the
``Reader`` / ``Writer`` methods; the compiled source is kept in ``Codec.source``.

Thread-safety: tables and classes are immutable after import. Compilation is guarded by
a lock; decoded structs are plain mutable objects owned by the caller.
"""

from __future__ import annotations

import keyword
import struct
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from broker.protocol.errors import (
    InvalidValueError,
    ProtocolDecodeError,
    ProtocolEncodeError,
    TruncatedFrameError,
    UnsupportedApiVersionError,
)
from broker.protocol.primitives import MAX_STRING_BYTES, ZERO_UUID, Reader, Writer

# The highest version a "N+" range reaches: versions are int16 on the wire.
MAX_VERSION = 0x7FFF

VersionRange = tuple[int, int]

_FIXED_WIDTH = {
    "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4,
    "float64": 8, "bool": 1, "uuid": 16,
}
_PRIMITIVE_READER = {
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint16": "uint16", "uint32": "uint32", "float64": "float64", "bool": "boolean",
    "uuid": "uuid",
}
# struct format codes of the fixed-width types: runs of consecutive fixed-width fields are
# read and written with one precompiled struct.Struct (uuid stays separate: uuid.UUID).
_STRUCT_CODE = {
    "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "uint32": "I",
    "float64": "d", "bool": "?",
}
_VARIABLE = ("string", "bytes", "records")
PRIMITIVE_TYPES = frozenset(_FIXED_WIDTH) | frozenset(_VARIABLE)


def parse_versions(spec: str | None) -> VersionRange | None:
    """Kafka's version notation: ``"3+"``, ``"0-8"``, ``"5"``, ``"none"`` (-> None)."""
    if spec is None or spec == "none":
        return None
    spec = spec.strip()
    if spec.endswith("+"):
        return (int(spec[:-1]), MAX_VERSION)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def in_range(rng: VersionRange | None, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


_NO_DEFAULT = object()


class Field:
    """One field of a struct, as in Kafka's JSON schema (see module docstring)."""

    __slots__ = (
        "name", "type", "versions", "nullable", "tagged", "tag", "explicit_default",
        "ignorable", "fields", "is_array", "element_type", "struct_name",
    )

    def __init__(
        self,
        name: str,
        type: str,
        versions: str,
        *,
        nullable: str | None = None,
        tagged: str | None = None,
        tag: int | None = None,
        default: Any = _NO_DEFAULT,
        ignorable: bool = False,
        fields: tuple[Field, ...] | None = None,
    ) -> None:
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"field name {name!r} is not a Python identifier")
        self.name = name
        self.type = type
        self.versions = parse_versions(versions)
        self.nullable = parse_versions(nullable)
        self.tagged = parse_versions(tagged)
        self.tag = tag
        self.explicit_default = default
        self.ignorable = ignorable
        self.fields = tuple(fields) if fields is not None else None
        self.is_array = type.startswith("[]")
        self.element_type = type[2:] if self.is_array else type
        is_struct = self.element_type not in PRIMITIVE_TYPES
        if is_struct != (self.fields is not None):
            raise ValueError(f"field {name}: struct type {type} needs nested fields")
        self.struct_name = self.element_type if is_struct else None

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type!r}, {self.versions})"

    def default_value(self, structs: Mapping[str, type]) -> Any:
        """A fresh default: the explicit one, else Kafka's implicit default for the type
        (0, False, "", b"", [], the zero UUID, a default struct; records: null)."""
        d = self.explicit_default
        if d is not _NO_DEFAULT:
            return list(d) if isinstance(d, list) else d
        if self.is_array:
            return []
        t = self.type
        if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
            return 0
        if t == "float64":
            return 0.0
        if t == "bool":
            return False
        if t == "uuid":
            return ZERO_UUID
        if t == "string":
            return ""
        if t == "bytes":
            return b""
        if t == "records":
            return None
        if self.nullable is not None:
            return None
        return structs[self.struct_name]()


class Struct:
    """Base of the generated struct classes: attribute access, keyword construction with
    schema defaults, value equality, a readable repr and ``to_dict()``."""

    __slots__ = ()
    _field_names: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._field_names)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        parts = []
        for n in self._field_names:
            v = getattr(self, n, "<unset>")
            if type(v) is memoryview:
                v = f"<{v.nbytes} bytes>"
            else:
                v = repr(v)
            parts.append(f"{n}={v}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        """Plain dicts and lists, memoryviews turned into bytes (for tests and logs)."""
        return {n: _plain(getattr(self, n)) for n in self._field_names}


def _plain(v: Any) -> Any:
    if isinstance(v, Struct):
        return v.to_dict()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if type(v) is memoryview:
        return v.tobytes()
    return v


def _coerce(cls: type, value: Any) -> Any:
    """Turn a mapping or attribute object into ``cls`` so encode accepts dicts too."""
    if isinstance(value, Mapping):
        return cls(**value)
    if hasattr(value, "__dict__"):
        return cls(**{k: v for k, v in vars(value).items() if k in cls._field_names})
    raise ProtocolEncodeError(f"cannot encode {type(value).__name__} as {cls.__name__}")


_MISSING = object()


def _default_source(f: Field, structs: Mapping[str, type], ns: dict[str, Any], key: str) -> str:
    """Python source for a fresh default of ``f``; constants go into ``ns`` under ``key``."""
    d = f.default_value(structs)
    if d is None or isinstance(d, (bool, int, float, str)):
        return repr(d)
    if isinstance(d, list) and not d:
        return "[]"
    if isinstance(d, (bytes, uuid.UUID)):  # immutable: share one object
        ns[key] = d
        return key
    ns[key] = f  # a struct default: build a fresh one each time
    return f"{key}.default_value(_structs)"


def _make_struct_class(name: str, fields: tuple[Field, ...], structs: dict[str, type]) -> type:
    names = tuple(f.name for f in fields)
    if len(set(names)) != len(names):
        raise ValueError(f"struct {name} has duplicate field names")
    ns: dict[str, Any] = {"_MISSING": _MISSING, "_structs": structs}
    lines = []
    for i, f in enumerate(fields):
        dflt = _default_source(f, structs, ns, f"_d{i}")
        lines.append(f"    self.{f.name} = {dflt} if {f.name} is _MISSING else {f.name}")
    params = ", ".join(f"{n}=_MISSING" for n in names)
    src = f"def __init__(self, *, {params}):\n" if names else "def __init__(self):\n"
    src += "\n".join(lines) if lines else "    pass"
    exec(compile(src, f"<struct {name}>", "exec"), ns)
    init = ns["__init__"]
    init.__qualname__ = f"{name}.__init__"
    return type(name, (Struct,), {"__slots__": names, "_field_names": names, "__init__": init})


class Message:
    """A request or response schema (the table) plus its lazily compiled codecs."""

    def __init__(
        self,
        name: str,
        *,
        api_key: int,
        kind: str,
        valid: str,
        flexible: str,
        fields: tuple[Field, ...],
    ) -> None:
        if kind not in ("request", "response"):
            raise ValueError(kind)
        self.name = name
        self.api_key = api_key
        self.kind = kind
        self.valid_versions: VersionRange = parse_versions(valid)  # type: ignore[assignment]
        self.flexible_versions = parse_versions(flexible)
        self.fields = tuple(fields)
        self.structs: dict[str, type] = {}
        self._struct_fields: dict[str, tuple[Field, ...]] = {}
        self._collect(name, self.fields)
        self.cls = self.structs[name]
        for sname, cls in self.structs.items():
            if sname != name:
                setattr(self.cls, sname, cls)  # e.g. ProduceResponse.PartitionProduceResponse
        self._codecs: dict[int, Codec] = {}
        self._lock = threading.Lock()

    def _collect(self, sname: str, fields: tuple[Field, ...]) -> None:
        for f in fields:
            if f.fields is not None:
                self._collect(f.struct_name, f.fields)  # type: ignore[arg-type]
        known = self._struct_fields.get(sname)
        if known is not None:  # a common struct used in several places: one class
            if [(f.name, f.type) for f in known] != [(f.name, f.type) for f in fields]:
                raise ValueError(f"{self.name}: struct {sname} defined twice differently")
            return
        self._struct_fields[sname] = fields
        self.structs[sname] = _make_struct_class(sname, fields, self.structs)

    def __repr__(self) -> str:
        lo, hi = self.valid_versions
        return f"<Message {self.name} key={self.api_key} v{lo}-{hi}>"

    def new(self, **kwargs: Any) -> Struct:
        """A top-level struct with defaults for every field not given."""
        return self.cls(**kwargs)

    def is_flexible(self, version: int) -> bool:
        return in_range(self.flexible_versions, version)

    def codec(self, version: int) -> Codec:
        codec = self._codecs.get(version)
        if codec is None:
            if not in_range(self.valid_versions, version):
                raise UnsupportedApiVersionError(self.api_key, version, f"{self.name} has no v{version}")
            with self._lock:
                codec = self._codecs.get(version)
                if codec is None:
                    codec = _Compiler(self, version).compile()
                    self._codecs[version] = codec
        return codec


class Codec:
    """The compiled decode/encode functions of one message version."""

    __slots__ = ("message", "version", "decode", "encode", "source")

    def __init__(self, message: Message, version: int, decode: Any, encode: Any, source: str):
        self.message = message
        self.version = version
        self.decode = decode  # (Reader) -> Struct
        self.encode = encode  # (Writer, value) -> None
        self.source = source


class _Compiler:
    """Turns one (message, version) into Python source and executes it once."""

    def __init__(self, message: Message, version: int) -> None:
        self.message = message
        self.version = version
        self.flexible = message.is_flexible(version)
        self.ns: dict[str, Any] = {
            "_new": object.__new__, "_R": Reader, "_W": Writer, "_coerce": _coerce,
            "_structs": message.structs, "_SE": struct.error, "_trunc": _truncated_struct,
            "_u32": _I32S.unpack_from, "_u16": _I16S.unpack_from, "_p32": _I32S.pack,
            "_p16": _I16S_PACK.pack, "_IVE": InvalidValueError, "_PEE": ProtocolEncodeError,
            "_MAXS": MAX_STRING_BYTES,
        }
        self.lines: list[str] = []
        self.done: dict[str, tuple[str, str, int]] = {}
        self.counter = 0

    def _name(self, prefix: str, value: Any = _MISSING) -> str:
        self.counter += 1
        name = f"_{prefix}{self.counter}"
        if value is not _MISSING:
            self.ns[name] = value
        return name

    def compile(self) -> Codec:
        top = self.message.name
        dec, enc, _ = self.struct(top)
        src = "\n".join(self.lines)
        filename = f"<codec {self.message.name} v{self.version}>"
        exec(compile(src, filename, "exec"), self.ns)
        return Codec(self.message, self.version, self.ns[dec], self.ns[enc], src)

    # -- per type helpers --------------------------------------------------------------

    def _min_width(self, f: Field) -> int:
        """Fewest bytes a value of this field can take on the wire in this version."""
        if f.is_array or f.type in _VARIABLE:
            return 1 if self.flexible else (4 if f.type != "string" else 2)
        if f.type in _FIXED_WIDTH:
            return _FIXED_WIDTH[f.type]
        if in_range(f.nullable, self.version):
            return 1
        return self.struct(f.struct_name)[2]  # type: ignore[arg-type]

    def _read_expr(self, f: Field, r: str, flexible: bool) -> str:
        v = self.version
        nullable = in_range(f.nullable, v)
        c = "compact_" if flexible else ""
        if f.is_array:
            et = f.element_type
            if et in _PRIMITIVE_READER:
                item, width = f"_R.{_PRIMITIVE_READER[et]}", _FIXED_WIDTH[et]
            elif et in _VARIABLE:
                item = f"_R.{c}{et}"
                width = 1 if flexible else (2 if et == "string" else 4)
            else:
                item, _, width = self.struct(et)
            n = "nullable_" if nullable else ""
            return f"{r}.{c}{n}array({item}, {max(width, 1)})"
        t = f.type
        if t in _PRIMITIVE_READER:
            return f"{r}.{_PRIMITIVE_READER[t]}()"
        if t == "records":
            expr = f"{r}.{c}records()"
            if not nullable:
                chk = self._name("nn", _non_null)
                return f"{chk}({expr}, {f.name!r})"
            return expr
        if t in ("string", "bytes"):
            if nullable:
                return f"{r}.{'compact_nullable_' if flexible else 'nullable_'}{t}()"
            return f"{r}.{c}{t}()"
        dec = self.struct(f.struct_name)[0]  # type: ignore[arg-type]
        if nullable:
            return f"{r}.nullable_struct({dec})"
        return f"{dec}({r})"

    def _write_stmt(self, f: Field, w: str, val: str, flexible: bool) -> str:
        v = self.version
        nullable = in_range(f.nullable, v)
        c = "compact_" if flexible else ""
        if f.is_array:
            et = f.element_type
            if et in _PRIMITIVE_READER:
                item = f"_W.{_PRIMITIVE_READER[et]}"
            elif et in _VARIABLE:
                item = f"_W.{c}{et}"
            else:
                item = self.struct(et)[1]
            n = "nullable_" if nullable else ""
            return f"{w}.{c}{n}array({val}, {item})"
        t = f.type
        if t in _PRIMITIVE_READER:
            return f"{w}.{_PRIMITIVE_READER[t]}({val})"
        if t == "records":
            if nullable:
                return f"{w}.{c}records({val})"
            chk = self._name("nn", _non_null_enc)
            return f"{w}.{c}records({chk}({val}, {f.name!r}))"
        if t in ("string", "bytes"):
            if nullable:
                return f"{w}.{'compact_nullable_' if flexible else 'nullable_'}{t}({val})"
            return f"{w}.{c}{t}({val})"
        enc = self.struct(f.struct_name)[1]  # type: ignore[arg-type]
        if nullable:
            return f"{w}.nullable_struct({val}, {enc})"
        return f"{enc}({w}, {val})"

    def _default_expr(self, f: Field) -> str:
        return _default_source(f, self.message.structs, self.ns, self._name("df"))

    # -- structs -----------------------------------------------------------------------

    @staticmethod
    def _runs(fields: list[Field]) -> list[list[Field]]:
        """Split fields into runs of consecutive fixed-width scalars and single others."""
        runs: list[list[Field]] = []
        for f in fields:
            fixed = not f.is_array and f.type in _STRUCT_CODE
            if fixed and runs and runs[-1][-1].type in _STRUCT_CODE and not runs[-1][-1].is_array:
                runs[-1].append(f)
            else:
                runs.append([f])
        return runs

    def struct(self, sname: str) -> tuple[str, str, int]:
        """Emit decode and encode functions for struct ``sname``; returns their names and
        the struct's minimum encoded width in this version."""
        if sname in self.done:
            return self.done[sname]
        v = self.version
        flexible = self.flexible
        fields = self.message._struct_fields[sname]
        cls_name = self._name("C", self.message.structs[sname])
        dec = self._name("d")
        enc = self._name("e")
        present = [f for f in fields if in_range(f.versions, v)]
        tagged = [f for f in present if flexible and in_range(f.tagged, v)]
        tagged.sort(key=lambda f: f.tag)  # type: ignore[arg-type, return-value]
        regular = [f for f in present if f not in tagged]
        absent = [f for f in fields if f not in present]
        width = sum(self._min_width(f) for f in regular) + (1 if flexible else 0)
        self.done[sname] = (dec, enc, width)

        # Decode works on locals (buf, p = the reader's position, end) and inlines the
        # common field kinds; around any Reader method call the position is synced back
        # (``r.pos = p`` before, ``p = r.pos`` after). A struct.error from an inline
        # unpack_from (buf is sliced to end, so it bounds-checks) becomes a
        # TruncatedFrameError. Encode appends to the writer's bytearray ``b`` directly,
        # reloading it after any call (Writer.raw may start a new bytearray).
        d = [f"def {dec}(r):", f"    o = _new({cls_name})", "    buf = r.buf", "    p = r.pos",
             "    end = r.end", "    try:"]
        e = [f"def {enc}(w, o):", f"    if o.__class__ is not {cls_name}:",
             f"        o = _coerce({cls_name}, o)", "    b = w.buf"]
        IND = "        "
        for run in self._runs(regular):
            f = run[0]
            if f.type in _STRUCT_CODE and not f.is_array:  # fixed-width: one struct.Struct
                fmt = struct.Struct(">" + "".join(_STRUCT_CODE[g.type] for g in run))
                sname_ = self._name("S", fmt)
                targets = ", ".join(f"o.{g.name}" for g in run)
                d.append(f"{IND}{targets}, = {sname_}.unpack_from(buf, p)")
                d.append(f"{IND}p += {fmt.size}")
                e.append(f"    b += {sname_}.pack({targets})")
                continue
            nullable = in_range(f.nullable, v)
            if f.is_array and not flexible and f.element_type not in _VARIABLE:
                et = f.element_type
                if et in _STRUCT_CODE:  # fixed-iw items: one unpack_from per item
                    fmt = struct.Struct(">" + _STRUCT_CODE[et])
                    item_s = self._name("S", fmt)
                    iw = fmt.size
                    item_dec = None
                elif et in _PRIMITIVE_READER:  # uuid
                    item_dec, iw = f"_R.{_PRIMITIVE_READER[et]}", _FIXED_WIDTH[et]
                else:
                    item_dec, _, iw = self.struct(et)
                d.append(f"{IND}n = _u32(buf, p)[0]")
                d.append(f"{IND}p += 4")
                d.append(f"{IND}if n < 0:")
                if nullable:
                    d.append(f"{IND}    o.{f.name} = None")
                    d.append(f"{IND}else:")
                else:
                    d.append(f"{IND}    raise _IVE('non-nullable array is null')")
                J = IND + "    " if nullable else IND
                d.append(f"{J}if r.budget is not None:")
                d.append(f"{J}    r.spend(n)")
                d.append(f"{J}if n * {max(iw, 1)} > end - p:")
                d.append(f"{J}    r.pos = p")
                d.append(f"{J}    r.check_count(n, {max(iw, 1)})")
                if item_dec is None:
                    d.append(f"{J}o.{f.name} = [{item_s}.unpack_from(buf, p + i * {iw})[0] "
                             f"for i in range(n)]")
                    d.append(f"{J}p += n * {iw}")
                else:
                    d.append(f"{J}r.pos = p")
                    d.append(f"{J}o.{f.name} = [{item_dec}(r) for _ in range(n)]")
                    d.append(f"{J}p = r.pos")
                if not nullable:
                    item_enc = (f"_W.{_PRIMITIVE_READER[et]}" if et in _PRIMITIVE_READER
                                else self.struct(et)[1])
                    e.append(f"    v = o.{f.name}")
                    e.append("    if v is None:")
                    e.append("        raise _PEE('cannot encode None as non-nullable array')")
                    e.append("    b += _p32(len(v))")
                    e.append("    for x in v:")
                    e.append(f"        {item_enc}(w, x)")
                    e.append("    b = w.buf")
                    continue
                e.append(f"    {self._write_stmt(f, 'w', 'o.' + f.name, flexible)}")
                e.append("    b = w.buf")
                continue
            if f.type == "string" and not flexible and not nullable:
                d.append(f"{IND}n = _u16(buf, p)[0]")  # unsigned: a negative length is > 0x7fff
                d.append(f"{IND}p += 2")
                d.append(f"{IND}if n > 0x7fff:")
                d.append(f"{IND}    raise _IVE('non-nullable string is null')")
                d.append(f"{IND}if p + n > end:")
                d.append(f"{IND}    r.pos = p")
                d.append(f"{IND}    r._utf8(n)")  # raises the usual truncation error
                d.append(f"{IND}try:")
                d.append(f"{IND}    o.{f.name} = str(buf[p:p + n], 'utf-8')")
                d.append(f"{IND}except UnicodeDecodeError as x:")
                d.append(f"{IND}    raise _IVE(f'string is not valid UTF-8: {{x}}') from None")
                d.append(f"{IND}p += n")
                e.append(f"    v = o.{f.name}")
                e.append("    if type(v) is not str:")
                e.append("        raise _PEE(f'cannot encode {v!r} as string')")
                e.append("    x = v.encode('utf-8')")
                e.append("    if len(x) > _MAXS:")
                e.append("        raise _PEE(f'string of {len(x)} bytes above {_MAXS}')")
                e.append("    b += _p16(len(x))")
                e.append("    b += x")
                continue
            d.append(f"{IND}r.pos = p")
            d.append(f"{IND}o.{f.name} = {self._read_expr(f, 'r', flexible)}")
            d.append(f"{IND}p = r.pos")
            e.append(f"    {self._write_stmt(f, 'w', 'o.' + f.name, flexible)}")
            e.append("    b = w.buf")
        d.append(f"{IND}pass")
        d.append("    except _SE:")
        d.append(f"        raise _trunc({sname!r}, p, end) from None")
        d.append("    r.pos = p")
        for f in absent + tagged:
            d.append(f"    o.{f.name} = {self._default_expr(f)}")
        if flexible:
            d.append("    n = r.tagged_count()")
            d.append("    while n:")
            d.append("        n -= 1")
            d.append("        tag = r.uvarint()")
            d.append("        s = r.sub(r.uvarint())")
            for i, f in enumerate(tagged):
                kw = "if" if i == 0 else "elif"
                d.append(f"        {kw} tag == {f.tag}:")
                d.append(f"            o.{f.name} = {self._read_expr(f, 's', True)}")
        d.append("    return o")

        if flexible:
            if not tagged:
                e.append("    w.buf.append(0)")
            else:
                e.append("    t = []")
                for f in tagged:
                    dflt = self._name("dv", f.default_value(self.message.structs))
                    e.append(f"    v = o.{f.name}")
                    e.append(f"    if v != {dflt}:")
                    e.append("        s = _W(1 << 62)")
                    e.append(f"        {self._write_stmt(f, 's', 'v', True)}")
                    e.append(f"        t.append(({f.tag}, s.buf))")
                e.append("    w.tagged_fields(t)")
        self.lines.extend(d + e + [""])
        return dec, enc, width


_I16S = struct.Struct(">H")  # string lengths read unsigned: a null (-1) reads as 0xffff
_I32S = struct.Struct(">i")
_I16S_PACK = struct.Struct(">h")


def _truncated_struct(sname: str, pos: int, end: int) -> TruncatedFrameError:
    return TruncatedFrameError(f"{sname}: fixed-width fields at byte {pos} need more than the {end - pos} bytes left")


def _non_null(value: Any, name: str) -> Any:
    if value is None:
        raise InvalidValueError(f"non-nullable field {name} is null")
    return value


def _non_null_enc(value: Any, name: str) -> Any:
    if value is None:
        raise ProtocolEncodeError(f"non-nullable field {name} is None")
    return value


# --- Public entry points ------------------------------------------------------------


def decode(message: Message, version: int, reader: Reader) -> Any:
    """Decode one ``message`` body of ``version`` from ``reader`` (advancing it).

    Raises ``UnsupportedApiVersionError`` for a version the schema does not define and other
    ``ProtocolDecodeError`` subclasses for malformed bytes. Trailing bytes are left in the
    reader (Kafka ignores them too); use ``decode_bytes(..., exact=True)`` to reject them.
    """
    return message.codec(version).decode(reader)


def encode(message: Message, version: int, value: Any, writer: Writer) -> None:
    """Append ``value`` (a struct of ``message.cls``, or a dict) encoded as ``version``."""
    codec = message.codec(version)
    try:
        codec.encode(writer, value)
    except ProtocolEncodeError:
        raise
    except (TypeError, AttributeError, ValueError, OverflowError, struct.error) as e:
        if isinstance(e, ProtocolDecodeError):
            raise
        raise ProtocolEncodeError(f"{message.name} v{version}: {e}") from e


def decode_bytes(message: Message, version: int, data: Any, *, exact: bool = True) -> Any:
    """Decode a whole buffer; with ``exact`` trailing bytes raise ``InvalidValueError``."""
    reader = Reader(data)
    value = decode(message, version, reader)
    if exact and reader.pos != reader.end:
        raise InvalidValueError(f"{reader.end - reader.pos} trailing bytes after {message.name}")
    return value


def encode_bytes(message: Message, version: int, value: Any) -> bytes:
    writer = Writer()
    encode(message, version, value, writer)
    return writer.getvalue()
