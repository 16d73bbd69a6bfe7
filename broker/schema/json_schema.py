"""JSON Schema for the Schema Registry (Confluent's ``JSON`` schema type): parsing, the
meta-schema check, references across subjects, identity and validation of documents.

Owns ``parse(text, references=(), resolved={}) -> JsonSchema``, ``JsonSchema``, and the
reading of a schema into the model its compatibility is decided on
(``JsonSchema.model()``); the compatibility rules (``backward_errors``) and the model's
description live in ``json_schema_compat``.

Format
    A JSON Schema document: a JSON object, or ``true`` / ``false``. ``$schema`` picks the
    draft, with the URLs Confluent's ``SpecificationVersion`` knows (``http`` or
    ``https``, with or without a trailing ``#``): draft 4 (also
    ``http://json-schema.org/schema``), 6, 7, 2019-09 and 2020-12. No ``$schema``, or one
    the registry does not know, means draft 7, as in Confluent's registry. The document is
    checked against its draft's meta-schema with ``jsonschema`` (``check_schema`` of the
    draft's validator class, the one ``validator_for`` picks for the known URLs; formats
    such as ``regex`` included); the error names the JSON pointer of the offending
    keyword. Validation asserts formats too (``date-time``, ``email`` ...), as Confluent's.

References
    A ``$ref`` to another registered schema names it by the reference's ``name`` (a
    relative name such as ``address.json``, or a URL such as
    ``https://example.com/address.schema.json``); ``resolved`` holds the text of every
    schema the references reach, transitively, keyed by that name. Each is registered in a
    ``referencing.Registry`` under its name, ``./`` + its name, the name resolved against
    the root's ``$id``, and its own ``$id``; a URL that ends with ``/`` + a name is that
    schema too (so a referenced schema may name its own dependencies relative to its
    ``$id``). Every ``$ref`` of the document and of the referenced schemas must resolve:
    to a referenced schema, to a JSON pointer or anchor within a document, or to a
    meta-schema; anything else is an ``InvalidSchemaError`` naming the ``$ref``. Nothing is
    ever fetched over the network. References may form cycles (``a.json`` has a property
    of type ``b.json`` which has one of type ``a.json``); a cycle of in-place applicators
    (``$ref``, ``allOf``/``anyOf``/``oneOf``, ``not``, ``if``/``then``/``else``,
    dependent schemas) that never descends into a property or item would make validation
    loop forever, and is an ``InvalidSchemaError``.

Identity
    ``canonical_string()`` is the document re-serialised compactly: ``json.dumps`` with
    separators ``(",", ":")``, keys in the order written, non-ASCII characters kept (as
    Jackson writes them), so texts that differ only in whitespace are one schema. Numbers
    keep their JSON type (``1`` stays ``1``, ``1.0`` stays ``1.0``, ``1E2`` becomes
    ``100.0``); a duplicate key keeps its last value, as Jackson does. ``normalize()``
    returns the schema with the keys of every object sorted, recursively (inside ``enum``,
    ``const`` and ``default`` values too, as Confluent's ordered-properties mapper does),
    and its references sorted and deduplicated; array order is kept.

Invariants
    A ``JsonSchema`` holds a document that passed its meta-schema check, whose every
    ``$ref`` resolves, with no in-place cycle, nested at most ``MAX_DEPTH`` levels, with
    finite numbers only. ``parse`` raises ``InvalidSchemaError`` for anything else and
    never another exception.

Thread-safety: a ``JsonSchema`` is immutable once parsed; its ``jsonschema`` validator and
``referencing`` registry are immutable too, so ``validate`` and ``backward_errors`` may run
from many threads at once.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urldefrag, urljoin

import jsonschema
import jsonschema_specifications
import referencing.exceptions
import referencing.jsonschema
from jsonschema.protocols import Validator
from referencing import Registry, Resource

from broker.schema import json_schema_compat
from broker.schema.base import (
    JSON,
    InvalidSchemaError,
    ParsedSchema,
    SchemaReference,
    type_mismatch,
)
from broker.schema.json_schema_compat import ANYTHING, NOTHING, Node

MAX_DEPTH = 64  # nesting of JSON arrays and objects; deeper documents are refused


@dataclass(frozen=True)
class Draft:
    """One JSON Schema draft: its name, ``jsonschema`` validator class and ``referencing``
    specification."""

    name: str
    validator: type[Validator]
    specification: referencing.Specification[Any]


DRAFT_4 = Draft("draft-04", jsonschema.Draft4Validator, referencing.jsonschema.DRAFT4)
DRAFT_6 = Draft("draft-06", jsonschema.Draft6Validator, referencing.jsonschema.DRAFT6)
DRAFT_7 = Draft("draft-07", jsonschema.Draft7Validator, referencing.jsonschema.DRAFT7)
DRAFT_2019_09 = Draft("2019-09", jsonschema.Draft201909Validator, referencing.jsonschema.DRAFT201909)
DRAFT_2020_12 = Draft("2020-12", jsonschema.Draft202012Validator, referencing.jsonschema.DRAFT202012)
DEFAULT_DRAFT = DRAFT_7  # no $schema, or an unknown one, as Confluent's registry

# Confluent's SpecificationVersion URLs; a trailing '#' is ignored
_DRAFT_URLS = {
    "http://json-schema.org/draft-04/schema": DRAFT_4,
    "https://json-schema.org/draft-04/schema": DRAFT_4,
    "http://json-schema.org/schema": DRAFT_4,
    "https://json-schema.org/schema": DRAFT_4,
    "http://json-schema.org/draft-06/schema": DRAFT_6,
    "https://json-schema.org/draft-06/schema": DRAFT_6,
    "http://json-schema.org/draft-07/schema": DRAFT_7,
    "https://json-schema.org/draft-07/schema": DRAFT_7,
    "http://json-schema.org/draft/2019-09/schema": DRAFT_2019_09,
    "https://json-schema.org/draft/2019-09/schema": DRAFT_2019_09,
    "http://json-schema.org/draft/2020-12/schema": DRAFT_2020_12,
    "https://json-schema.org/draft/2020-12/schema": DRAFT_2020_12,
}


def draft_of(document: Any) -> Draft:
    """The draft a document declares with ``$schema`` (draft 7 when it declares none or one
    the registry does not know)."""
    if isinstance(document, dict):
        url = document.get("$schema")
        if isinstance(url, str):
            return _DRAFT_URLS.get(url[:-1] if url.endswith("#") else url, DEFAULT_DRAFT)
    return DEFAULT_DRAFT


class JsonSchema(ParsedSchema):
    """A parsed JSON Schema (module docstring). Build it with ``parse``."""

    schema_type = JSON

    def __init__(self, document: Any, text: str, draft: Draft, references: tuple[SchemaReference, ...],
                 resolved: Mapping[str, str], registry: Registry[Any], documents: Mapping[int, Draft]) -> None:
        self._document = document
        self._canonical = text
        self.draft = draft
        self.references = references
        self._resolved = dict(resolved)
        self._registry = registry
        self._documents = documents
        self._validator = draft.validator(document, registry=registry,
                                          format_checker=draft.validator.FORMAT_CHECKER)

    @property
    def document(self) -> Any:
        """The schema as parsed JSON (a copy: the schema stays immutable)."""
        return copy.deepcopy(self._document)

    @property
    def resolved(self) -> dict[str, str]:
        """The referenced schemas' texts by reference name, as given to ``parse``."""
        return dict(self._resolved)

    def canonical_string(self) -> str:
        return self._canonical

    def normalize(self) -> JsonSchema:
        references = tuple(sorted(set(self.references), key=lambda r: (r.name, r.subject, r.version)))
        return parse(_dumps(self._document, sort_keys=True), references, self._resolved)

    def validator(self) -> Validator:
        """A ``jsonschema`` validator of this schema, with its references resolved (format
        assertions on, as Confluent's validation)."""
        return self._validator

    def validate(self, document: Any) -> list[str]:
        """The validation errors of a JSON value (as ``json.loads`` returns it) against the
        schema, each ``<JSON path of the value>: <message>``; empty when it is valid."""
        try:
            return [f"{error.json_path}: {error.message}" for error in self._validator.iter_errors(document)]
        except RecursionError:
            return ["$: the document is nested too deeply to validate"]
        except referencing.exceptions.Unresolvable as e:  # a $dynamicRef with no target in scope
            return [f"$: the schema's reference {str(e)!r} does not resolve"]

    def backward_errors(self, previous: ParsedSchema) -> list[str]:
        if not isinstance(previous, JsonSchema):
            return type_mismatch(self, previous)
        return json_schema_compat.backward_errors(previous.model(), self.model())

    def model(self) -> Node:
        """The schema as the compatibility rules read it (``json_schema_compat.Node``),
        built afresh: its ``$ref``s are followed lazily, so each comparison has its own."""
        resolver = self._registry.resolver_with_root(self.draft.specification.create_resource(self._document))
        return _Model(self._document, resolver, self.draft, self._documents).root


