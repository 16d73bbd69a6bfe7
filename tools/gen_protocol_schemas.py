#!/usr/bin/env python3
"""Generate the wire-protocol schema tables from Kafka's JSON message definitions.

Reads ``<spec>/message/*.json`` (Kafka's ``clients/src/main/resources/common/message``,
JSON with ``//`` comments) and writes, under ``broker/protocol/``:

* ``messages/<api>.py``: one module per API in ``GENERATED_APIS`` with two tables,
  ``<API>_REQUEST`` and ``<API>_RESPONSE`` (``broker.protocol.schema.Message``), covering
  every version Kafka defines for that API. Common structs are inlined where used.
* ``messages/__init__.py``: ``REQUEST_SCHEMAS`` / ``RESPONSE_SCHEMAS`` by API key.
* ``api_keys.py``: the ``ApiKey`` enum and, for every API Kafka defines (generated or
  not), its valid and flexible request versions (what header versions depend on).

The output is deterministic: re-running the generator on the same spec reproduces the
committed files byte for byte (``--check`` verifies that without writing). The broker
never reads the JSON files at run time; only this script and the tests do.

Usage: python tools/gen_protocol_schemas.py [--spec DIR] [--check]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = ROOT / "tools" / "kafka-spec"  # Kafka's JSON definitions, kept in the repository
OUT_DIR = ROOT / "broker" / "protocol"

# The APIs whose schemas the broker and its client may need (PROTOCOL.md section 2, plus
# the admin, transaction and tooling APIs a single-node broker may grow into).
GENERATED_APIS = (
    "Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch",
    "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup",
    "DescribeGroups", "ListGroups", "SaslHandshake", "ApiVersions", "CreateTopics",
    "DeleteTopics", "DeleteRecords", "InitProducerId", "OffsetForLeaderEpoch",
    "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit",
    "DescribeConfigs", "AlterConfigs", "SaslAuthenticate", "CreatePartitions",
    "DescribeLogDirs", "DeleteGroups", "IncrementalAlterConfigs", "OffsetDelete",
    "DescribeCluster", "DescribeProducers", "DescribeTransactions", "ListTransactions",
    "ConsumerGroupHeartbeat", "ConsumerGroupDescribe", "DescribeClientQuotas", "AlterClientQuotas",
    "GetTelemetrySubscriptions", "PushTelemetry", "ListClientMetricsResources",
    "DescribeUserScramCredentials", "AlterUserScramCredentials",
    "DescribeAcls", "CreateAcls", "DeleteAcls", "WriteTxnMarkers",
    # share groups (KIP-932, Kafka 4.2's definitions)
    "ShareGroupHeartbeat", "ShareGroupDescribe", "ShareFetch", "ShareAcknowledge",
    "InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState", "DeleteShareGroupState",
    "ReadShareGroupStateSummary", "DescribeShareGroupOffsets", "AlterShareGroupOffsets",
    "DeleteShareGroupOffsets",
)

FIELD_KEYS = {
    "name", "type", "versions", "about", "fields", "nullableVersions", "default",
    "taggedVersions", "tag", "ignorable", "mapKey", "entityType", "zeroCopy",
}
PRIMITIVES = {
    "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "uuid",
    "string", "bytes", "records",
}
INT_TYPES = {"int8", "int16", "int32", "int64", "uint16", "uint32"}
LINE = 92


def load_spec(path: Path) -> tuple[dict, list[str]]:
    """Parse one JSON-with-comments file; returns (data, comment lines after the license)."""
    text = path.read_text()
    comments: list[str] = []
    in_body = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("{"):
            in_body = True
        if in_body and stripped.startswith("//"):
            comments.append(stripped[2:].rstrip()[1:] if stripped[2:3] == " " else stripped[2:])
    data = json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))
    while comments and not comments[-1].strip():
        comments.pop()
    return data, comments


def snake_case(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return s.lower()


def upper_snake(name: str) -> str:
    return snake_case(name).upper()


def py(value: object) -> str:
    """Python literal for a table value, strings double-quoted like the rest of the code."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def parse_default(value: object, ftype: str) -> object:
    if not isinstance(value, str):
        return value
    if value == "null":
        return None
    if ftype in INT_TYPES:
        return int(value, 0)
    if ftype == "bool":
        return {"true": True, "false": False}[value]
    if ftype == "float64":
        return float(value)
    return value


