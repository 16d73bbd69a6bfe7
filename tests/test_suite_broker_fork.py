"""The suite's broker fork server (``tests/support/broker_fork.py``): a forked broker behaves
as ``python -m broker`` with the same arguments, environment, directory and streams, holds
none of the server's descriptors, and reports its exit code as ``Popen`` does."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support import broker_fork
from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.skipif(not broker_fork.enabled(), reason="the suite runs python -m broker here")


def _spawn(tmp_path: Path, argv: list[str]) -> tuple[broker_fork.ForkedProcess, Path, Path]:
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = broker_fork.spawn(argv, dict(os.environ), tmp_path, o, e)
    assert proc is not None
    return proc, out, err


def _wait_ready(out: Path, proc: broker_fork.ForkedProcess) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = out.read_text()
        if "started (kafkalog)" in text:
            return text
        assert proc.poll() is None, f"the broker exited with {proc.returncode}"
        time.sleep(0.05)
    raise AssertionError("no ready line")


def test_forked_broker_runs_main_with_its_arguments_directory_and_streams(tmp_path: Path) -> None:
    """(The environment reaches the broker too: ``test_server_transactions_recovery.py``
    crashes brokers at a point named by ``KAFKALOG_TXN_CRASH_POINT``.)"""
    proc, out, err = _spawn(tmp_path, ["--override", "listeners=PLAINTEXT://127.0.0.1:0",
                                       "--override", f"log.dirs={tmp_path / 'logs'}"])
    try:
        ready = _wait_ready(out, proc)
        assert f"log.dirs={tmp_path / 'logs'}" in ready
        assert os.readlink(f"/proc/{proc.pid}/cwd") == str(tmp_path)
        assert os.readlink(f"/proc/{proc.pid}/fd/0") == os.devnull
        assert b"tests.support.broker_fork" in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert (tmp_path / "logs" / "meta.properties").is_file()
    finally:
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert "shut down completed" in err.read_text()
    assert proc.poll() == 0
    proc.kill()  # after the exit: nothing happens, as with Popen


def test_forked_broker_reports_exit_codes_as_popen_does(tmp_path: Path) -> None:
    proc, _, err = _spawn(tmp_path, ["--override", "num.partitions=zero"])
    assert proc.wait(30) == 1
    lines = err.read_text().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: Invalid value 'zero' for configuration num.partitions"), lines
    killed, out, _ = _spawn(tmp_path, ["--override", "listeners=PLAINTEXT://127.0.0.1:0",
                                       "--override", f"log.dirs={tmp_path / 'k'}"])
    _wait_ready(out, killed)
    with pytest.raises(subprocess.TimeoutExpired):
        killed.wait(0.1)
    killed.kill()
    assert killed.wait(30) == -signal.SIGKILL


def test_forked_broker_holds_the_same_kinds_of_descriptor_as_a_new_process(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """None of the fork server's descriptors (its listening socket, other brokers'
    connections and pidfds) is left open in a broker."""

    def kinds(b: BrokerProcess) -> Counter[str]:
        fd_dir = Path(f"/proc/{b.pid}/fd")
        links = [os.readlink(fd_dir / fd) for fd in os.listdir(fd_dir)]
        return Counter(link.split(":")[0] if ":" in link else ("file" if link.startswith("/") else link)
                       for link in links)

    other = BrokerProcess(tmp_path / "other").start()  # one more child of the server, running
    try:
        forked = BrokerProcess(tmp_path / "forked").start()
        monkeypatch.setenv(broker_fork.ENV_SWITCH, "0")
        started = BrokerProcess(tmp_path / "started").start()
        try:
            assert isinstance(forked.proc, broker_fork.ForkedProcess)
            assert isinstance(started.proc, subprocess.Popen)
            assert kinds(forked) == kinds(started)
        finally:
            forked.stop()
            started.stop()
    finally:
        other.stop()


def test_switch_off_runs_python_m_broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(broker_fork.ENV_SWITCH, "0")
    with open(tmp_path / "o", "wb") as o:
        assert broker_fork.spawn(["--help"], dict(os.environ), tmp_path, o, o) is None
    b = BrokerProcess(tmp_path / "b").start()
    try:
        assert isinstance(b.proc, subprocess.Popen)
        assert Path(f"/proc/{b.pid}/cmdline").read_bytes().split(b"\0")[1:3] == [b"-m", b"broker"]
    finally:
        assert b.stop() == 0


def test_a_broker_is_waited_for_while_the_test_process_holds_over_1024_descriptors(tmp_path: Path) -> None:
    """The resource tests open thousands of connections in the test process; a handle then
    gets a descriptor past ``select``'s 1,024, and waiting on it must still work (poll)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1300:
        if hard < 1300:
            pytest.skip("the descriptor limit is below 1,300 here")
        resource.setrlimit(resource.RLIMIT_NOFILE, (1300, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        proc, _, _ = _spawn(tmp_path, ["--no-such-option"])
        assert proc._conn is not None and proc._conn.fileno() > 1024
        assert proc.wait(30) == 2  # argparse's usage error, as with python -m broker
        assert proc.poll() == 2
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