def parse(text: str, references: Sequence[SchemaReference] = (), resolved: Mapping[str, str] = {}) -> JsonSchema:
    """Parse a JSON Schema document with its references (module docstring); raises
    ``InvalidSchemaError``."""
    if not isinstance(text, str):
        raise InvalidSchemaError(f"A JSON schema is text, not {type(text).__name__}")
    references = tuple(references)
    for reference in references:
        if not isinstance(reference, SchemaReference):
            raise InvalidSchemaError(f"Invalid reference {reference!r}")
        if reference.name not in resolved:
            raise InvalidSchemaError(
                f"The reference '{reference.name}' (subject '{reference.subject}', version {reference.version}) "
                "was not resolved")
    document = _load(text, "the schema")
    draft = _check(document, "the schema")
    referenced: dict[str, tuple[Any, Draft]] = {}
    for name, referenced_text in resolved.items():
        what = f"the referenced schema '{name}'"
        if not isinstance(name, str) or not isinstance(referenced_text, str):
            raise InvalidSchemaError(f"Invalid resolved reference {name!r}")
        content = _load(referenced_text, what)
        referenced[name] = (content, _check(content, what))
    registry, retriever = _registry(document, draft, referenced)
    documents = {id(content): d for content, d in referenced.values()}
    documents[id(document)] = draft
    try:
        _check_references(document, draft, registry, referenced)
    except RecursionError:
        raise InvalidSchemaError("The schema's references are nested too deeply") from None
    # the URLs found by suffix while checking, registered so validation needs no lookups
    if retriever.found:
        registry = registry.with_resources(retriever.found.items()).crawl()
    return JsonSchema(document, _dumps(document), draft, references, resolved, registry, documents)