def resolve_fields(fields: list[dict], common: dict[str, dict]) -> list[dict]:
    """Inline common structs: a field typed ``[]X`` / ``X`` without ``fields`` whose X
    is a common struct gets X's fields."""
    out = []
    for f in fields:
        unknown = set(f) - FIELD_KEYS
        if unknown:
            raise SystemExit(f"field {f['name']}: unsupported keys {unknown}")
        f = dict(f)
        element = f["type"][2:] if f["type"].startswith("[]") else f["type"]
        if element not in PRIMITIVES:
            if "fields" not in f:
                f["fields"] = common[element]["fields"]
            f["fields"] = resolve_fields(f["fields"], common)
        out.append(f)
    return out


def render_field(f: dict, indent: int, *, name=None, ignorable: bool = True) -> list[str]:
    """One ``Field(...)`` (with its sub-fields) of a spec field. ``name`` maps Kafka's field
    name to the table's (default: snake_case; the coordinator records keep Kafka's camelCase
    JSON names); ``ignorable`` writes the flag (requests and responses have it)."""
    name = name or snake_case
    pad = " " * indent
    lines = []
    about = f.get("about", "").strip()
    if about:
        for chunk in textwrap.wrap(about, LINE - indent - 2):
            lines.append(f"{pad}# {chunk}")
    versions = f.get("versions", f.get("taggedVersions", "none")).strip()  # a tagged-only field
    args = [py(name(f["name"])), py(f["type"]), py(versions)]
    if "nullableVersions" in f:
        args.append(f"nullable={py(f['nullableVersions'].strip())}")
    if "taggedVersions" in f:
        args.append(f"tagged={py(f['taggedVersions'].strip())}")
    if "tag" in f:
        args.append(f"tag={int(f['tag'])}")
    if "default" in f:
        args.append(f"default={py(parse_default(f['default'], f['type']))}")
    if ignorable and f.get("ignorable"):
        args.append("ignorable=True")
    if "fields" not in f:
        lines.append(f"{pad}Field({', '.join(args)}),")
        return lines
    lines.append(f"{pad}Field(")
    lines.append(f"{pad}    {', '.join(args)},")
    lines.append(f"{pad}    fields=(")
    for sub in f["fields"]:
        lines.extend(render_field(sub, indent + 8, name=name, ignorable=ignorable))
    lines.append(f"{pad}    ),")
    lines.append(f"{pad}),")
    return lines


def render_message(data: dict, comments: list[str], const: str) -> list[str]:
    common = {c["name"]: c for c in data.get("commonStructs", [])}
    fields = resolve_fields(data.get("fields", []), common)
    lines = [f"# {c}".rstrip() for c in comments]
    lines += [
        f"{const} = Message(",
        f"    {py(data['name'])},",
        f"    api_key={data['apiKey']},",
        f"    kind={py(data['type'])},",
        f"    valid={py(data['validVersions'])},",
        f"    flexible={py(data['flexibleVersions'])},",
        "    fields=(",
    ]
    for f in fields:
        lines.extend(render_field(f, 8))
    lines += ["    ),", ")", ""]
    return lines


HEADER = "Generated by tools/gen_protocol_schemas.py; do not edit (re-run the generator)."


def render_api_module(api: str, req: tuple[dict, list[str]], resp: tuple[dict, list[str]]) -> str:
    key = req[0]["apiKey"]
    stem = upper_snake(api)
    out = [
        f'"""{api} (API key {key}): {api}Request and {api}Response schema tables.',
        "",
        f"From Kafka's {api}Request.json and {api}Response.json; field names are",
        "snake_case, versions use Kafka's notation; ``broker.protocol.schema`` interprets them.",
        "",
        HEADER,
        '"""',
        "",
        "from broker.protocol.schema import Field, Message",
        "",
    ]
    out += render_message(req[0], req[1], f"{stem}_REQUEST")
    out.append("")
    out += render_message(resp[0], resp[1], f"{stem}_RESPONSE")
    return "\n".join(out).rstrip("\n") + "\n"


