"""The admin client's client quotas (KIP-546): request bodies and answers of
AlterClientQuotas and DescribeClientQuotas, for ``AdminClient.alter_client_quotas`` /
``describe_client_quotas`` and ``kafkalog configs``.

An entity is a mapping of entity type (``user``, ``client-id``, ``ip``) to a name, None
for the type's default entity; a change maps quota keys (``producer_byte_rate``,
``consumer_byte_rate``, ``request_percentage``, ``controller_mutation_rate``,
``connection_creation_rate``) to a value, None to remove it. Filters are Kafka's
(``MATCH_EXACT`` a name, ``MATCH_DEFAULT`` the default entity, ``MATCH_ANY`` any entity of
the type), ``strict``: no other entity types.

Thread-safety: pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.protocol import request_schema
from broker.protocol.api_keys import ApiKey

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

Entity = Mapping[str, "str | None"]


def build_alter(version: int, changes: list[tuple[Entity, Mapping[str, float | None]]],
                validate_only: bool) -> Any:
    schema = request_schema(ApiKey.ALTER_CLIENT_QUOTAS, version)
    entry, entity, op = (schema.structs[n] for n in ("EntryData", "EntityData", "OpData"))
    return schema.cls(validate_only=validate_only, entries=[
        entry(entity=[entity(entity_type=t, entity_name=n) for t, n in e.items()],
              ops=[op(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops.items()])
        for e, ops in changes])


def parse_alter(body: Any) -> list[tuple[dict[str, str | None], int, str | None]]:
    return [({x.entity_type: x.entity_name for x in e.entity}, e.error_code, e.error_message) for e in body.entries]


def build_describe(version: int, components: list[tuple[str, int, str | None]], strict: bool) -> Any:
    schema = request_schema(ApiKey.DESCRIBE_CLIENT_QUOTAS, version)
    comp = schema.structs["ComponentData"]
    return schema.cls(strict=strict, components=[comp(entity_type=t, match_type=m, match=n)
                                                 for t, m, n in components])


def parse_describe(body: Any) -> tuple[int, str | None, list[tuple[dict[str, str | None], dict[str, float]]]]:
    entries = [({x.entity_type: x.entity_name for x in e.entity}, {v.key: v.value for v in e.values})
               for e in body.entries or []]
    return body.error_code, body.error_message, entries


__all__ = ["MATCH_ANY", "MATCH_DEFAULT", "MATCH_EXACT", "build_alter", "build_describe", "parse_alter",
           "parse_describe"]