def _dumps(document: Any, sort_keys: bool = False) -> str:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys, allow_nan=False)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text} is out of range")
    return value


def _load(text: str, what: str) -> Any:
    try:
        document = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as e:
        raise InvalidSchemaError(f"Invalid JSON in {what}: {e.msg} at line {e.lineno} column {e.colno}") from None
    except ValueError as e:
        raise InvalidSchemaError(f"Invalid JSON in {what}: {e}") from None
    except RecursionError:
        raise InvalidSchemaError(f"Invalid JSON in {what}: nested more than {MAX_DEPTH} levels") from None
    if not isinstance(document, dict | bool):
        raise InvalidSchemaError(
            f"Invalid JSON schema in {what}: expected an object or a boolean at the root, found {_json_type(document)}")
    if _depth(document) > MAX_DEPTH:
        raise InvalidSchemaError(f"Invalid JSON schema in {what}: nested more than {MAX_DEPTH} levels")
    try:
        _dumps(document).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidSchemaError(f"Invalid JSON in {what}: a string holds a lone UTF-16 surrogate") from None
    return document


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _depth(document: Any) -> int:
    deepest = 0
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return deepest


def pointer(path: Sequence[str | int]) -> str:
    """The JSON pointer of a path, as ``#/a/b`` (``#`` for the root)."""
    return "#" + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _check(document: Any, what: str) -> Draft:
    """The document's draft, after checking it against the draft's meta-schema."""
    if isinstance(document, dict) and "$schema" in document and not isinstance(document["$schema"], str):
        raise InvalidSchemaError(f"Invalid JSON schema in {what} at '#/$schema': $schema is not a string")
    draft = draft_of(document)  # what jsonschema's validator_for picks, with Confluent's URLs and default
    try:
        draft.validator.check_schema(document)
    except jsonschema.SchemaError as e:
        where = pointer(list(e.absolute_path))
        raise InvalidSchemaError(f"Invalid JSON schema ({draft.name}) in {what} at '{where}': {e.message}") from None
    except RecursionError:
        raise InvalidSchemaError(f"Invalid JSON schema in {what}: nested too deeply") from None
    return draft


