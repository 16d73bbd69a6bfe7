"""Compatibility of JSON Schemas, as Confluent's registry decides it (its
``io.confluent.kafka.schemaregistry.json.diff`` rules, STRICT policy).

Owns ``differences(old, new)`` and ``backward_errors(old, new)``: whether data written
with the old schema can be read with the new one (``JsonSchema.backward_errors`` calls it
with the previous schema as ``old``). The question is the one Confluent asks: does the new
schema accept every document the old one accepts? It is answered structurally, rule by
rule, not by enumerating documents.

Model (``Node``; ``json_schema`` reads a parsed schema into it)
    Each schema is read as Confluent's Everit loader reads it: ``true`` and ``{}`` are the
    empty schema, ``false`` the false schema; a ``$ref`` is followed (in drafts 4 to 7 its
    siblings are ignored; from 2019-09 on they are combined with it by a synthetic
    ``allOf``; ``$recursiveRef`` and ``$dynamicRef`` go to their static target); ``enum``,
    ``allOf``/``anyOf``/``oneOf`` (one combined schema each), ``not``, ``const`` and
    ``type`` each give a schema, and keywords of a type the ``type`` does not name give one
    of that type too (``minLength``, ``maxLength``, ``pattern``, ``format``: a string;
    ``minimum`` ...: a number; ``properties`` ...: an object; ``items`` ...: an array;
    ``if``/``then``/``else``: a conditional). Several schemas at one level form a synthetic
    ``allOf``. ``type: [a, b]`` is ``anyOf`` of one schema per type; ``integer`` is a
    number that requires integers. In 2020-12, ``prefixItems`` are the tuple items and
    ``items`` beside them the additional items; ``dependentRequired``/``dependentSchemas``
    (2019-09 on) are read as ``dependencies``; draft 4's boolean ``exclusiveMaximum`` /
    ``exclusiveMinimum`` turn ``maximum`` or ``minimum`` into an exclusive limit.

Rules (Confluent's difference types; ``COMPATIBLE`` lists those that keep compatibility)
    Two schemas of different kinds: ``TYPE_CHANGED``, unless the old one is ``false`` or
    the new one is empty; a schema against a combined one (``anyOf``/``oneOf`` with a
    compatible branch: ``SUM_TYPE_EXTENDED``; ``allOf`` with one compatible branch:
    ``PRODUCT_TYPE_NARROWED``; singletons: as their only branch). Strings: ``maxLength``,
    ``minLength``, ``pattern``; numbers: ``maximum``, ``minimum``, the exclusive limits,
    ``multipleOf``, integer vs number (``TYPE_NARROWED`` / ``TYPE_EXTENDED``); ``enum``
    and ``const``; combined schemas: criterion, branch count and a maximum matching of
    compatible branch pairs; ``not`` (compared reversed); objects: ``required``,
    properties added or removed by content model (open: no ``additionalProperties``,
    ``patternProperties`` or ``unevaluatedProperties`` schema; closed:
    ``additionalProperties: false``; partially open: a schema for other properties, which
    must cover a property added or removed), ``dependencies``, ``additionalProperties``,
    ``unevaluatedProperties``, ``maxProperties``, ``minProperties``; arrays: ``items``
    (one schema, or tuple items by the same content-model rules), ``additionalItems``,
    ``unevaluatedItems``, ``maxItems``, ``minItems``, ``uniqueItems``, ``maxContains``,
    ``minContains``. Titles, descriptions, ids and defaults may change. As in Confluent's
    registry, ``format``, ``contains``, ``propertyNames``, ``if``/``then``/``else`` and
    changes within ``patternProperties`` are not compared, and a required property with a
    ``default`` may be added (``REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED``).

Recursion
    ``$ref`` cycles (recursive schemas, references between subjects that refer back) are
    compared once per pair of schema objects: a pair met again while it is being compared
    is taken as compatible, results are memoised per pair (so ``oneOf``s of many recursive
    definitions do not explode), and the comparison is repeated with the pairs found
    incompatible assumed incompatible where a cycle meets them, until that set stops
    growing (Confluent's ``Context`` and fixpoint). The comparison runs on an explicit
    stack of steps, so neither deep nor recursive schemas reach Python's recursion limit.

Messages and invariants
    One per incompatible difference: ``{errorType:'TYPE', description:'...'}``, with the
    JSON path of the difference (``#/properties/a/maxLength``; ``#/`` for the root), in
    Confluent's order of comparison. Types are Confluent's ``Difference.Type`` names;
    ``backward_errors`` is empty exactly when every difference is in ``COMPATIBLE``; a
    comparison of parsed schemas terminates and raises nothing.

Thread-safety: pure functions; the nodes they read are built for one comparison
(``JsonSchema.model()``) and each call keeps its own state.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeVar

# Confluent's Difference.Type names that keep a schema backward compatible (STRICT policy)
COMPATIBLE = frozenset({
    "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED", "SCHEMA_REMOVED", "TYPE_EXTENDED",
    "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED", "MIN_LENGTH_REMOVED", "PATTERN_REMOVED",
    "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED", "EXCLUSIVE_MAXIMUM_INCREASED",
    "EXCLUSIVE_MAXIMUM_REMOVED", "EXCLUSIVE_MINIMUM_DECREASED", "EXCLUSIVE_MINIMUM_REMOVED", "MULTIPLE_OF_REDUCED",
    "MULTIPLE_OF_REMOVED", "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED",
    "DEPENDENCY_ARRAY_NARROWED", "DEPENDENCY_ARRAY_REMOVED", "DEPENDENCY_SCHEMA_REMOVED", "MAX_PROPERTIES_INCREASED",
    "MAX_PROPERTIES_REMOVED", "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED", "ADDITIONAL_PROPERTIES_ADDED",
    "ADDITIONAL_PROPERTIES_EXTENDED", "UNEVALUATED_PROPERTIES_ADDED", "UNEVALUATED_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED",
    "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED", "MAX_CONTAINS_INCREASED", "MAX_CONTAINS_REMOVED",
    "MIN_CONTAINS_DECREASED", "MIN_CONTAINS_REMOVED", "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED",
    "ADDITIONAL_ITEMS_EXTENDED", "UNEVALUATED_ITEMS_ADDED", "UNEVALUATED_ITEMS_EXTENDED",
    "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
    "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ENUM_ARRAY_EXTENDED", "COMBINED_TYPE_EXTENDED", "PRODUCT_TYPE_NARROWED", "SUM_TYPE_EXTENDED", "NOT_TYPE_NARROWED",
})


@dataclass(frozen=True)
class Difference:
    """One difference between the old and the new schema: Confluent's type name, the JSON
    path (segments from the root), and the old and new values where they help."""

    type: str
    path: tuple[str, ...] = ()
    old: Any = None
    new: Any = None

    @property
    def compatible(self) -> bool:
        return self.type in COMPATIBLE

    @property
    def json_path(self) -> str:
        return "#/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in self.path)

    def message(self) -> str:
        name = self.path[-1] if self.path else ""
        template = _DESCRIPTIONS.get(self.type, "The schemas differ at path '{path}'")
        description = template.format(path=self.json_path, name=name, old=_show(self.old), new=_show(self.new))
        return f"{{errorType:'{self.type}', description:'{description}'}}"

    def under(self, prefix: tuple[str, ...]) -> Difference:
        return Difference(self.type, prefix + self.path, self.old, self.new) if prefix else self


def differences(old: Node, new: Node) -> list[Difference]:
    """Every difference between ``old`` and ``new``, compatible ones included, in
    Confluent's order of comparison."""
    return _Comparison().diff(old, new)


