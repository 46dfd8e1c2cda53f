"""The classify-driven retry() helper, with a fake sleep and clock: no real waits."""

from __future__ import annotations

import http.client
import socket
import ssl
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone

import pytest

from retrybroker import (
    BrokerClient,
    HttpResult,
    Reason,
    RetryEvent,
    TransportError,
    transport_error_from_exception,
)

from .conftest import Reply, Upstream, free_port

Headers = list[tuple[str, str]]


class FakeTime:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def scripted(*results: object):  # type: ignore[no-untyped-def]
    """Return fn() that yields the results in turn (raising the exceptions)."""
    calls: list[int] = []

    def fn() -> object:
        r = results[min(len(calls), len(results) - 1)]
        calls.append(1)
        if isinstance(r, BaseException):
            raise r
        return r

    fn.calls = calls  # type: ignore[attr-defined]
    return fn


def test_retry_sleeps_exactly_the_hints(client: BrokerClient) -> None:
    ft = FakeTime()
    fn = scripted((503, [("Retry-After", "2")]), (429, [("Retry-After", "1")]), (200, []))
    t0 = time.monotonic()
    result = client.retry(fn, sleep=ft.sleep)
    assert result == (200, [])
    assert ft.sleeps == [2.0, 1.0]
    assert len(fn.calls) == 3
    assert time.monotonic() - t0 < 1.0  # no real waiting


def test_retry_stops_when_attempts_are_exhausted(client: BrokerClient) -> None:
    ft = FakeTime()
    events: list[RetryEvent[object]] = []
    fn = scripted(HttpResult(503, [("Retry-After", "0")]))
    result = client.retry(fn, sleep=ft.sleep, on_retry=events.append)
    assert isinstance(result, HttpResult)
    assert result.status == 503
    assert len(fn.calls) == 4  # max_retries 3: up to 4 sends
    assert ft.sleeps == [0.0, 0.0, 0.0]
    assert [e.attempt for e in events] == [1, 2, 3]
    assert all(e.decision.reason is Reason.SERVER_HINT for e in events)


def test_retry_maps_transport_errors_and_backs_off(client: BrokerClient) -> None:
    ft = FakeTime()
    fn = scripted(ConnectionResetError(), ConnectionRefusedError(), (200, []))
    assert client.retry(fn, sleep=ft.sleep) == (200, [])
    assert len(ft.sleeps) == 2
    assert 0.0 <= ft.sleeps[0] <= 1.0  # full jitter after attempt 1
    assert 0.0 <= ft.sleeps[1] <= 2.0  # ... and after attempt 2


def test_retry_reraises_the_last_transport_error(client: BrokerClient) -> None:
    ft = FakeTime()
    fn = scripted(TimeoutError("read timed out"))
    with pytest.raises(TimeoutError, match="read timed out"):
        client.retry(fn, sleep=ft.sleep)
    assert len(fn.calls) == 4


def test_retry_does_not_retry_a_permanent_transport_error(client: BrokerClient) -> None:
    ft = FakeTime()
    err = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    fn = scripted(err)
    with pytest.raises(socket.gaierror):
        client.retry(fn, sleep=ft.sleep)
    assert len(fn.calls) == 1
    assert ft.sleeps == []


def test_retry_propagates_other_exceptions_at_once(client: BrokerClient) -> None:
    ft = FakeTime()
    fn = scripted(KeyError("bug"))
    with pytest.raises(KeyError):
        client.retry(fn, sleep=ft.sleep)
    assert len(fn.calls) == 1
    assert ft.sleeps == []


def test_retry_unsafe_method_needs_an_idempotency_key(client: BrokerClient) -> None:
    ft = FakeTime()
    fn = scripted((503, []), (200, []))
    assert client.retry(fn, method="POST", sleep=ft.sleep) == (503, [])
    assert len(fn.calls) == 1

    fn = scripted((503, [("Retry-After", "1")]), (200, []))
    got = client.retry(
        fn, method="POST", request_headers={"Idempotency-Key": "abc"}, sleep=ft.sleep
    )
    assert got == (200, [])
    assert ft.sleeps == [1.0]


