"""Test fixtures: a real broker process and a scripted local HTTP upstream.

The broker binary is $BROKER_BIN, or <repo>/bin/broker, built with
``go build -o <repo>/bin/broker ./cmd/broker`` when missing. Every broker
listens on a free 127.0.0.1 port and is killed at teardown.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# grpcio's fork handlers (on by default since 1.81) restart its poller in a
# forked child; when Popen then closes the inherited descriptors before
# exec, that poller aborts the child (grpc/grpc#43055: "Epoll1Poller
# encountered epoll_wait error: Bad file descriptor", exit -6). Brokers are
# started with a preexec_fn, so Popen forks, with channels of earlier tests
# still active: 3 of 300 spawns aborted in a repro (scripts/fork_repro.py) with fork support on,
# none of 900 with it off. The tests never use gRPC in a forked child, so
# they turn it off before grpc is imported (the Makefile sets it too).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from retrybroker import BrokerClient

REPO = Path(__file__).resolve().parents[3]
VECTORS = REPO / "testdata" / "classify.jsonl"
TWO_TENANTS = REPO / "testdata" / "config" / "two-tenants.yaml"


def broker_bin() -> Path:
    env = os.environ.get("BROKER_BIN")
    if env:
        path = Path(env)
        # A relative path may be relative to here or to the repository root.
        if not path.is_absolute() and not path.exists() and (REPO / path).exists():
            path = REPO / path
        return path
    path = REPO / "bin" / "broker"
    if not path.exists():
        subprocess.run(["go", "build", "-o", str(path), "./cmd/broker"], cwd=REPO, check=True)
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_PR_SET_PDEATHSIG = 1


def _die_with_tests() -> None:
    """Ask the kernel to kill the broker when the test process dies.

    Runs in the child before exec, so that a crash or a kill of pytest
    leaves no broker behind. Teardown still stops every broker by its pid.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class BrokerProcess:
    """One running broker process; ``target`` is its address."""

    def __init__(self, args: Sequence[str]) -> None:
        self.port = free_port()
        self.target = f"127.0.0.1:{self.port}"
        # Open for the life of the process (closed by stop()), not one block.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        cmd = [str(broker_bin()), "--listen", self.target, *args]
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_tests if sys.platform == "linux" else None,
        )
        try:
            self._wait_serving(timeout=20.0)
        except BaseException:
            self.stop()
            raise

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def _wait_serving(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(self.target) as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"broker exited with {self.proc.returncode} before serving:\n{self.log()}"
                    )
                try:
                    resp = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
                    if resp.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.RpcError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"broker not SERVING after {timeout}s:\n{self.log()}")
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()


@pytest.fixture(scope="session")
def broker() -> Iterator[BrokerProcess]:
    """Run a broker with the embedded dev tenant, allowed to call 127.0.0.1."""
    b = BrokerProcess(["--allow-destinations", "127.0.0.1/32"])
    yield b
    b.stop()


@pytest.fixture(scope="session")
def client(broker: BrokerProcess) -> Iterator[BrokerClient]:
    with BrokerClient(broker.target, timeout=10.0) as c:
        yield c


@dataclass
class Reply:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


class Upstream:
    """A local HTTP server that answers a script of replies.

    Each request takes the next reply (the last one repeats) and records its
    arrival time (time.monotonic) and headers.
    """

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.arrivals: list[float] = []
        self.requests: list[tuple[str, str, list[tuple[str, str]], bytes]] = []
        self._lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                now = time.monotonic()
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with upstream._lock:
                    upstream.arrivals.append(now)
                    upstream.requests.append(
                        (self.command, self.path, list(self.headers.items()), body)
                    )
                    i = len(upstream.arrivals) - 1
                    reply = upstream.replies[min(i, len(upstream.replies) - 1)]
                self.send_response(reply.status)
                for name, value in reply.headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self.replies = list(replies)
            self.arrivals.clear()
            self.requests.clear()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    u = Upstream()
    yield u
    u.close()
