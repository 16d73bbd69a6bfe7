"""KafkaJS 2 (Node.js, a client with its own protocol code) against the broker: idempotent
produce, transactions (commit, abort, sendOffsets: the group's offsets move only with the
commit), a read_committed consumer group that sees every committed record and no aborted
one, and describeGroups (issues 14 and 17, with a client of another language).

KafkaJS is found in ``KAFKAJS_DIR`` (a directory with ``node_modules/kafkajs``) or installed
with npm into ``build/kafkajs`` on first use; without node/npm, or when the npm registry
cannot be reached, the test is skipped (as the kcat tests are without kcat)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "support" / "js" / "kafkajs_workload.js"
KAFKAJS_VERSION = "2.2.4"


@pytest.fixture(scope="session")
def kafkajs_dir() -> Path:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    configured = os.environ.get("KAFKAJS_DIR")
    if configured:
        return Path(configured)
    target = REPO / "build" / "kafkajs"
    if not (target / "node_modules" / "kafkajs").is_dir():
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed")
        target.mkdir(parents=True, exist_ok=True)
        try:
            r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(target),
                                f"kafkajs@{KAFKAJS_VERSION}"], capture_output=True, text=True, timeout=180)
        except subprocess.TimeoutExpired:
            pytest.skip("npm install kafkajs timed out (no registry?)")
        if r.returncode != 0:
            pytest.skip(f"npm install kafkajs failed: {r.stderr[-500:]}")
    return target


def test_kafkajs_idempotent_transactions_and_read_committed_group(kafka_broker, kafkajs_dir):
    topic, group = f"kjs-{uuid.uuid4().hex[:8]}", f"kjs-g-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, NODE_PATH=str(kafkajs_dir / "node_modules"), KAFKAJS_NO_PARTITIONER_WARNING="1")
    r = subprocess.run(["node", str(SCRIPT), kafka_broker.bootstrap, topic, group], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    expected = {f"plain-{i}" for i in range(20)} | {"committed-0", "committed-1"}
    assert sorted(out["seen"]) == sorted(expected), out["seen"]  # each once, no aborted record
    assert out["committed"] == "7"  # the aborted transaction's offset (99) never appeared
    assert out["group_state"] == "Stable" and out["members"] == 1
    assert "Traceback" not in kafka_broker.stderr_text()