def test_retry_with_fake_clock_reads_dates_and_honours_the_deadline(client: BrokerClient) -> None:
    start = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc).timestamp()
    ft = FakeTime(start)
    # An HTTP-date hint is read against the fake clock: 30 s from "now".
    fn = scripted((503, [("Retry-After", "Tue, 01 Dec 2026 12:00:30 GMT")]), (200, []))
    assert client.retry(fn, sleep=ft.sleep, clock=ft.clock) == (200, [])
    assert ft.sleeps == [30.0]

    # With 8 s for the whole loop, a second 5 s wait would run past it.
    ft = FakeTime(start)
    fn = scripted((503, [("Retry-After", "5")]))
    assert client.retry(fn, sleep=ft.sleep, clock=ft.clock, deadline=8.0) == (
        503,
        [("Retry-After", "5")],
    )
    assert ft.sleeps == [5.0]
    assert len(fn.calls) == 2


def test_retry_with_urllib_against_a_real_upstream(
    client: BrokerClient, upstream: Upstream
) -> None:
    upstream.script(Reply(503, [("Retry-After", "0")]), Reply(200, [], b"ok"))
    ft = FakeTime()

    def fetch() -> http.client.HTTPResponse:
        resp: http.client.HTTPResponse = urllib.request.urlopen(upstream.url + "/a", timeout=5)
        return resp

    resp = client.retry(fetch, url=upstream.url + "/a", sleep=ft.sleep)
    with resp:
        assert resp.status == 200
        assert resp.read() == b"ok"
    assert ft.sleeps == [0.0]
    assert len(upstream.requests) == 2


def test_retry_urllib_connection_refused(client: BrokerClient) -> None:
    url = f"http://127.0.0.1:{free_port()}/"
    ft = FakeTime()
    with pytest.raises(urllib.error.URLError):
        client.retry(lambda: urllib.request.urlopen(url, timeout=5), sleep=ft.sleep)
    assert len(ft.sleeps) == 3  # 4 attempts, all refused


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (ConnectionRefusedError(), TransportError.CONNECTION_REFUSED),
        (ConnectionResetError(), TransportError.CONNECTION_RESET),
        (BrokenPipeError(), TransportError.CONNECTION_RESET),
        (http.client.RemoteDisconnected("closed"), TransportError.EOF),
        (http.client.IncompleteRead(b""), TransportError.BODY_INCOMPLETE),
        (TimeoutError(), TransportError.TIMEOUT),
        (socket.gaierror(socket.EAI_NONAME, "no such host"), TransportError.DNS_NOT_FOUND),
        (socket.gaierror(socket.EAI_AGAIN, "try again"), TransportError.DNS_TEMPORARY),
        (ssl.SSLCertVerificationError("bad cert"), TransportError.TLS_CERTIFICATE),
        (urllib.error.URLError(ConnectionRefusedError()), TransportError.CONNECTION_REFUSED),
        (OSError("something else"), TransportError.OTHER),
        (ValueError("not transport"), None),
    ],
)
def test_transport_error_from_exception(exc: BaseException, kind: TransportError | None) -> None:
    assert transport_error_from_exception(exc) == kind


def test_transport_error_from_wrapped_exception() -> None:
    class ConnectError(Exception):  # shaped like httpx.ConnectError
        pass

    def connect() -> None:
        try:
            raise ConnectionRefusedError(111, "refused")
        except ConnectionRefusedError as inner:
            raise ConnectError("connect failed") from inner

    with pytest.raises(ConnectError) as ei:
        connect()
    assert transport_error_from_exception(ei.value) is TransportError.CONNECTION_REFUSED

    class ReadTimeout(Exception):  # shaped like requests/httpx timeouts
        pass

    assert transport_error_from_exception(ReadTimeout()) is TransportError.TIMEOUT


def test_retry_closes_the_responses_it_discards(client: BrokerClient) -> None:
    class Resp:  # shaped like a requests/httpx response
        def __init__(self, status: int, headers: dict[str, str]) -> None:
            self.status_code = status
            self.headers = headers
            self.closed = False

        def close(self) -> None:
            self.closed = True

    first, last = Resp(503, {"Retry-After": "0"}), Resp(200, {})
    replies = iter([first, last])
    got = client.retry(lambda: next(replies), sleep=FakeTime().sleep)
    assert got is last
    assert first.closed
    assert not last.closed
