"""ExecuteStream through a real broker: execute_stream (sync and async), httpx and requests.

The upstream is a local HTTP server whose paths stream in different ways:

- ``/sse``: a server-sent event every 300 ms (4 in all), each send time recorded;
- ``/reset``: Content-Length 10000, 2000 bytes, then a TCP reset;
- ``/ticks``: a line every 20 ms until the connection is closed, which it records;
- ``/idle``: one line, then nothing for 5 s (or until the connection closes, which it records);
- ``/blob``: 3 MiB of bytes with a Content-Length.

"Each event arrives before the next is sent" is checked against the
upstream's own send times (time.monotonic), never with sleeps.
"""

from __future__ import annotations

import fcntl
import socket
import struct
import termios
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
import pytest_asyncio
import requests

from retrybroker import (
    AsyncBrokerClient,
    BodyEnd,
    BodyIncompleteError,
    BrokerClient,
    ExecuteOverrides,
    NoResponseError,
    Outcome,
    PermissionDeniedError,
)
from retrybroker.httpx_transport import AsyncBrokerTransport, BrokerTransport
from retrybroker.requests_adapter import BrokerAdapter

from .conftest import REPO, BrokerProcess, free_port

STREAM_LIMITS = REPO / "testdata" / "config" / "stream-limits.yaml"
STREAM_KEY = "stream-test-key"  # a test key: see the file

EVENTS = 4
ONCE = ExecuteOverrides(max_retries=0)  # no backoff waits where a call must fail
BLOB = bytes(range(256)) * (3 * 4096)  # 3 MiB


def wait_acked(conn: socket.socket, limit: float = 5.0) -> None:
    """Wait, at most limit seconds, until the peer acknowledged every byte written to conn.

    Linux's SIOCOUTQ (the send queue) is then 0, so a reset sent next cannot
    discard bytes the test expects the peer to have.
    """
    end = time.monotonic() + limit
    buf = bytearray(4)
    while time.monotonic() < end:
        fcntl.ioctl(conn.fileno(), termios.TIOCOUTQ, buf)
        if struct.unpack("i", buf)[0] == 0:
            return
        time.sleep(0.001)
    raise AssertionError("the broker did not acknowledge the /reset body within 5 s")


class StreamUpstream:
    """The streaming upstream described in the module docstring."""

    def __init__(self) -> None:
        self.sent: list[float] = []
        self.closed = threading.Event()
        up = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Every write leaves at once. With Nagle's algorithm on (the
            # default here), a /reset on a pooled connection that already
            # served requests met delayed ACKs: its 2000 bytes waited in
            # the send queue, and the linger-0 close threw them away, so
            # the broker saw the head and then the reset, never the bytes.
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                if self.path.startswith("/sse"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.end_headers()
                    for i in range(EVENTS):
                        if i:
                            time.sleep(0.3)
                        up.sent.append(time.monotonic())
                        self.wfile.write(f'data: {{"n": {i}}}\n\n'.encode())
                        self.wfile.flush()
                    self.close_connection = True
                elif self.path.startswith("/reset"):
                    self.send_response(200)
                    self.send_header("Content-Length", "10000")
                    self.end_headers()
                    self.wfile.write(b"r" * 2000)
                    self.wfile.flush()
                    wait_acked(self.connection)
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.connection.close()
                    self.close_connection = True
                elif self.path.startswith("/idle"):
                    self.send_response(200)
                    self.end_headers()
                    self.wfile.write(b"first\n")
                    self.wfile.flush()
                    # Nothing more; a read sees the broker close the connection.
                    self.connection.settimeout(5)
                    try:
                        if self.connection.recv(1) == b"":
                            up.closed.set()
                    except OSError:
                        up.closed.set()
                    self.close_connection = True
                elif self.path.startswith("/ticks"):
                    self.send_response(200)
                    self.end_headers()
                    try:
                        while True:
                            self.wfile.write(b"tick\n")
                            self.wfile.flush()
                            time.sleep(0.02)
                    except OSError:
                        up.closed.set()
                    self.close_connection = True
                else:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(BLOB)))
                    self.end_headers()
                    self.wfile.write(BLOB)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def up() -> Iterator[StreamUpstream]:
    u = StreamUpstream()
    yield u
    u.close()


