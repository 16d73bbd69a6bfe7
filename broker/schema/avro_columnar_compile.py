"""Compiling the columnar Avro decoder: a (writer, reader) pair of schemas into the tree of
plans (``avro_columnar_plan``) and skippers (``avro_columnar_walk``) that decodes writer
data as the reader's Arrow type.

Owns ``compile_plan(writer, reader, recursive_depth, vectorised)`` and the resolution
rules it applies, Avro's, as Avro Java's resolving decoder applies them:

* records: each reader field takes the writer field of its name, else of one of its
  aliases; writer fields no reader field takes are skipped; a reader field no writer field
  feeds takes its default (``avro_arrow.ValueConverter``), or, without one, fails every
  record (as Avro Java fails on such data, not before);
* promotions: int to long, float or double; long to float or double; float to double;
  string to bytes and bytes to string; the reader's logical type decides the output;
* enums: writer symbols map to the reader's by name, an unknown one to the reader's
  default, else the records holding it fail; fixed: the sizes must be equal;
* a writer union: each branch resolves on its own, against the reader's union (its best
  branch, below) or against the reader's type; a branch that resolves nowhere fails the
  records that took it;
* a reader union against another writer type: Avro Java's best branch, the first of the
  writer's type (for a named type: the same full name or a reader alias of it; an enum or
  fixed of the same simple name; for a record, else, the first that resolves, names
  aside, one of the same simple name preferred), else the first the writer's type
  promotes to;
* any other pair fails the records that reach it.

Recursive records: the reader's are expanded ``recursive_depth`` times (Spark's
``recursiveFieldMaxDepth``, ``avro_arrow``), then decoded by the fallback into JSON text;
skippers of a recursive writer type refer to themselves.

Invariants: compiling reads only the schemas; ``AvroArrowError`` for a reader with no Arrow
form is raised before anything else is built.

Thread-safety: pure; a compiled plan is immutable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from fastavro import parse_schema

from broker.schema.avro import AvroSchema, named_types
from broker.schema.avro_arrow import (
    TIMESTAMP_SCALE,
    TypeMapper,
    UnionLayout,
    ValueConverter,
    json_text,
    kind_of,
    logical_type,
    union_layout,
)
from broker.schema.avro_columnar_plan import (
    BoolPlan,
    DecimalPlan,
    DefaultPlan,
    EntryPlan,
    EnumPlan,
    ErrorPlan,
    FallbackPlan,
    FixedPlan,
    ListPlan,
    NullPlan,
    NumPlan,
    Plan,
    ReaderUnionPlan,
    RecordPlan,
    SpanPlan,
    UnionPlan,
)
from broker.schema.avro_columnar_walk import (
    SkipBoolean,
    SkipBytes,
    SkipFixed,
    SkipList,
    Skipper,
    SkipRecord,
    SkipUnion,
    SkipVarint,
)
from broker.schema.avro_compat import NAME_MISMATCH, incompatibilities

# reader type -> writer types it reads besides its own (Avro's promotions)
PROMOTIONS = {
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "bytes": frozenset({"string"}),
    "string": frozenset({"bytes"}),
}
_NUMERIC = frozenset({"int", "long", "float", "double"})

def _standalone(node: Any, names: Mapping[str, dict], seen: set[str]) -> Any:
    """A node as a schema of its own for fastavro (named types inlined at their first
    use, full names), without logical types."""
    if isinstance(node, list):
        return [_standalone(b, names, seen) for b in node]
    if isinstance(node, dict):
        out = {"type": node["type"]}
        for key in ("items", "values"):
            if key in node:
                out[key] = _standalone(node[key], names, seen)
        return out
    if node in names and node not in seen:
        seen.add(node)
        d = names[node]
        kind = "record" if d["type"] == "error" else d["type"]
        out = {"type": kind, "name": node}
        if d.get("aliases"):
            out["aliases"] = list(d["aliases"])
        if kind == "record":
            fields = []
            for f in d["fields"]:
                field = {"name": f["name"], "type": _standalone(f["type"], names, seen)}
                for key in ("default", "aliases"):
                    if key in f:
                        field[key] = f[key]
                fields.append(field)
            out["fields"] = fields
        elif kind == "enum":
            out["symbols"] = list(d["symbols"])
            if "default" in d:
                out["default"] = d["default"]
        else:
            out["size"] = d["size"]
        return out
    return node


class Compiler:
    """Compiles the plan of one (writer, reader) pair (module docstring)."""

    def __init__(self, writer: AvroSchema, reader: AvroSchema, recursive_depth: int) -> None:
        self.wnames = named_types(writer)
        self.rnames = named_types(reader)
        self.mapper = TypeMapper(self.rnames, recursive_depth)
        self.values = ValueConverter(self.mapper)
        self.skippers: dict[str, Skipper] = {}

    # skippers of writer nodes

    def skipper(self, w: Any) -> Skipper:
        names = self.wnames
        kind = kind_of(w, names)
        if kind in ("null", "float", "double", "fixed"):
            return SkipFixed(names[w]["size"] if kind == "fixed" else {"null": 0, "float": 4, "double": 8}[kind])
        if kind == "boolean":
            return SkipBoolean()
        if kind in ("int", "long"):
            return SkipVarint(kind == "int")
        if kind == "enum":
            return SkipVarint(True, len(names[w]["symbols"]))
        if kind in ("bytes", "string"):
            return SkipBytes()
        if kind == "array":
            return SkipList(self.skipper(w["items"]))
        if kind == "map":
            entry = SkipRecord()
            entry.set_fields([SkipBytes(), self.skipper(w["values"])])
            return SkipList(entry)
        if kind == "union":
            return SkipUnion([self.skipper(b) for b in w])
        found = self.skippers.get(w)
        if found is None:
            record = self.skippers[w] = SkipRecord()
            record.set_fields([self.skipper(f["type"]) for f in names[w]["fields"]])
            found = record
        return found

    # plans

    def plan(self, w: Any, r: Any, stack: tuple[str, ...], where: str) -> Plan:
        wk, rk = kind_of(w, self.wnames), kind_of(r, self.rnames)
        if wk == "union":
            return self.writer_union(w, r, stack, where)
        if rk == "union":
            return self.reader_union(w, r, stack, where)
        type_ = self.mapper.type(r, stack, where)
        if rk == "record" and self.mapper.cut(r, stack, where):
            if wk != "record":
                return ErrorPlan(type_, f"the writer's {wk} cannot be read as the reader's record {r}")
            return self.fallback(w, r, stack, True)
        if wk == rk:
            if rk == "record":
                return self.record(w, r, type_, stack)
            if rk == "enum":
                return self.enum(w, r)
            if rk == "fixed":
                wsize, rsize = self.wnames[w]["size"], self.rnames[r]["size"]
                if wsize != rsize:
                    return ErrorPlan(type_, f"the writer's fixed {w} of {wsize} bytes cannot be read as the "
                                            f"reader's fixed {r} of {rsize}")
                if pa.types.is_decimal(type_):
                    return DecimalPlan(type_, rsize)
                return FixedPlan(type_, rsize)
            if rk == "array":
                item = self.plan(w["items"], r["items"], stack, f"{where}[]")
                return ListPlan(type_, item, self.skipper(w["items"]), False)
            if rk == "map":
                value = self.plan(w["values"], r["values"], stack, f"{where}{{}}")
                entry = SkipRecord()
                entry.set_fields([SkipBytes(), self.skipper(w["values"])])
                return ListPlan(type_, EntryPlan(value), entry, True)
        if wk == rk or wk in PROMOTIONS.get(rk, ()):
            return self.primitive(wk, rk, r, type_)
        what = f"{wk} {w}" if wk in ("record", "enum", "fixed") else wk
        return ErrorPlan(type_, f"the writer's {what} cannot be read as the reader's {rk} (at {where or 'the top'})")

    def primitive(self, wk: str, rk: str, r: Any, type_: pa.DataType) -> Plan:
        if rk == "null":
            return NullPlan()
        if rk == "boolean":
            return BoolPlan()
        if rk in _NUMERIC:
            logical = logical_type(r, self.rnames)
            scale = TIMESTAMP_SCALE.get(logical.name) if logical is not None else None
            return NumPlan(type_, wk, scale if pa.types.is_timestamp(type_) else None)
        if pa.types.is_decimal(type_):
            return DecimalPlan(type_, None)
        return SpanPlan(type_)

    def enum(self, w: str, r: str) -> Plan:
        wdef, rdef = self.wnames[w], self.rnames[r]
        rsym = list(rdef["symbols"])
        default = rsym.index(rdef["default"]) if rdef.get("default") in rsym else -1
        table = np.array([rsym.index(s) if s in rsym else default for s in wdef["symbols"]], np.int32)
        return EnumPlan(r, rsym, table, list(wdef["symbols"]))

    def record(self, w: str, r: str, type_: pa.DataType, stack: tuple[str, ...]) -> Plan:
        wdef, rdef = self.wnames[w], self.rnames[r]
        inner = (*stack, r)
        by_name = {f["name"]: i for i, f in enumerate(wdef["fields"])}
        feeds: dict[int, list[int]] = {}
        plans: list[Plan] = []
        defaults: list[int] = []
        for j, rf in enumerate(rdef["fields"]):
            where = f"{r}.{rf['name']}"
            i = by_name.get(rf["name"])
            if i is None:
                i = next((by_name[a] for a in rf.get("aliases", ()) if a in by_name), None)
            field_type = type_[j].type
            if i is not None:
                plans.append(self.plan(wdef["fields"][i]["type"], rf["type"], inner, where))
                feeds.setdefault(i, []).append(j)
                continue
            defaults.append(j)
            if "default" not in rf:
                plans.append(ErrorPlan(field_type, f"the reader's field {where} has no default and the writer's "
                                                   f"{w} has no such field"))
                continue
            try:
                plans.append(DefaultPlan(field_type, self.values.default(rf["type"], rf["default"], inner)))
            except (ValueError, TypeError, pa.ArrowException) as e:
                plans.append(ErrorPlan(field_type, f"the default of the reader's field {where} has no Arrow form: {e}"))
        steps: list[tuple[list[int], Skipper | int | None]] = []
        for i, wf in enumerate(wdef["fields"]):
            if i in feeds:
                steps.append((feeds[i], None))
                continue
            skip = self.skipper(wf["type"])
            if skip.pure and skip.fixed is not None:
                if skip.fixed == 0:
                    continue
                if steps and not steps[-1][0] and isinstance(steps[-1][1], int):
                    steps[-1] = ([], steps[-1][1] + skip.fixed)
                else:
                    steps.append(([], skip.fixed))
            else:
                steps.append(([], skip))
        return RecordPlan(type_, plans, steps, defaults)

    def best_branch(self, r: list, w: Any) -> int | None:
        """Avro Java's choice of the reader union's branch for a writer node: the first of
        the same type (named types: the same name, or an alias; a record: one that
        resolves, preferring the same simple name), else the first promotion."""
        wk = kind_of(w, self.wnames)
        structure = -1
        for j, b in enumerate(r):
            if kind_of(b, self.rnames) != wk:
                continue
            if wk not in ("record", "enum", "fixed"):
                return j
            rdef = self.rnames[b]
            if b == w or w in rdef.get("aliases", ()):
                return j
            if wk != "record" and b.rpartition(".")[2] == w.rpartition(".")[2]:
                return j
            if wk == "record" and self.resolves(b, w):
                if structure < 0 or b.rpartition(".")[2] == w.rpartition(".")[2]:
                    structure = j
        if structure >= 0:
            return structure
        for j, b in enumerate(r):
            if wk in PROMOTIONS.get(kind_of(b, self.rnames), ()):
                return j
        return None

    def resolves(self, r: str, w: str) -> bool:
        """Whether writer record ``w`` resolves against reader record ``r``, their own
        names aside (Avro Java's structure match)."""
        return all(i.error_type == NAME_MISMATCH and i.location == ("name",)
                   for i in incompatibilities(r, self.rnames, w, self.wnames))

    def writer_union(self, w: list, r: Any, stack: tuple[str, ...], where: str) -> Plan:
        rk = kind_of(r, self.rnames)
        type_ = self.mapper.type(r, stack, where)
        branches: list[tuple[int, Plan | None, str | None]] = []
        if rk == "union":
            layout = union_layout(r, self.rnames)
            for wb in w:
                rb = self.best_branch(r, wb) if kind_of(wb, self.wnames) != "null" else next(
                    (j for j, b in enumerate(r) if kind_of(b, self.rnames) == "null"), None)
                if rb is None:
                    branches.append((-1, None, f"a value of the writer's union branch {kind_of(wb, self.wnames)} "
                                               f"that no branch of the reader's union reads (at {where or 'the top'})"))
                    continue
                slot = layout.slot_of[rb]
                plan = None if slot < 0 else self.plan(wb, layout.slot_nodes[slot], stack, where)
                branches.append((slot, plan, None))
            return UnionPlan(type_, layout, branches)
        if rk == "null":
            layout = UnionLayout("null", True, (-1,) * len(w), ())
        else:
            layout = UnionLayout("single", False, (0,) * len(w), (r,))
        for wb in w:
            wbk = kind_of(wb, self.wnames)
            if wbk == "null" and rk != "null":
                branches.append((-1, None, f"a null of the writer's union where the reader's {rk} has none "
                                           f"(at {where or 'the top'})"))
            elif rk == "null":
                branches.append((-1, self.plan(wb, r, stack, where) if wbk != "null" else None, None))
            else:
                branches.append((0, self.plan(wb, r, stack, where), None))
        return UnionPlan(type_, layout, branches)

    def reader_union(self, w: Any, r: list, stack: tuple[str, ...], where: str) -> Plan:
        layout = union_layout(r, self.rnames)
        type_ = self.mapper.type(r, stack, where)
        rb = self.best_branch(r, w)
        if rb is None:
            wk = kind_of(w, self.wnames)
            return ErrorPlan(type_, f"the writer's {wk} matches no branch of the reader's union (at "
                                    f"{where or 'the top'})")
        slot = layout.slot_of[rb]
        if slot < 0:
            return ReaderUnionPlan(type_, layout, -1, None)
        return ReaderUnionPlan(type_, layout, slot, self.plan(w, layout.slot_nodes[slot], stack, where))

    def fallback(self, w: Any, r: Any, stack: tuple[str, ...], as_json: bool) -> Plan:
        writer = parse_schema(_standalone(w, self.wnames, set()))
        reader = parse_schema(_standalone(r, self.rnames, set()))
        if as_json:
            return FallbackPlan(pa.string(), self.skipper(w), writer, reader, json_text)
        type_ = self.mapper.type(r, stack)
        values = self.values
        return FallbackPlan(type_, self.skipper(w), writer, reader, lambda raw: values.convert(r, raw, stack))


def compile_plan(writer: AvroSchema, reader: AvroSchema, recursive_depth: int, vectorised: bool) -> Plan:
    """The plan of reading ``writer`` data as ``reader`` (module docstring);
    ``AvroArrowError`` when the reader has no Arrow form."""
    compiler = Compiler(writer, reader, recursive_depth)
    compiler.mapper.type(reader.root)  # the reader's errors (recursion, decimals) first
    if not vectorised:
        return compiler.fallback(writer.root, reader.root, (), False)
    return compiler.plan(writer.root, reader.root, (), "")
