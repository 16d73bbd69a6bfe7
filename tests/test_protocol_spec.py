"""The generated schema tables (broker/protocol/messages, api_keys.py) against Kafka's
JSON message definitions in tools/kafka-spec: every field, type, version range,
nullable and tagged versions, tag, default and flexible versions must match exactly, and
re-running the generator must reproduce the committed files byte for byte."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from broker.protocol.api_keys import API_VERSION_RANGES, ApiKey
from broker.protocol.messages import REQUEST_SCHEMAS, RESPONSE_SCHEMAS
from broker.protocol.schema import MAX_VERSION, Field, Message

ROOT = Path(__file__).resolve().parent.parent
SPEC_DIR = ROOT / "tools" / "kafka-spec" / "message"

ALL = [*REQUEST_SCHEMAS.values(), *RESPONSE_SCHEMAS.values()]


def load(name: str) -> dict:
    text = (SPEC_DIR / f"{name}.json").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))


def versions(spec: str | None) -> tuple[int, int] | None:
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), MAX_VERSION
    lo, _, hi = spec.partition("-")
    return int(lo), int(hi or lo)


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def default(value: object, ftype: str) -> object:
    if not isinstance(value, str):
        return value
    if value == "null":
        return None
    if ftype in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return int(value, 0)
    if ftype == "bool":
        return value == "true"
    return value


def compare_fields(ours: tuple[Field, ...], spec: list[dict], common: dict, path: str) -> None:
    assert [f.name for f in ours] == [snake(s["name"]) for s in spec], path
    for f, s in zip(ours, spec):
        where = f"{path}.{s['name']}"
        assert f.type == s["type"], where
        assert f.versions == versions(s["versions"]), where
        assert f.nullable == versions(s.get("nullableVersions")), where
        assert f.tagged == versions(s.get("taggedVersions")), where
        assert f.tag == (int(s["tag"]) if "tag" in s else None), where
        assert f.ignorable == bool(s.get("ignorable", False)), where
        if "default" in s:
            assert f.explicit_default == default(s["default"], s["type"]), where
        else:
            assert f.explicit_default is Field.__init__.__kwdefaults__["default"], where
        element = s["type"].removeprefix("[]")
        if "fields" in s or element in common:
            nested = s.get("fields") or common[element]["fields"]
            assert f.fields is not None, where
            compare_fields(f.fields, nested, common, where)
        else:
            assert f.fields is None, where


@pytest.mark.parametrize("message", ALL, ids=[m.name for m in ALL])
def test_table_matches_kafka_json(message: Message) -> None:
    spec = load(message.name)
    assert message.api_key == spec["apiKey"]
    assert message.kind == spec["type"]
    assert message.valid_versions == versions(spec["validVersions"])
    assert message.flexible_versions == versions(spec["flexibleVersions"])
    common = {c["name"]: c for c in spec.get("commonStructs", [])}
    compare_fields(message.fields, spec.get("fields", []), common, message.name)


def test_every_api_key_and_range_matches_kafka_json() -> None:
    seen = {}
    for path in sorted(SPEC_DIR.glob("*Request.json")):
        spec = load(path.stem)
        if spec.get("type") != "request":
            continue
        key = spec["apiKey"]
        lo, hi = versions(spec["validVersions"])  # type: ignore[misc]
        flex = versions(spec["flexibleVersions"])
        seen[key] = (lo, hi, flex[0] if flex else None)
        assert ApiKey(key).name == snake(spec["name"].removesuffix("Request")).upper()
    assert API_VERSION_RANGES == seen
    assert {int(k) for k in ApiKey} == set(seen)


def test_request_and_response_tables_pair_up() -> None:
    assert REQUEST_SCHEMAS.keys() == RESPONSE_SCHEMAS.keys()
    for key, req in REQUEST_SCHEMAS.items():
        resp = RESPONSE_SCHEMAS[key]
        assert req.api_key == resp.api_key == key
        assert req.valid_versions == resp.valid_versions
        assert req.flexible_versions == resp.flexible_versions


def test_generator_reproduces_committed_files() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_protocol_schemas.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr


def test_package_reads_no_spec_and_imports_no_higher_layer() -> None:
    """broker.protocol carries its own tables (no JSON at run time) and imports neither
    broker.log, broker.server nor broker.client (DESIGN.md layers)."""
    code = (
        "import builtins, sys\n"
        "real_open = builtins.open\n"
        "def guarded(path, *a, **k):\n"
        "    assert not str(path).endswith('.json'), path\n"
        "    return real_open(path, *a, **k)\n"
        "builtins.open = guarded\n"
        "import broker.protocol, broker.protocol.messages\n"
        "from broker.protocol.messages import REQUEST_SCHEMAS\n"
        "for m in REQUEST_SCHEMAS.values():\n"
        "    m.codec(m.valid_versions[1])\n"
        "bad = [n for n in sys.modules if n.startswith(('broker.log', 'broker.server', 'broker.client'))]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