@pytest.fixture
def sclient(broker: BrokerProcess) -> Iterator[BrokerClient]:
    with BrokerClient(broker.target, timeout=20) as c:
        yield c


@pytest_asyncio.fixture
async def aclient(broker: BrokerProcess) -> AsyncIterator[AsyncBrokerClient]:
    async with AsyncBrokerClient(broker.target, timeout=20) as c:
        yield c


class EventClock:
    """Records when each server-sent event was complete on the caller's side."""

    def __init__(self) -> None:
        self.buf = b""
        self.events: list[bytes] = []
        self.at: list[float] = []

    def feed(self, chunk: bytes) -> None:
        self.buf += chunk
        while b"\n\n" in self.buf:
            ev, self.buf = self.buf.split(b"\n\n", 1)
            self.events.append(ev)
            self.at.append(time.monotonic())

    def check(self, up: StreamUpstream) -> None:
        assert self.events == [f'data: {{"n": {i}}}'.encode() for i in range(EVENTS)]
        assert len(up.sent) == EVENTS
        for i in range(EVENTS - 1):
            assert self.at[i] < up.sent[i + 1], (
                f"event {i} arrived {self.at[i] - up.sent[i + 1]:.3f}s after event {i + 1} was sent"
            )


def test_execute_stream_delivers_each_event_before_the_next(
    sclient: BrokerClient, up: StreamUpstream
) -> None:
    clock = EventClock()
    with sclient.execute_stream("GET", up.url + "/sse") as r:
        assert r.status == 200
        assert r.header("content-type") == "text/event-stream"
        assert len(r.attempts) == 1
        assert r.result is None
        for chunk in r:
            clock.feed(chunk)
    clock.check(up)
    assert r.result is not None
    assert r.result.body_complete
    assert r.result.body_end is BodyEnd.COMPLETE
    assert r.result.outcome is Outcome.SUCCESS
    assert r.result.body_bytes == sum(len(e) + 2 for e in clock.events)


def test_execute_stream_large_body(sclient: BrokerClient, up: StreamUpstream) -> None:
    with sclient.execute_stream("GET", up.url + "/blob") as r:
        assert r.header("content-length") == str(len(BLOB))
        assert r.read() == BLOB
    assert r.result is not None
    assert r.result.body_bytes == len(BLOB)


def test_execute_stream_reset_raises_body_incomplete(
    sclient: BrokerClient, up: StreamUpstream
) -> None:
    got: list[bytes] = []
    with (
        sclient.execute_stream("GET", up.url + "/reset?sig=sekrit") as r,
        pytest.raises(BodyIncompleteError) as ei,
    ):
        got.extend(r)
    assert b"".join(got) == b"r" * 2000
    res = ei.value.result
    assert res is not None
    assert res is r.result
    assert not res.body_complete
    assert res.body_end is BodyEnd.UPSTREAM_ERROR
    assert res.outcome is not Outcome.SUCCESS
    assert res.error_message
    assert "sekrit" not in res.error_message
    assert len(res.attempts) == 1


def test_execute_stream_close_cancels_upstream(sclient: BrokerClient, up: StreamUpstream) -> None:
    r = sclient.execute_stream("GET", up.url + "/ticks")
    it = iter(r)
    assert next(it).startswith(b"tick")
    r.close()
    assert up.closed.wait(5), "the upstream connection was not closed"


def test_execute_stream_without_response(sclient: BrokerClient) -> None:
    url = f"http://127.0.0.1:{free_port()}/"
    r = sclient.execute_stream("GET", url, timeout=10, overrides=ONCE)
    assert r.status is None
    assert r.result is not None
    assert r.result.body_end is BodyEnd.NO_RESPONSE
    assert r.result.attempts[-1].transport_error == "connection_refused"
    assert r.read() == b""


