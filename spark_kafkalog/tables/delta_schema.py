"""Schema compatibility of a Delta table target (``delta.py``): Delta types as deltalake's
field JSON says them, compared without nullability and metadata.

Owns ``bare_type`` (a field's type without nullability), ``mismatch`` (where a new type
changes an old one incompatibly: another primitive type, a struct field of another type)
and ``adds_fields`` (a struct type gaining fields, at any depth: a compatible evolution
deltalake's ``alter.add_columns`` merges in; fields only in the table stay).

Thread-safety: pure functions.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["bare_type", "mismatch", "adds_fields"]


def bare_type(field_json: str) -> Any:
    """A Delta field's type without nullability and metadata (what compatibility is about)."""
    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items()
                    if k not in ("nullable", "containsNull", "valueContainsNull", "metadata")}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node
    return strip(json.loads(field_json)).get("type")


def mismatch(old: Any, new: Any, path: str) -> str | None:
    """Where ``new`` changes a type of ``old`` (``'path' is X in the table, Y in the
    data``), None when it does not: same types, or structs whose common fields match
    (fields only in ``new`` are added, fields only in ``old`` stay)."""
    if old == new:
        return None
    if _is_struct(old) and _is_struct(new):
        fields = {f["name"]: f["type"] for f in new.get("fields", [])}
        for f in old.get("fields", []):
            if f["name"] in fields:
                found = mismatch(f["type"], fields[f["name"]], f"{path}.{f['name']}")
                if found is not None:
                    return found
        return None
    return f"{path!r} is {_type_text(old)} in the table, {_type_text(new)} in the data"


def adds_fields(old: Any, new: Any) -> bool:
    """``new`` has a struct field ``old`` lacks (at any depth)."""
    if not (_is_struct(old) and _is_struct(new)):
        return False
    fields = {f["name"]: f["type"] for f in old.get("fields", [])}
    return any(f["name"] not in fields or adds_fields(fields[f["name"]], f["type"]) for f in new.get("fields", []))


def _is_struct(t: Any) -> bool:
    return isinstance(t, dict) and t.get("type") == "struct"


def _type_text(t: Any) -> str:
    return t if isinstance(t, str) else json.dumps(t, separators=(",", ":"))[:120]