def render_index(apis: list[tuple[int, str]]) -> str:
    out = [
        '"""The generated schema tables, one module per API, indexed by API key.',
        "",
        "``REQUEST_SCHEMAS[api_key]`` / ``RESPONSE_SCHEMAS[api_key]`` are",
        "``broker.protocol.schema.Message`` tables covering every version Kafka defines.",
        "",
        HEADER,
        '"""',
        "",
        "from broker.protocol.messages import (",
    ]
    for _, api in sorted(apis, key=lambda a: snake_case(a[1])):
        out.append(f"    {snake_case(api)},")
    out += [")", "", "REQUEST_SCHEMAS = {"]
    for key, api in sorted(apis):
        out.append(f"    {key}: {snake_case(api)}.{upper_snake(api)}_REQUEST,")
    out += ["}", "", "RESPONSE_SCHEMAS = {"]
    for key, api in sorted(apis):
        out.append(f"    {key}: {snake_case(api)}.{upper_snake(api)}_RESPONSE,")
    out += ["}", ""]
    return "\n".join(out)


def render_api_keys(all_requests: list[dict]) -> str:
    rows = sorted(all_requests, key=lambda d: d["apiKey"])
    out = [
        '"""Kafka\'s API keys and, for every API Kafka defines, its request version ranges.',
        "",
        "``ApiKey`` uses the names of Kafka's ``ApiKeys`` enum. ``API_VERSION_RANGES`` maps",
        "each key to ``(min_version, max_version, first_flexible_version or None)`` as in",
        "Kafka's JSON schemas; header versions follow from it (see ``broker.protocol.header``).",
        "What the broker *advertises* is a separate, smaller table (``versions.py``).",
        "",
        HEADER,
        '"""',
        "",
        "import enum",
        "",
        "",
        "class ApiKey(enum.IntEnum):",
    ]
    for d in rows:
        out.append(f"    {upper_snake(d['name'][: -len('Request')])} = {d['apiKey']}")
    out += ["", "", "API_VERSION_RANGES: dict[int, tuple[int, int, int | None]] = {"]
    for d in rows:
        lo, _, hi = d["validVersions"].partition("-")
        hi = hi or lo
        flex = d["flexibleVersions"]
        first = "None" if flex == "none" else flex.rstrip("+")
        if flex != "none" and not flex.endswith("+"):
            raise SystemExit(f"{d['name']}: closed flexibleVersions {flex}")
        out.append(f"    {d['apiKey']}: ({lo}, {hi}, {first}),  # {d['name'][: -len('Request')]}")
    out += ["}", ""]
    return "\n".join(out)


def generate(spec: Path) -> dict[Path, str]:
    msg_dir = spec / "message"
    files: dict[Path, str] = {}
    all_requests = []
    for path in sorted(msg_dir.glob("*Request.json")):
        data, _ = load_spec(path)
        if data.get("type") == "request":
            all_requests.append(data)
    apis = []
    for api in GENERATED_APIS:
        req = load_spec(msg_dir / f"{api}Request.json")
        resp = load_spec(msg_dir / f"{api}Response.json")
        if req[0]["apiKey"] != resp[0]["apiKey"]:
            raise SystemExit(f"{api}: request and response keys differ")
        apis.append((req[0]["apiKey"], api))
        files[OUT_DIR / "messages" / f"{snake_case(api)}.py"] = render_api_module(api, req, resp)
    files[OUT_DIR / "messages" / "__init__.py"] = render_index(apis)
    files[OUT_DIR / "api_keys.py"] = render_api_keys(all_requests)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    files = generate(args.spec)
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for p in stale:
            print(f"out of date: {p.relative_to(ROOT)}", file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(files[p])
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