def test_execute_stream_refused_destination(sclient: BrokerClient, up: StreamUpstream) -> None:
    port = up.server.server_address[1]
    with pytest.raises(PermissionDeniedError):
        sclient.execute_stream("GET", f"http://127.0.0.2:{port}/sse")


@pytest.mark.asyncio
async def test_async_execute_stream(aclient: AsyncBrokerClient, up: StreamUpstream) -> None:
    clock = EventClock()
    async with await aclient.execute_stream("GET", up.url + "/sse") as r:
        assert r.status == 200
        async for chunk in r:
            clock.feed(chunk)
    clock.check(up)
    assert r.result is not None
    assert r.result.body_complete

    got: list[bytes] = []

    async def consume() -> None:
        async for chunk in r2:
            got.append(chunk)

    r2 = await aclient.execute_stream("GET", up.url + "/reset")
    with pytest.raises(BodyIncompleteError) as ei:
        await consume()
    assert b"".join(got) == b"r" * 2000
    assert ei.value.result is not None
    assert ei.value.result.body_end is BodyEnd.UPSTREAM_ERROR

    r3 = await aclient.execute_stream("GET", up.url + "/ticks")
    async for chunk in r3:
        assert chunk.startswith(b"tick")
        break
    await r3.aclose()
    assert up.closed.wait(5), "the upstream connection was not closed"


# httpx, sync


def test_httpx_transport_streams_sse(sclient: BrokerClient, up: StreamUpstream) -> None:
    clock = EventClock()
    with (
        httpx.Client(transport=BrokerTransport(sclient)) as hc,
        hc.stream("GET", up.url + "/sse", headers={"Accept": "text/event-stream"}) as r,
    ):
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/event-stream"
        for chunk in r.iter_raw():
            clock.feed(chunk)
    clock.check(up)
    stream = r.extensions["retrybroker"]
    assert stream.result.body_complete


def test_httpx_transport_reads_bodies_and_raises_remote_protocol_error(
    sclient: BrokerClient, up: StreamUpstream
) -> None:
    with httpx.Client(transport=BrokerTransport(sclient)) as hc:
        r = hc.get(up.url + "/blob")
        assert r.status_code == 200
        assert r.content == BLOB
        with pytest.raises(httpx.RemoteProtocolError) as ei:
            hc.get(up.url + "/reset")
        assert isinstance(ei.value.__cause__, BodyIncompleteError)
    with (
        httpx.Client(transport=BrokerTransport(sclient, overrides=ONCE)) as hc,
        pytest.raises(httpx.ConnectError) as ce,
    ):
        hc.get(f"http://127.0.0.1:{free_port()}/")
    assert isinstance(ce.value.__cause__, NoResponseError)


def test_httpx_transport_close_cancels_upstream(sclient: BrokerClient, up: StreamUpstream) -> None:
    with (
        httpx.Client(transport=BrokerTransport(sclient)) as hc,
        hc.stream("GET", up.url + "/ticks") as r,
    ):
        for chunk in r.iter_raw():
            assert chunk.startswith(b"tick")
            break
    assert up.closed.wait(5), "the upstream connection was not closed"


# httpx, async


@pytest.mark.asyncio
async def test_async_httpx_transport(aclient: AsyncBrokerClient, up: StreamUpstream) -> None:
    clock = EventClock()
    async with httpx.AsyncClient(transport=AsyncBrokerTransport(aclient)) as hc:
        async with hc.stream("GET", up.url + "/sse") as r:
            assert r.status_code == 200
            async for chunk in r.aiter_raw():
                clock.feed(chunk)
        clock.check(up)
        r2 = await hc.get(up.url + "/blob")
        assert r2.content == BLOB
        with pytest.raises(httpx.RemoteProtocolError):
            await hc.get(up.url + "/reset")
        async with hc.stream("GET", up.url + "/ticks") as r3:
            async for chunk in r3.aiter_raw():
                assert chunk.startswith(b"tick")
                break
    assert up.closed.wait(5), "the upstream connection was not closed"