class _Retriever:
    """``referencing``'s retrieval of a URI no resource is registered under: the referenced
    schema whose name the URI ends with (``https://example.com/s/address.json`` finds
    ``address.json``); never the network."""

    def __init__(self, referenced: Mapping[str, tuple[Any, Draft]]) -> None:
        self._by_name = {_bare(name): (name, content, draft) for name, (content, draft) in referenced.items()}
        self.found: dict[str, Resource[Any]] = {}

    def __call__(self, uri: str) -> Resource[Any]:
        bare = _bare(uri)
        for name, (_, content, draft) in sorted(self._by_name.items(), key=lambda item: -len(item[0])):
            if bare == name or bare.endswith("/" + name):
                resource = draft.specification.create_resource(content)
                self.found[uri] = resource
                return resource
        raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


def _bare(name: str) -> str:
    name = urldefrag(name)[0]
    while name.startswith("./"):
        name = name[2:]
    return name


def _id_of(document: Any, draft: Draft) -> str | None:
    if not isinstance(document, dict):
        return None
    value = document.get("id" if draft is DRAFT_4 else "$id")
    return value if isinstance(value, str) else None


def _registry(document: Any, draft: Draft,
              referenced: Mapping[str, tuple[Any, Draft]]) -> tuple[Registry[Any], _Retriever]:
    base = _id_of(document, draft) or ""
    retriever = _Retriever(referenced)
    pairs: dict[str, Resource[Any]] = {}
    for name, (content, content_draft) in referenced.items():
        resource = content_draft.specification.create_resource(content)
        uris = [name, urljoin(base, name)]
        if "://" not in name and not name.startswith("."):
            uris.append("./" + name)
        for uri in uris:
            pairs.setdefault(urldefrag(uri)[0], resource)
    registry: Registry[Any] = Registry(retrieve=retriever)  # type: ignore[call-arg]
    registry = registry.with_resources(pairs.items())
    try:
        registry = registry.combine(jsonschema_specifications.REGISTRY).crawl()
    except (referencing.exceptions.Unresolvable, ValueError, TypeError) as e:
        raise InvalidSchemaError(f"Invalid references: {e}") from None
    return registry, retriever


# where subschemas sit: keyword -> (kind, applied to the same instance)
_SUBSCHEMAS: dict[str, tuple[str, bool]] = {
    "additionalItems": ("one", False), "additionalProperties": ("one", False), "contains": ("one", False),
    "contentSchema": ("one", False), "propertyNames": ("one", False), "unevaluatedItems": ("one", False),
    "unevaluatedProperties": ("one", False), "items": ("one or many", False), "prefixItems": ("many", False),
    "not": ("one", True), "if": ("one", True), "then": ("one", True), "else": ("one", True),
    "allOf": ("many", True), "anyOf": ("many", True), "oneOf": ("many", True),
    "properties": ("map", False), "patternProperties": ("map", False), "definitions": ("map", False),
    "$defs": ("map", False), "dependentSchemas": ("map", True), "dependencies": ("map", True),
}


