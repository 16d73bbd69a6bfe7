"""Hypothesis strategies that build valid values for any schema table and version.

Shared by the protocol tests (schema round trips, kafka-python interop, fuzzing from
valid encodings); ``tests/test_protocol_strategies.py`` checks the strategies themselves.

Thread-safety: pure functions building hypothesis strategies.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from broker.protocol.messages import REQUEST_SCHEMAS, RESPONSE_SCHEMAS
from broker.protocol.primitives import ZERO_UUID
from broker.protocol.schema import Field, Message, in_range

INT_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}

SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

ALL_MESSAGES: list[Message] = [*REQUEST_SCHEMAS.values(), *RESPONSE_SCHEMAS.values()]


def message_versions(messages: list[Message] = ALL_MESSAGES) -> list[tuple[Message, int]]:
    """Every (message, version) pair the tables define."""
    out = []
    for m in messages:
        lo, hi = m.valid_versions
        out.extend((m, v) for v in range(lo, hi + 1))
    return out


def _ids(pairs: list[tuple[Message, int]]) -> list[str]:
    return [f"{m.name}-v{v}" for m, v in pairs]


def versions_of(message: Message) -> range:
    lo, hi = message.valid_versions
    return range(lo, hi + 1)


def _scalar(ftype: str) -> st.SearchStrategy:
    if ftype in INT_BOUNDS:
        lo, hi = INT_BOUNDS[ftype]
        return st.one_of(st.integers(-2, 2).filter(lambda x: lo <= x <= hi), st.integers(lo, hi))
    if ftype == "float64":
        return st.floats(allow_nan=False)
    if ftype == "bool":
        return st.booleans()
    if ftype == "uuid":
        return st.one_of(st.just(ZERO_UUID), st.uuids())
    if ftype == "string":
        return st.text(max_size=12)
    if ftype in ("bytes", "records"):
        return st.binary(max_size=24)
    raise AssertionError(ftype)


def field_values(message: Message, f: Field, version: int, depth: int = 0) -> st.SearchStrategy:
    """Values of ``f`` that its encoding at ``version`` can carry."""
    if f.struct_name is not None:
        element = struct_values(message, f.struct_name, version, depth + 1)
    else:
        element = _scalar(f.element_type)
    if f.is_array:
        values = st.lists(element, max_size=2 if depth < 2 else 1)
    else:
        values = element
    if in_range(f.nullable, version):
        values = st.one_of(st.none(), values)
    return values


def struct_values(message: Message, sname: str, version: int, depth: int = 0) -> st.SearchStrategy:
    cls = message.structs[sname]
    fields = message._struct_fields[sname]
    kwargs = {
        f.name: field_values(message, f, version, depth)
        for f in fields
        if in_range(f.versions, version)
    }
    return st.fixed_dictionaries(kwargs).map(lambda kw: cls(**kw))


def message_values(message: Message, version: int) -> st.SearchStrategy:
    return struct_values(message, message.name, version)