# requests


def test_requests_adapter_streams_sse(sclient: BrokerClient, up: StreamUpstream) -> None:
    clock = EventClock()
    with requests.Session() as s:
        s.mount("http://", BrokerAdapter(sclient))
        with s.get(up.url + "/sse", stream=True) as r:
            assert r.status_code == 200
            assert r.headers["Content-Type"] == "text/event-stream"
            for chunk in r.iter_content(chunk_size=None):
                clock.feed(chunk)
    clock.check(up)
    assert getattr(r.raw, "broker").result.body_complete  # noqa: B009


def test_requests_adapter_bodies_and_errors(sclient: BrokerClient, up: StreamUpstream) -> None:
    with requests.Session() as s:
        s.mount("http://", BrokerAdapter(sclient))
        r = s.get(up.url + "/blob")
        assert r.status_code == 200
        assert r.content == BLOB
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            s.get(up.url + "/reset")
        with (
            s.get(up.url + "/reset", stream=True) as r2,
            pytest.raises(requests.exceptions.ChunkedEncodingError),
        ):
            b"".join(r2.iter_content(chunk_size=None))
    with requests.Session() as s:
        s.mount("http://", BrokerAdapter(sclient, overrides=ONCE))
        with pytest.raises(requests.exceptions.ConnectionError) as ce:
            s.get(f"http://127.0.0.1:{free_port()}/")
    assert isinstance(ce.value.__cause__, NoResponseError)


def test_requests_adapter_close_cancels_upstream(sclient: BrokerClient, up: StreamUpstream) -> None:
    with requests.Session() as s:
        s.mount("http://", BrokerAdapter(sclient))
        with s.get(up.url + "/ticks", stream=True) as r:
            for line in r.iter_lines():
                assert line == b"tick"
                break
    assert up.closed.wait(5), "the upstream connection was not closed"


@pytest.fixture(scope="module")
def limits_broker() -> Iterator[BrokerProcess]:
    """Start a broker whose policy ends a body idle for 300 ms (stream-limits.yaml)."""
    b = BrokerProcess(["--config", str(STREAM_LIMITS)])
    yield b
    b.stop()


def test_execute_stream_idle_timeout(limits_broker: BrokerProcess, up: StreamUpstream) -> None:
    with BrokerClient(limits_broker.target, api_key=STREAM_KEY, timeout=20) as c:
        got: list[bytes] = []
        with (
            c.execute_stream("GET", up.url + "/idle") as r,
            pytest.raises(BodyIncompleteError) as ei,
        ):
            got.extend(r)
    assert b"".join(got) == b"first\n"
    res = ei.value.result
    assert res is not None
    assert res.body_end is BodyEnd.IDLE_TIMEOUT
    assert not res.body_complete
    assert res.outcome is not Outcome.SUCCESS
    assert up.closed.wait(5), "the upstream connection was not closed"


def test_httpx_transport_idle_timeout(limits_broker: BrokerProcess, up: StreamUpstream) -> None:
    with (
        BrokerClient(limits_broker.target, api_key=STREAM_KEY, timeout=20) as c,
        httpx.Client(transport=BrokerTransport(c)) as hc,
        pytest.raises(httpx.RemoteProtocolError),
    ):
        hc.get(up.url + "/idle")
    assert up.closed.wait(5), "the upstream connection was not closed"


def test_requests_adapter_idle_timeout(limits_broker: BrokerProcess, up: StreamUpstream) -> None:
    with (
        BrokerClient(limits_broker.target, api_key=STREAM_KEY, timeout=20) as c,
        requests.Session() as s,
    ):
        s.mount("http://", BrokerAdapter(c))
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            s.get(up.url + "/idle")
    assert up.closed.wait(5), "the upstream connection was not closed"
