"""Test support: the REAL broker in a subprocess, and a raw protocol client.

* ``BrokerProcess``: runs ``python -m broker`` with ``--override`` flags (listeners on
  127.0.0.1 port 0, a temporary log directory, no initial rebalance delay), waits for the
  ready line on stdout and parses the bound ports from it (``port``: the PLAINTEXT listener's, else the first's;
  ``ports``: every listener's by name); ``stop()`` sends SIGTERM and waits (clean shutdown),
  ``kill()`` sends SIGKILL, ``restart()`` starts again on the same log directory.
  stdout/stderr go to files in the test's directory (``stderr_text()``), with
  ``kafka.request.logger`` at DEBUG so tests can see which API versions clients used
  (``api_versions_used(client_id)``). The process is forked from a server that has the
  broker imported already (``broker_fork.py``: the same ``broker/__main__.py`` in a process
  of its own, without 0.4 s of imports per start); ``proc`` is ``Popen``-like either way.
* ``kafka_broker`` (session scope): one broker shared by the client tests, to keep the
  suite fast. Tests use their own topic and group names.
* ``broker_factory`` (function scope): fresh brokers for restart and crash tests.
* ``RawClient``: one TCP connection speaking ``broker.protocol`` (encode_request /
  decode_response): ``request(api_key, version, body)`` sends and waits for the answer;
  ``send`` / ``recv`` for pipelining and acks=0. Bodies may be dicts.

The fixtures reach every test through ``tests/conftest.py`` (``pytest_plugins``); the
classes are imported: ``from tests.support.broker import BrokerProcess, RawClient``.
Thread-safety: test-process only.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from broker.protocol import FrameDecoder, RequestHeader, decode_response, encode_request
from tests.support import broker_fork

ROOT = Path(__file__).resolve().parents[2]
READY_RE = re.compile(r"started \(kafkalog\) listening on PLAINTEXT://([^ ,]+):(\d+)[ ,]")
READY_LISTENERS_RE = re.compile(r"started \(kafkalog\) listening on (\S+) ")
LISTENER_RE = re.compile(r"(\w+)://([^ ,]+):(\d+)")
REQUEST_LOG_RE = re.compile(r"client_id='([^']*)': api_key=(\d+) \((\w+)\) version=(\d+)")


class BrokerProcess:
    """``python -m broker`` in a subprocess (see module docstring)."""

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None, name: str = "broker") -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_dir = self.workdir / "kafka-logs"
        self.name = name
        self.overrides = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.log_dir),
            # Tests write fixed, years-old timestamps: time-based retention (7 days) would
            # delete them whenever the retention check happens to run mid-test. Tests of
            # retention pass their own value.
            "log.retention.ms": "-1",
            # No initial rebalance delay, as in Kafka's config/server.properties for
            # development: each new group's first join would wait 3 s. Tests of the delay
            # pass their own value.
            "group.initial.rebalance.delay.ms": "0",
            **(overrides or {}),
        }
        self.proc: subprocess.Popen | broker_fork.ForkedProcess | None = None
        self.port: int | None = None
        self.ports: dict[str, int] = {}  # listener name -> bound port (several listeners)
        self.host = "127.0.0.1"
        self._starts = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "broker"]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd + ["--log-level", "kafka.request.logger=DEBUG"]

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        self._starts += 1
        self.stdout_path = self.workdir / f"{self.name}-{self._starts}.out"
        self.stderr_path = self.workdir / f"{self.name}-{self._starts}.err"
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            cmd = self.command()
            self.proc = broker_fork.spawn(cmd[3:], env, self.workdir, out, err) or \
                subprocess.Popen(cmd, stdout=out, stderr=err, cwd=self.workdir, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.stdout_path.read_text()
            m = READY_LISTENERS_RE.search(text)
            if m:
                self.ports = {name: int(port) for name, _, port in LISTENER_RE.findall(m.group(1))}
                first = LISTENER_RE.search(m.group(1))
                plain = READY_RE.search(text)
                self.host, self.port = (plain.group(1), int(plain.group(2))) if plain else \
                    (first.group(2), int(first.group(3)))
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}: {self.stderr_text()[-3000:]}")
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker not ready after {timeout}s: {self.stderr_text()[-3000:]}")

    @property
    def schema_registry_url(self) -> str:
        """The URL of the broker's Schema Registry (started with
        ``schema.registry.listeners``), from the ready line."""
        m = re.search(r" schema\.registry=([^ ,\s]+)", self.stdout_text())
        if m is None:
            raise KeyError(f"no schema registry in {self.stdout_text()!r}")
        return m.group(1)

    def listener_port(self, name: str) -> int:
        """The bound port of listener ``name`` (e.g. SASL_PLAINTEXT), from the ready line."""
        m = re.search(rf"listening on \S*?\b{re.escape(name)}://[^ ,]+:(\d+)", self.stdout_text())
        if m is None:
            raise KeyError(f"no listener {name} in {self.stdout_text()!r}")
        return int(m.group(1))

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stdout_text(self) -> str:
        return self.stdout_path.read_text()

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def rss_kb(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def api_versions_used(self, client_id: str | None = None) -> dict[str, set[int]]:
        """API name -> versions received, from the request log (optionally one client id)."""
        out: dict[str, set[int]] = {}
        for cid, _key, name, version in REQUEST_LOG_RE.findall(self.stderr_text()):
            if client_id is None or cid == client_id:
                out.setdefault(name, set()).add(int(version))
        return out


class RawClient:
    """One connection speaking the wire protocol with ``broker.protocol``."""

    def __init__(self, host: str, port: int, client_id: str = "raw-test", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self.decoder = FrameDecoder()
        self.frames: list = []
        self.correlation_id = 0
        self.pending: dict[int, tuple[int, int]] = {}

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, version: int, body: Any, correlation_id: int | None = None) -> int:
        if correlation_id is None:
            self.correlation_id += 1
            correlation_id = self.correlation_id
        header = RequestHeader(api_key, version, correlation_id, self.client_id)
        self.sock.sendall(b"".join(bytes(b) for b in encode_request(header, body)))
        self.pending[correlation_id] = (api_key, version)
        return correlation_id

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> memoryview:
        while not self.frames:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("connection closed by the broker")
            self.frames.extend(self.decoder.feed(data))
        return self.frames.pop(0)

    def recv(self, api_key: int | None = None, version: int | None = None) -> tuple[int, Any]:
        """(correlation id, body) of the next response (decoded as the oldest pending request)."""
        frame = self.recv_frame()
        cid = int.from_bytes(bytes(frame[:4]), "big", signed=True)
        if api_key is None:
            api_key, version = self.pending.pop(cid)
        else:
            self.pending.pop(cid, None)
        header, body = decode_response(frame, api_key, version)
        return header.correlation_id, body

    def request(self, api_key: int, version: int, body: Any) -> Any:
        cid = self.send(api_key, version, body)
        got, response = self.recv()
        assert got == cid
        return response

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closes the connection within ``timeout`` (EOF or reset)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory) -> BrokerProcess:
    broker = BrokerProcess(tmp_path_factory.mktemp("shared-broker"), name="shared")
    broker.start()
    yield broker
    code = broker.stop()
    assert code == 0, broker.stderr_text()[-3000:]


@pytest.fixture
def broker_factory(tmp_path):
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, name: str = "broker", start: bool = True) -> BrokerProcess:
        b = BrokerProcess(tmp_path / f"{name}-{len(started)}", overrides, name=name)
        started.append(b)
        return b.start() if start else b

    yield make
    for b in started:
        b.kill()


@pytest.fixture
def raw_client(kafka_broker):
    clients: list[RawClient] = []

    def make(client_id: str = "raw-test") -> RawClient:
        c = RawClient(kafka_broker.host, kafka_broker.port, client_id)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()