def _subschemas(schema: dict[str, Any]) -> Iterator[tuple[tuple[str | int, ...], Any, bool]]:
    """(relative path, subschema, applies to the same instance) of a schema object."""
    for keyword, (kind, in_place) in _SUBSCHEMAS.items():
        value = schema.get(keyword)
        if value is None:
            continue
        if kind in ("one", "one or many") and isinstance(value, dict | bool):
            yield (keyword,), value, in_place
        elif kind in ("many", "one or many") and isinstance(value, list):
            for index, sub in enumerate(value):
                if isinstance(sub, dict | bool):
                    yield (keyword, index), sub, in_place
        elif kind == "map" and isinstance(value, dict):
            for name, sub in value.items():
                if isinstance(sub, dict | bool):  # dependencies may also hold property names
                    yield (keyword, name), sub, in_place


def _check_references(document: Any, draft: Draft, registry: Registry[Any],
                      referenced: Mapping[str, tuple[Any, Draft]]) -> None:
    """Every ``$ref`` of the document and of the referenced schemas resolves, and no cycle
    of in-place applicators exists (module docstring)."""
    where: dict[int, tuple[str, tuple[str | int, ...]]] = {}  # id(schema object) -> (document, path)
    edges: dict[int, list[int]] = {}  # in-place applications, by id of schema object
    roots: list[tuple[str, Any, Draft, Any]] = [
        ("the schema", document, draft, registry.resolver_with_root(draft.specification.create_resource(document)))]
    for name, (content, content_draft) in referenced.items():
        base = _id_of(content, content_draft) or name
        roots.append((f"the referenced schema '{name}'", content, content_draft, registry.resolver(base_uri=base)))
    # the documents first, so that every schema object is named by its place in its document;
    # then what $refs point to outside the places subschemas sit
    walk: list[tuple[str, Any, Draft, Any, tuple[str | int, ...]]] = [
        (label, content, d, resolver, ()) for label, content, d, resolver in reversed(roots)]
    targets_later: list[tuple[str, Any, Draft, Any, tuple[str | int, ...]]] = []
    while walk or targets_later:
        label, schema, d, resolver, path = walk.pop() if walk else targets_later.pop()
        if not isinstance(schema, dict) or id(schema) in where:
            continue
        where[id(schema)] = (label, path)
        targets = edges.setdefault(id(schema), [])
        if path and _id_of(schema, d) is not None:
            resolver = resolver.in_subresource(d.specification.create_resource(schema))
        ref = schema.get("$ref")
        for keyword in ("$ref",) if d in (DRAFT_4, DRAFT_6, DRAFT_7) else ("$ref", "$recursiveRef", "$dynamicRef"):
            if not isinstance(schema.get(keyword), str):
                continue
            try:  # a dynamic reference resolves statically first, then in the dynamic scope
                found = resolver.lookup(schema[keyword])
            except referencing.exceptions.Unresolvable as e:
                raise InvalidSchemaError(_unresolved(keyword, schema[keyword], e, label, path)) from None
            if isinstance(found.contents, dict):
                targets.append(id(found.contents))
                target_draft = draft_of(found.contents) if "$schema" in found.contents else d
                targets_later.append((label, found.contents, target_draft, found.resolver, path + (keyword,)))
        legacy_ref = isinstance(ref, str) and d in (DRAFT_4, DRAFT_6, DRAFT_7)  # siblings of $ref ignored
        for relative, sub, in_place in _subschemas(schema):
            if isinstance(sub, dict):
                if in_place and not legacy_ref:
                    targets.append(id(sub))
                walk.append((label, sub, d, resolver, path + relative))
    _refuse_in_place_cycles(edges, where)