def backward_errors(old: Node, new: Node) -> list[str]:
    """The incompatible differences of reading data written with ``old`` using ``new``,
    one message each; empty when compatible."""
    return [d.message() for d in differences(old, new) if not d.compatible]


# ---------------------------------------------------------------------------------------
# the model


@dataclass(eq=False)
class Node:
    """One schema as Confluent's Everit loader models it (module docstring), built by
    ``json_schema``: ``kind`` is one of ``empty`` (``true``, ``{}``), ``false``,
    ``string``, ``number`` (``integer`` when it requires integers), ``boolean``, ``null``,
    ``object``, ``array``, ``enum``, ``const``, ``not``, ``combined`` (``criterion``
    ``allOf``, ``anyOf`` or ``oneOf``), ``conditional`` or ``ref`` (``target()`` gives the
    referenced node). ``raw`` is the JSON it was read from. Nodes are only read once
    built."""

    kind: str  # empty false string number boolean null object array enum const not combined conditional ref
    raw: Any = None
    # common properties
    id: Any = None
    title: Any = None
    description: Any = None
    has_default: bool = False
    default: Any = None
    connect_type: Any = None
    # numeric limits by keyword (maxLength, minimum, exclusiveMaximum, maxItems, ...)
    limits: dict[str, Any] = field(default_factory=dict)
    # string, number
    pattern: Any = None
    integer: bool = False
    multiple_of: Any = None
    # object
    properties: dict[str, Node] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    additional: bool = True  # additionalProperties / additionalItems not false
    additional_schema: Node | None = None
    pattern_properties: list[tuple[str, Node]] = field(default_factory=list)
    property_dependencies: dict[str, list[Any]] = field(default_factory=dict)
    schema_dependencies: dict[str, Node] = field(default_factory=dict)
    unevaluated: Node | None = None
    # array
    all_items: Node | None = None
    item_schemas: list[Node] | None = None
    unique_items: bool = False
    # enum, const
    values: list[Any] = field(default_factory=list)
    value: Any = None
    # not, combined
    inner: Node | None = None
    criterion: str = ""
    subschemas: list[Node] = field(default_factory=list)
    # ref
    target: Callable[[], Node] | None = None
    cached_key: Any = field(default=None, repr=False)

    def describe(self) -> str:
        if self.kind == "number":
            return "integer" if self.integer else "number"
        if self.kind == "combined":
            return self.criterion
        return self.kind

    def key(self) -> Any:
        """Equality of schemas, for collapsing duplicate branches of a combined schema."""
        if self.cached_key is None:
            self.cached_key = (self.kind, self.integer, self.criterion, canon(self.raw))
        return self.cached_key