def _unresolved(keyword: str, ref: str, error: Exception, label: str, path: tuple[str | int, ...]) -> str:
    if isinstance(error, referencing.exceptions.PointerToNowhere | referencing.exceptions.NoSuchAnchor):
        reason = "it points to nothing within its document"
    else:
        reason = "it is neither a referenced schema (a reference with that name) nor a pointer within the schema"
    return f"The {keyword} '{ref}' at '{pointer(path)}' in {label} does not resolve: {reason}"


def _refuse_in_place_cycles(edges: Mapping[int, list[int]],
                            where: Mapping[int, tuple[str, tuple[str | int, ...]]]) -> None:
    WHITE, GREY, BLACK = 0, 1, 2
    color: dict[int, int] = {}
    for start in edges:
        if color.get(start, WHITE) != WHITE:
            continue
        color[start] = GREY
        stack: list[tuple[int, Iterator[int]]] = [(start, iter(edges.get(start, ())))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                color[node] = BLACK
                stack.pop()
            elif color.get(child, WHITE) == GREY:
                label, path = where.get(child, ("the schema", ()))
                raise InvalidSchemaError(
                    f"The subschema at '{pointer(path)}' in {label} applies itself to the same value through "
                    "$ref, allOf, anyOf, oneOf, not or if/then/else without reaching a property or item: "
                    "validation would never end")
            elif color.get(child, WHITE) == WHITE:
                color[child] = GREY
                stack.append((child, iter(edges.get(child, ()))))


# ---------------------------------------------------------------------------------------
# the model the compatibility rules compare

_LEGACY = (DRAFT_4, DRAFT_6, DRAFT_7)  # $ref siblings ignored; `dependencies`; `items` arrays
_ARRAY_KEYWORDS = ("items", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains")
_ARRAY_KEYWORDS_2019 = ("maxContains", "minContains", "unevaluatedItems")
_OBJECT_KEYWORDS = ("properties", "required", "minProperties", "maxProperties", "dependencies", "patternProperties",
                    "additionalProperties", "propertyNames")
_OBJECT_KEYWORDS_2019 = ("dependentRequired", "dependentSchemas", "unevaluatedProperties")
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")
_CONDITIONAL_KEYWORDS = ("if", "then", "else")


def _family(kind: str, draft: Draft) -> tuple[str, ...]:
    """The keywords of one type (Everit's), which give a schema of that type when the
    ``type`` keyword does not name it."""
    if kind == "array":
        extra = _ARRAY_KEYWORDS_2019 + (("prefixItems",) if draft is DRAFT_2020_12 else ())
        return _ARRAY_KEYWORDS + (() if draft in _LEGACY else extra)
    if kind == "object":
        return _OBJECT_KEYWORDS + (() if draft in _LEGACY else _OBJECT_KEYWORDS_2019)
    if kind == "number":
        return _NUMBER_KEYWORDS
    if kind == "string":
        return _STRING_KEYWORDS
    return ()


class _Model:
    """Reads a schema and the documents it references into ``json_schema_compat.Node``s
    (that module's docstring describes the model), one node per schema object, so that a
    recursive schema is a finite graph; ``$ref``s are followed lazily, when compared."""

    def __init__(self, document: Any, resolver: Any, draft: Draft, documents: Mapping[int, Draft]) -> None:
        self._documents = documents
        self._nodes: dict[int, Node] = {}
        self.root = self.load(document, resolver, draft)

    def load(self, schema: Any, resolver: Any, draft: Draft) -> Node:
        if schema is True or not isinstance(schema, dict):
            return ANYTHING if schema is True or not isinstance(schema, bool) else NOTHING
        node = self._nodes.get(id(schema))
        if node is None:
            if _id_of(schema, draft) is not None:
                resolver = resolver.in_subresource(draft.specification.create_resource(schema))
            node = self._read(schema, resolver, draft)
            self._nodes[id(schema)] = node
        return node

    def _read(self, schema: dict[str, Any], resolver: Any, draft: Draft) -> Node:
        legacy = draft in _LEGACY
        found: list[Node] = []
        if legacy and isinstance(schema.get("$ref"), str):  # its siblings are ignored
            return self._common(self._ref(schema, schema["$ref"], resolver, draft), schema, draft)
        for keyword in ("$ref", "$recursiveRef", "$dynamicRef"):  # the dynamic ones read statically
            if not legacy and isinstance(schema.get(keyword), str):
                found.append(self._ref(schema, schema[keyword], resolver, draft))
        if isinstance(schema.get("enum"), list):
            found.append(Node("enum", schema, values=list(schema["enum"])))
        for criterion in ("allOf", "anyOf", "oneOf"):
            if isinstance(schema.get(criterion), list):
                subschemas = [self.load(s, resolver, draft) for s in schema[criterion]]
                found.append(Node("combined", schema, criterion=criterion, subschemas=subschemas))
        if "not" in schema:
            found.append(Node("not", schema, inner=self.load(schema["not"], resolver, draft)))
        if "const" in schema and draft is not DRAFT_4:
            found.append(Node("const", schema, value=schema["const"]))
        consumed: set[str] = set()
        types = schema.get("type")
        if isinstance(types, str):
            found.append(self._typed(types, schema, resolver, draft))
            consumed.update(_family(_kind_of_type(types), draft))
        elif isinstance(types, list):
            typed = [self._typed(t, schema, resolver, draft) for t in types if isinstance(t, str)]
            found.append(Node("combined", schema, criterion="anyOf", subschemas=typed))
            for t in types:
                if isinstance(t, str):
                    consumed.update(_family(_kind_of_type(t), draft))
        for kind in ("array", "object", "number", "string"):
            keywords = _family(kind, draft)
            if any(k in schema and k not in consumed for k in keywords):
                found.append(self._typed(kind, schema, resolver, draft))
        if draft not in (DRAFT_4, DRAFT_6) and any(k in schema for k in _CONDITIONAL_KEYWORDS):
            found.append(Node("conditional", schema))
        if not found:
            node = Node("empty", schema)
        elif len(found) == 1:
            node = found[0]
        else:
            node = Node("combined", schema, criterion="allOf", subschemas=found)
        return self._common(node, schema, draft)

    def _common(self, node: Node, schema: dict[str, Any], draft: Draft) -> Node:
        node.id = schema.get("id" if draft is DRAFT_4 else "$id")
        node.title = schema.get("title")
        node.description = schema.get("description")
        node.has_default = "default" in schema
        node.default = schema.get("default")
        node.connect_type = schema.get("connect.type")
        return node

    def _ref(self, schema: dict[str, Any], ref: str, resolver: Any, draft: Draft) -> Node:
        node = Node("ref", schema)
        resolved: list[Node] = []

        def target() -> Node:
            if not resolved:
                try:
                    found = resolver.lookup(ref)
                except referencing.exceptions.Unresolvable:  # parse refuses these; read as anything
                    resolved.append(ANYTHING)
                else:
                    contents = found.contents
                    target_draft = self._documents.get(id(contents), draft)
                    resolved.append(self.load(contents, found.resolver, target_draft))
            return resolved[0]

        node.target = target
        return node

    def _typed(self, kind: str, schema: dict[str, Any], resolver: Any, draft: Draft) -> Node:
        if kind in ("string",):
            return Node("string", schema, limits=_limits(schema, "maxLength", "minLength"),
                        pattern=_string(schema.get("pattern")))
        if kind in ("number", "integer"):
            return self._number(schema, draft, kind == "integer")
        if kind == "object":
            return self._object(schema, resolver, draft)
        if kind == "array":
            return self._array(schema, resolver, draft)
        if kind in ("boolean", "null"):
            return Node(kind, schema)
        return Node("empty", schema)

    def _number(self, schema: dict[str, Any], draft: Draft, integer: bool) -> Node:
        if draft is DRAFT_4:  # boolean modifiers make maximum / minimum exclusive
            limits = _limits(schema, "maximum", "minimum")
            for limit in ("maximum", "minimum"):
                exclusive = "exclusive" + limit.capitalize()
                if schema.get(exclusive) is True and limit in limits:
                    limits[exclusive] = limits.pop(limit)
        else:
            limits = _limits(schema, "maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum")
        return Node("number", schema, integer=integer, limits=limits, multiple_of=_numeric(schema.get("multipleOf")))

    def _object(self, schema: dict[str, Any], resolver: Any, draft: Draft) -> Node:
        node = Node("object", schema, limits=_limits(schema, "maxProperties", "minProperties"))
        properties = schema.get("properties")
        if isinstance(properties, dict):
            node.properties = {name: self.load(s, resolver, draft) for name, s in properties.items()}
        required = schema.get("required")
        if isinstance(required, list):
            node.required = [r for r in required if isinstance(r, str)]
        node.additional, node.additional_schema = self._additional(schema.get("additionalProperties"), resolver, draft)
        patterns = schema.get("patternProperties")
        if isinstance(patterns, dict):
            node.pattern_properties = [(p, self.load(s, resolver, draft)) for p, s in patterns.items()]
        dependencies: list[tuple[str, Any]] = []
        if draft in _LEGACY:
            if isinstance(schema.get("dependencies"), dict):
                dependencies = list(schema["dependencies"].items())
        else:
            for keyword in ("dependentRequired", "dependentSchemas"):
                if isinstance(schema.get(keyword), dict):
                    dependencies += list(schema[keyword].items())
        for name, dependency in dependencies:
            if isinstance(dependency, list):
                node.property_dependencies[name] = dependency
            else:
                node.schema_dependencies[name] = self.load(dependency, resolver, draft)
        if draft not in _LEGACY and "unevaluatedProperties" in schema:
            node.unevaluated = self.load(schema["unevaluatedProperties"], resolver, draft)
        return node

    def _array(self, schema: dict[str, Any], resolver: Any, draft: Draft) -> Node:
        node = Node("array", schema, limits=_limits(schema, "maxItems", "minItems"),
                    unique_items=schema.get("uniqueItems") is True)
        items = schema.get("items")
        if draft is DRAFT_2020_12:  # prefixItems, then items for the rest (a boolean: whether there may be more)
            prefix = schema.get("prefixItems")
            if isinstance(prefix, list):
                node.item_schemas = [self.load(s, resolver, draft) for s in prefix]
            if isinstance(items, bool) or isinstance(prefix, list):
                node.additional, node.additional_schema = self._additional(items, resolver, draft)
            elif items is not None:
                node.all_items = self.load(items, resolver, draft)
        else:
            if isinstance(items, list):
                node.item_schemas = [self.load(s, resolver, draft) for s in items]
            elif items is not None:
                node.all_items = self.load(items, resolver, draft)
            node.additional, node.additional_schema = self._additional(schema.get("additionalItems"), resolver, draft)
        if draft not in _LEGACY:
            node.limits.update(_limits(schema, "maxContains", "minContains"))
            if "unevaluatedItems" in schema:
                node.unevaluated = self.load(schema["unevaluatedItems"], resolver, draft)
        return node

    def _additional(self, value: Any, resolver: Any, draft: Draft) -> tuple[bool, Node | None]:
        """(permits additional properties or items, their schema) of additionalProperties,
        additionalItems or 2020-12's items beside prefixItems."""
        if isinstance(value, bool):
            return value, None
        if isinstance(value, dict):
            return True, self.load(value, resolver, draft)
        return True, None


def _kind_of_type(name: str) -> str:
    return "number" if name == "integer" else name


def _numeric(value: Any) -> Any:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _limits(schema: dict[str, Any], *keywords: str) -> dict[str, Any]:
    return {k: schema[k] for k in keywords if _numeric(schema.get(k)) is not None}


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


__all__ = ["DEFAULT_DRAFT", "DRAFT_2019_09", "DRAFT_2020_12", "DRAFT_4", "DRAFT_6", "DRAFT_7", "Draft", "JsonSchema",
           "MAX_DEPTH", "draft_of", "parse", "pointer"]