ANYTHING = Node("empty", True)  # `true`
NOTHING = Node("false", False)  # `false`


def canon(value: Any) -> Any:
    """A hashable form of a JSON value, equal for equal JSON values (``1`` and ``1.0``
    are one number; ``true`` is not ``1``)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(canon(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, canon(v)) for k, v in value.items()))
    return ("other", repr(value))


# ---------------------------------------------------------------------------------------
# the comparison

T = TypeVar("T")


def _compatible(found: Iterable[Difference]) -> bool:
    return all(d.compatible for d in found)


def _under(prefix: tuple[str, ...], found: Iterable[Difference]) -> list[Difference]:
    return [d.under(prefix) for d in found]


_Request = tuple["Node | None", "Node | None"]
_Steps = Generator[_Request, list[Difference], T]  # a comparison step: yields pairs, receives differences


class _Comparison:
    """One comparison of an old and a new schema graph; differences are computed per pair
    of nodes, relative to the pair, and memoised."""

    def __init__(self) -> None:
        self._memo: dict[tuple[int, int], list[Difference]] = {}
        self._in_progress: set[tuple[int, int]] = set()
        self._assumed_incompatible: dict[tuple[int, int], list[Difference]] = {}
        self._optimistic = False  # a cycle was cut by assuming compatibility

    def diff(self, original: Node, update: Node) -> list[Difference]:
        """The differences of the pair, to a fixpoint: each pass assumes the pairs the
        previous one found incompatible are incompatible where a cycle cuts them, until no
        new incompatible pair appears (Confluent's SchemaDiff.compare)."""
        while True:
            self._memo, self._optimistic = {}, False
            found = self._run(original, update)
            incompatible = {pair: d for pair, d in self._memo.items() if not _compatible(d)}
            if not self._optimistic or incompatible.keys() <= self._assumed_incompatible.keys():
                return found
            self._assumed_incompatible.update(incompatible)

    def _run(self, original: Node, update: Node) -> list[Difference]:
        """Runs the comparison steps with an explicit stack (no recursion limit on deep or
        recursive schemas): a step yields a pair to compare and is sent its differences."""
        stack = [self._pair(original, update)]
        value: list[Difference] = []
        sent: list[Difference] | None = None
        while stack:
            try:
                request = stack[-1].send(sent)  # type: ignore[arg-type]
            except StopIteration as stop:
                stack.pop()
                value = sent = stop.value
                continue
            stack.append(self._pair(*request))
            sent = None
        return value

    def _pair(self, original: Node | None, update: Node | None) -> _Steps[list[Difference]]:
        if original is None and update is None:
            return []
        if original is None:
            return [Difference("SCHEMA_ADDED")]
        if update is None:
            return [Difference("SCHEMA_REMOVED")]
        original, update = _deref(original), _deref(update)
        pair = (id(original), id(update))
        if pair in self._memo:
            return self._memo[pair]
        if pair in self._in_progress:  # a cycle
            if pair in self._assumed_incompatible:
                return self._assumed_incompatible[pair]
            self._optimistic = True
            return []
        self._in_progress.add(pair)
        try:
            found = yield from self._compare(original, update)
        finally:
            self._in_progress.discard(pair)
        self._memo[pair] = found
        return found

    def _compare(self, o: Node, u: Node) -> _Steps[list[Difference]]:
        if o.kind != "combined" and u.kind == "combined":
            if len(u.subschemas) == 1:
                found = (yield (o, u.subschemas[0]))
                if _compatible(found):
                    return found
            elif u.criterion in ("anyOf", "oneOf"):
                for branch in u.subschemas:
                    found = (yield (o, branch))
                    if _compatible(found):
                        return found + [Difference("SUM_TYPE_EXTENDED")]
        elif o.kind == "combined" and u.kind != "combined":
            if len(o.subschemas) == 1:
                found = (yield (o.subschemas[0], u))
                if _compatible(found):
                    return found
            elif o.criterion == "allOf":
                for branch in o.subschemas:
                    found = (yield (branch, u))
                    if _compatible(found):
                        return found + [Difference("PRODUCT_TYPE_NARROWED")]
        if o.kind != u.kind:
            if o.kind == "false" or u.kind == "empty":
                return []
            if o.connect_type == "bytes" and u.connect_type == "bytes":
                return []
            return [Difference("TYPE_CHANGED", old=o.describe(), new=u.describe())]
        out: list[Difference] = []
        if o.id != u.id:
            out.append(Difference("ID_CHANGED", old=o.id, new=u.id))
        if o.title != u.title:
            out.append(Difference("TITLE_CHANGED", old=o.title, new=u.title))
        if o.description != u.description:
            out.append(Difference("DESCRIPTION_CHANGED", old=o.description, new=u.description))
        if o.has_default != u.has_default or canon(o.default) != canon(u.default):
            out.append(Difference("DEFAULT_CHANGED", old=o.default, new=u.default))
        plain = _PLAIN.get(o.kind)
        if plain is not None:
            plain(self, o, u, out)
        nested = _NESTED.get(o.kind)
        if nested is not None:
            yield from nested(self, o, u, out)
        return out

    # strings and numbers

    def _string(self, o: Node, u: Node, out: list[Difference]) -> None:
        _limits(out, o, u, "maxLength", "minLength")
        if o.pattern is None and u.pattern is not None:
            out.append(Difference("PATTERN_ADDED", ("pattern",), new=u.pattern))
        elif o.pattern is not None and u.pattern is None:
            out.append(Difference("PATTERN_REMOVED", ("pattern",), old=o.pattern))
        elif o.pattern != u.pattern:
            out.append(Difference("PATTERN_CHANGED", ("pattern",), o.pattern, u.pattern))

    def _number(self, o: Node, u: Node, out: list[Difference]) -> None:
        _limits(out, o, u, "maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum")
        old, new = _fraction(o.multiple_of), _fraction(u.multiple_of)
        if old != new:
            path = ("multipleOf",)
            if old is None:
                out.append(Difference("MULTIPLE_OF_ADDED", path, new=u.multiple_of))
            elif new is None:
                out.append(Difference("MULTIPLE_OF_REMOVED", path, old=o.multiple_of))
            elif old and (new / old).denominator == 1:
                out.append(Difference("MULTIPLE_OF_EXPANDED", path, o.multiple_of, u.multiple_of))
            elif new and (old / new).denominator == 1:
                out.append(Difference("MULTIPLE_OF_REDUCED", path, o.multiple_of, u.multiple_of))
            else:
                out.append(Difference("MULTIPLE_OF_CHANGED", path, o.multiple_of, u.multiple_of))
        if o.integer != u.integer:
            kind = "TYPE_EXTENDED" if o.integer else "TYPE_NARROWED"
            out.append(Difference(kind, old=o.describe(), new=u.describe()))

    # enum, const, not, combined

    def _enum(self, o: Node, u: Node, out: list[Difference]) -> None:
        old, new = {canon(v) for v in o.values}, {canon(v) for v in u.values}
        if old != new:
            if old <= new:
                kind = "ENUM_ARRAY_EXTENDED"
            elif new <= old:
                kind = "ENUM_ARRAY_NARROWED"
            else:
                kind = "ENUM_ARRAY_CHANGED"
            out.append(Difference(kind, ("enum",), o.values, u.values))

    def _const(self, o: Node, u: Node, out: list[Difference]) -> None:
        if canon(o.value) != canon(u.value):
            out.append(Difference("ENUM_ARRAY_CHANGED", ("const",), o.value, u.value))

    def _not(self, o: Node, u: Node, out: list[Difference]) -> _Steps[None]:
        reversed_found = (yield (u.inner, o.inner))  # what the new one forbids, the old one must forbid
        kind = "NOT_TYPE_NARROWED" if _compatible(reversed_found) else "NOT_TYPE_EXTENDED"
        out.append(Difference(kind, ("not",)))

    def _combined(self, o: Node, u: Node, out: list[Difference]) -> _Steps[None]:
        if o.criterion != u.criterion:
            single_old, single_new = len(o.subschemas) == 1, len(u.subschemas) == 1
            if (u.criterion == "anyOf" or (single_old and single_new) or (single_old and u.criterion == "oneOf")
                    or (single_new and o.criterion == "allOf")):
                kind = "COMBINED_TYPE_EXTENDED"
            else:
                kind = "COMBINED_TYPE_CHANGED"
            out.append(Difference(kind, old=o.criterion, new=u.criterion))
            if kind == "COMBINED_TYPE_CHANGED":
                return
        olds, news = _distinct(o.subschemas), _distinct(u.subschemas)
        if len(olds) < len(news):
            kind = "PRODUCT_TYPE_EXTENDED" if u.criterion == "allOf" else "SUM_TYPE_EXTENDED"
            out.append(Difference(kind, old=len(olds), new=len(news)))
        elif len(olds) > len(news):
            kind = "PRODUCT_TYPE_NARROWED" if o.criterion == "allOf" else "SUM_TYPE_NARROWED"
            out.append(Difference(kind, old=len(olds), new=len(news)))
        edges: dict[tuple[int, int], list[Difference]] = {}
        for i, old in enumerate(olds):
            for j, new in enumerate(news):
                found = (yield (old, new))
                if _compatible(found):
                    edges[(i, j)] = _under((o.criterion, str(i)), found)
        matching = sorted(_maximum_matching(edges, len(olds)))
        for edge in matching:
            out.extend(edges[edge])
        if len(matching) < min(len(olds), len(news)):  # the smaller side is not covered
            if len(olds) <= len(news):
                matched, side, criterion, size = {i for i, _ in matching}, "old", o.criterion, len(olds)
            else:
                matched, side, criterion, size = {j for _, j in matching}, "new", u.criterion, len(news)
            unmatched = ", ".join(f"{criterion}/{k}" for k in range(size) if k not in matched)
            out.append(Difference("COMBINED_TYPE_SUBSCHEMAS_CHANGED", old=f"{unmatched} of the {side} schema"))

    # objects

    def _object(self, o: Node, u: Node, out: list[Difference]) -> _Steps[None]:
        for name in o.properties:
            if name in u.properties:
                was, now = name in o.required, name in u.required
                if was and not now:
                    out.append(Difference("REQUIRED_ATTRIBUTE_REMOVED", ("required", name)))
                elif now and not was:
                    kind = "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if u.properties[name].has_default \
                        else "REQUIRED_ATTRIBUTE_ADDED"
                    out.append(Difference(kind, ("required", name)))
        for name in _union(o.properties, u.properties):
            yield from self._property(o, u, name, out)
        yield from self._dependencies(o, u, out)
        yield from self._additional(o, u, ("additionalProperties",), "ADDITIONAL_PROPERTIES", out)
        yield from self._unevaluated(o, u, ("unevaluatedProperties",), "UNEVALUATED_PROPERTIES", out)
        _limits(out, o, u, "maxProperties", "minProperties")

    def _property(self, o: Node, u: Node, name: str, out: list[Difference]) -> _Steps[None]:
        path = ("properties", name)
        old, new = o.properties.get(name), u.properties.get(name)
        if new is None:
            assert old is not None
            if _open(u):
                out.append(Difference("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", path))
                return
            cover = _partial(u, name)
            if cover is not None:
                found = (yield (old, cover))
                out.extend(_under(path, found))
                covered = "IS_COVERED" if _compatible(found) else "NOT_COVERED"
                out.append(Difference(f"PROPERTY_REMOVED_{covered}_BY_PARTIALLY_OPEN_CONTENT_MODEL", path))
            elif _deref(old).kind == "false":
                out.append(Difference("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", path))
            else:
                out.append(Difference("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", path))
        elif old is None:
            if _open(o):
                if _deref(new).kind == "empty":
                    out.append(Difference("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", path))
                else:
                    out.append(Difference("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", path))
                return
            cover = _partial(o, name)
            if cover is not None:
                found = (yield (cover, new))
                out.extend(_under(path, found))
                covered = "IS_COVERED" if _compatible(found) else "NOT_COVERED"
                out.append(Difference(f"PROPERTY_ADDED_{covered}_BY_PARTIALLY_OPEN_CONTENT_MODEL", path))
            if name in u.required:
                kind = "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL" if new.has_default \
                    else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
                out.append(Difference(kind, path))
            else:
                out.append(Difference("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", path))
        else:
            out.extend(_under(path, (yield (old, new))))

    def _dependencies(self, o: Node, u: Node, out: list[Difference]) -> _Steps[None]:
        for name in _union(o.property_dependencies, u.property_dependencies):
            path = ("dependencies", name)
            old, new = o.property_dependencies.get(name), u.property_dependencies.get(name)
            if new is None:
                out.append(Difference("DEPENDENCY_ARRAY_REMOVED", path, old=old))
            elif old is None:
                out.append(Difference("DEPENDENCY_ARRAY_ADDED", path, new=new))
            elif set(map(canon, old)) != set(map(canon, new)):
                before, after = set(map(canon, old)), set(map(canon, new))
                kind = "EXTENDED" if before <= after else "NARROWED" if after <= before else "CHANGED"
                out.append(Difference(f"DEPENDENCY_ARRAY_{kind}", path, old, new))
        for name in _union(o.schema_dependencies, u.schema_dependencies):
            path = ("dependencies", name)
            old_schema, new_schema = o.schema_dependencies.get(name), u.schema_dependencies.get(name)
            if new_schema is None:
                out.append(Difference("DEPENDENCY_SCHEMA_REMOVED", path))
            elif old_schema is None:
                out.append(Difference("DEPENDENCY_SCHEMA_ADDED", path))
            else:
                out.extend(_under(path, (yield (old_schema, new_schema))))

    def _additional(self, o: Node, u: Node, path: tuple[str, ...], prefix: str, out: list[Difference]) -> _Steps[None]:
        """additionalProperties or additionalItems."""
        if o.additional != u.additional:
            out.append(Difference(f"{prefix}_{'ADDED' if u.additional else 'REMOVED'}", path))
        elif o.additional_schema is None and u.additional_schema is not None:
            out.append(Difference(f"{prefix}_NARROWED", path))
        elif o.additional_schema is not None and u.additional_schema is None:
            out.append(Difference(f"{prefix}_EXTENDED", path))
        else:
            out.extend(_under(path, (yield (o.additional_schema, u.additional_schema))))

    def _unevaluated(self, o: Node, u: Node, path: tuple[str, ...], prefix: str, out: list[Difference]) -> _Steps[None]:
        old = _deref(o.unevaluated) if o.unevaluated is not None else None
        new = _deref(u.unevaluated) if u.unevaluated is not None else None
        if old is None and new is None:
            return
        if old is None:
            assert new is not None
            kind = "REMOVED" if new.kind == "false" else "NARROWED"
        elif new is None:
            kind = "ADDED" if old.kind == "false" else "EXTENDED"
        elif old.kind == "false" and new.kind != "false":
            kind = "ADDED"
        elif old.kind != "false" and new.kind == "false":
            kind = "REMOVED"
        elif old.kind == "empty" and new.kind != "empty":
            kind = "NARROWED"
        elif old.kind != "empty" and new.kind == "empty":
            kind = "EXTENDED"
        else:
            out.extend(_under(path, (yield (old, new))))
            return
        out.append(Difference(f"{prefix}_{kind}", path))

    # arrays

    def _array(self, o: Node, u: Node, out: list[Difference]) -> _Steps[None]:
        out.extend(_under(("items",), (yield (o.all_items, u.all_items))))
        olds, news = o.item_schemas or [], u.item_schemas or []
        for index in range(max(len(olds), len(news))):
            path = ("items", str(index))
            if index < len(olds) and index < len(news):
                out.extend(_under(path, (yield (olds[index], news[index]))))
            elif index < len(olds):
                yield from self._item_removed(olds[index], u, path, out)
            else:
                yield from self._item_added(news[index], o, path, out)
        yield from self._additional(o, u, ("additionalItems",), "ADDITIONAL_ITEMS", out)
        yield from self._unevaluated(o, u, ("unevaluatedItems",), "UNEVALUATED_ITEMS", out)
        _limits(out, o, u, "maxItems", "minItems")
        if o.unique_items != u.unique_items:
            out.append(Difference("UNIQUE_ITEMS_REMOVED" if o.unique_items else "UNIQUE_ITEMS_ADDED", ("uniqueItems",)))
        _limits(out, o, u, "maxContains", "minContains")

    def _item_removed(self, old: Node, u: Node, path: tuple[str, ...], out: list[Difference]) -> _Steps[None]:
        if _open(u):
            out.append(Difference("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", path))
            return
        cover = _partial(u)
        if cover is not None:
            found = (yield (old, cover))
            out.extend(_under(path, found))
            covered = "IS_COVERED" if _compatible(found) else "NOT_COVERED"
            out.append(Difference(f"ITEM_REMOVED_{covered}_BY_PARTIALLY_OPEN_CONTENT_MODEL", path))
        elif _deref(old).kind == "false":
            out.append(Difference("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", path))
        else:
            out.append(Difference("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", path))

    def _item_added(self, new: Node, o: Node, path: tuple[str, ...], out: list[Difference]) -> _Steps[None]:
        if _open(o):
            kind = "ITEM_WITH_EMPTY_SCHEMA_ADDED" if _deref(new).kind == "empty" else "ITEM_ADDED"
            out.append(Difference(f"{kind}_TO_OPEN_CONTENT_MODEL", path))
            return
        cover = _partial(o)
        if cover is not None:
            found = (yield (cover, new))
            out.extend(_under(path, found))
            covered = "IS_COVERED" if _compatible(found) else "NOT_COVERED"
            out.append(Difference(f"ITEM_ADDED_{covered}_BY_PARTIALLY_OPEN_CONTENT_MODEL", path))
        else:
            out.append(Difference("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", path))


_PLAIN: dict[str, Callable[[_Comparison, Node, Node, list[Difference]], None]] = {
    "string": _Comparison._string, "number": _Comparison._number, "enum": _Comparison._enum,
    "const": _Comparison._const,
}
_NESTED: dict[str, Callable[[_Comparison, Node, Node, list[Difference]], _Steps[None]]] = {
    "not": _Comparison._not, "combined": _Comparison._combined, "object": _Comparison._object,
    "array": _Comparison._array,
}


def _deref(node: Node) -> Node:
    seen: set[int] = set()
    while node.kind == "ref" and node.target is not None:
        if id(node) in seen:  # a $ref loop (parse refuses these)
            return ANYTHING
        seen.add(id(node))
        node = node.target()
    return node


def _union(first: Iterable[str], second: Iterable[str]) -> list[str]:
    return list(dict.fromkeys([*first, *second]))


def _distinct(nodes: Sequence[Node]) -> list[Node]:
    return list({node.key(): node for node in reversed(nodes)}.values())[::-1]


def _limits(out: list[Difference], o: Node, u: Node, *keywords: str) -> None:
    """Numeric limits added, removed, increased or decreased (``maxLength``:
    ``MAX_LENGTH_ADDED`` ...)."""
    for keyword in keywords:
        old, new = o.limits.get(keyword), u.limits.get(keyword)
        if old == new:
            continue
        prefix, path = re.sub(r"([A-Z])", r"_\1", keyword).upper(), (keyword,)
        if old is None:
            out.append(Difference(f"{prefix}_ADDED", path, new=new))
        elif new is None:
            out.append(Difference(f"{prefix}_REMOVED", path, old=old))
        elif old < new:
            out.append(Difference(f"{prefix}_INCREASED", path, old, new))
        else:
            out.append(Difference(f"{prefix}_DECREASED", path, old, new))


def _fraction(value: Any) -> Fraction | None:
    if value is None:
        return None
    try:
        return Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        return None


def _open(node: Node) -> bool:
    """An open content model: any other property or item, of any value, is allowed."""
    if not node.additional or node.additional_schema is not None or node.pattern_properties:
        return False
    uneval = _deref(node.unevaluated) if node.unevaluated is not None else None
    return uneval is None or uneval.kind == "empty"


def _partial(node: Node, name: str | None = None) -> Node | None:
    """The schema a partially open content model gives the property ``name`` (or any
    other item), if any: a matching ``patternProperties``, ``additionalProperties`` or
    ``additionalItems``, or ``unevaluatedProperties`` / ``unevaluatedItems``."""
    for pattern, schema in node.pattern_properties:
        try:
            if name is not None and re.search(pattern, name):
                return schema
        except re.error:
            continue
    if node.additional_schema is not None:
        return node.additional_schema
    if node.additional and node.unevaluated is not None:
        uneval = _deref(node.unevaluated)
        if uneval.kind not in ("false", "empty"):
            return uneval
    return None


def _maximum_matching(edges: Mapping[tuple[int, int], Any], left: int) -> list[tuple[int, int]]:
    """A maximum matching of a bipartite graph (Kuhn's augmenting paths)."""
    adjacent: dict[int, list[int]] = {}
    for i, j in edges:
        adjacent.setdefault(i, []).append(j)
    matched: dict[int, int] = {}  # right -> left

    def augment(i: int, seen: set[int]) -> bool:
        for j in adjacent.get(i, ()):
            if j not in seen:
                seen.add(j)
                if j not in matched or augment(matched[j], seen):
                    matched[j] = i
                    return True
        return False

    for i in range(left):
        augment(i, set())
    return [(i, j) for j, i in matched.items()]


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


_ADDED = "The new schema has the keyword at path '{path}' (value {new}) that the old schema does not have"
_INCREASED = "The value at path '{path}' is {new} in the new schema, more than {old} in the old schema"
_DECREASED = "The value at path '{path}' is {new} in the new schema, less than {old} in the old schema"
_OTHERS = [(k, w) for k in ("additional", "unevaluated") for w in ("properties", "items")]
_CHANGED = "The value at path '{path}' is {new} in the new schema but {old} in the old schema"
_DESCRIPTIONS = {
    **{f"{k}_ADDED": _ADDED for k in ("MAX_LENGTH", "MIN_LENGTH", "PATTERN", "MAXIMUM", "MINIMUM", "EXCLUSIVE_MAXIMUM",
                                      "EXCLUSIVE_MINIMUM", "MULTIPLE_OF", "MAX_PROPERTIES", "MIN_PROPERTIES",
                                      "DEPENDENCY_ARRAY", "MAX_ITEMS", "MIN_ITEMS", "MAX_CONTAINS", "MIN_CONTAINS")},
    **{f"{k}_DECREASED": _DECREASED for k in ("MAX_LENGTH", "MAXIMUM", "EXCLUSIVE_MAXIMUM", "MAX_PROPERTIES",
                                              "MAX_ITEMS", "MAX_CONTAINS")},
    **{f"{k}_INCREASED": _INCREASED for k in ("MIN_LENGTH", "MINIMUM", "EXCLUSIVE_MINIMUM", "MIN_PROPERTIES",
                                              "MIN_ITEMS", "MIN_CONTAINS")},
    "TYPE_CHANGED": "The type at path '{path}' is {new} in the new schema but {old} in the old schema",
    "TYPE_NARROWED": "The type at path '{path}' is narrowed from {old} in the old schema to {new} in the new schema",
    "SCHEMA_ADDED": "The new schema has a schema at path '{path}' that the old schema does not have",
    "UNIQUE_ITEMS_ADDED": "The new schema requires unique items at path '{path}' and the old schema does not",
    "DEPENDENCY_SCHEMA_ADDED": "The new schema has a dependent schema at path '{path}' that the old schema does "
                               "not have",
    "MULTIPLE_OF_EXPANDED": "The value at path '{path}' is {new} in the new schema, a multiple of {old} in the "
                            "old schema",
    "MULTIPLE_OF_CHANGED": "The value at path '{path}' is {new} in the new schema, neither a multiple nor a divisor "
                           "of {old} in the old schema",
    **{f"{k}_CHANGED": _CHANGED for k in ("PATTERN", "DEPENDENCY_ARRAY", "ENUM_ARRAY")},
    "DEPENDENCY_ARRAY_EXTENDED": "The array at path '{path}' has more elements in the new schema ({new}) than in "
                                 "the old schema ({old})",
    "REQUIRED_ATTRIBUTE_ADDED": "The new schema has a required property '{name}' at path '{path}' that the old "
                                "schema does not have",
    **{f"{k.upper()}_{w.upper()}_REMOVED": f"The new schema allows no {k} {w} at path '{{path}}' and the old "
       "schema does" for k, w in _OTHERS},
    **{f"{k.upper()}_{w.upper()}_NARROWED": f"The new schema restricts {k} {w} at path '{{path}}' more than the "
       "old schema" for k, w in _OTHERS},
    "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL": "The old schema has an open content model and the new schema has a "
                                            "property '{name}' at path '{path}' which is missing in the old schema",
    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL": "The new schema has a required property '{name}' at path "
                                                       "'{path}' which is missing in the old schema",
    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL": "The new schema has a closed content model and is missing the "
                                                  "property '{name}' present at path '{path}' in the old schema",
    "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": "The property '{name}' is missing in the new "
        "schema but present at path '{path}' in the old schema and is not covered by the new schema's partially "
        "open content model",
    "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": "The new schema has a property '{name}' at path "
        "'{path}' which is missing in the old schema and is not covered by the old schema's partially open "
        "content model",
    "ITEM_ADDED_TO_OPEN_CONTENT_MODEL": "The old schema has an open content model and the new schema has an item "
                                        "at path '{path}' which is missing in the old schema",
    "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL": "The new schema has a closed content model and is missing the item "
                                              "present at path '{path}' in the old schema",
    "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": "An item is missing in the new schema but present "
        "at path '{path}' in the old schema and is not covered by the new schema's partially open content model",
    "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": "The new schema has an item at path '{path}' which "
        "is missing in the old schema and is not covered by the old schema's partially open content model",
    "ENUM_ARRAY_NARROWED": "The enum at path '{path}' has fewer values in the new schema ({new}) than in the old "
                           "schema ({old})",
    "COMBINED_TYPE_CHANGED": "The combined type at path '{path}' is {new} in the new schema but {old} in the old "
                             "schema",
    "PRODUCT_TYPE_EXTENDED": "The allOf at path '{path}' has more subschemas in the new schema ({new}) than in "
                             "the old schema ({old})",
    "SUM_TYPE_NARROWED": "The combined type at path '{path}' has fewer subschemas in the new schema ({new}) than "
                         "in the old schema ({old})",
    "COMBINED_TYPE_SUBSCHEMAS_CHANGED": "The subschemas of the combined type at path '{path}' are not all matched "
                                        "by compatible ones: no match for {old}",
    "NOT_TYPE_EXTENDED": "The schema under 'not' at path '{path}' forbids values in the new schema that the old "
                         "schema allows",
}

__all__ = ["ANYTHING", "COMPATIBLE", "Difference", "NOTHING", "Node", "backward_errors", "canon", "differences"]
