"""Execute through a real broker to a local HTTP upstream."""

from __future__ import annotations

import time

import pytest

from retrybroker import (
    Action,
    BrokerClient,
    ExecuteOverrides,
    Outcome,
    PermissionDeniedError,
    Reason,
)

from .conftest import Reply, Upstream


def test_execute_waits_for_retry_after_then_succeeds(
    client: BrokerClient, upstream: Upstream
) -> None:
    upstream.script(
        Reply(503, [("Retry-After", "1")], b"busy"),
        Reply(200, [("Content-Type", "text/plain"), ("X-Dup", "a"), ("X-Dup", "b")], b"hello"),
    )
    r = client.execute("GET", upstream.url + "/thing?x=1", headers=[("X-Test", "yes")], timeout=20)

    assert r.status == 200
    assert r.body == b"hello"
    assert r.text() == "hello"
    assert not r.body_truncated
    assert r.outcome is Outcome.SUCCESS
    assert str(r.outcome) == "OUTCOME_SUCCESS"
    assert r.retry_after is None
    assert r.header("content-type") == "text/plain"
    assert r.header_values("x-dup") == ["a", "b"]

    assert [a.number for a in r.attempts] == [1, 2]
    first, second = r.attempts
    assert first.status == 503
    assert first.transport_error is None
    assert first.decision is not None
    assert first.decision.action is Action.RETRY
    assert first.decision.reason is Reason.SERVER_HINT
    assert first.decision.hint_source == "retry-after"
    assert first.decision.delay == pytest.approx(1.0, abs=1e-3)
    assert second.status == 200
    assert first.start_time is not None
    assert second.start_time is not None
    assert (second.start_time - first.start_time).total_seconds() >= 1.0

    # The upstream saw two requests, the second no sooner than the hint.
    assert len(upstream.arrivals) == 2
    assert upstream.arrivals[1] - upstream.arrivals[0] >= 1.0
    for method, path, headers, _ in upstream.requests:
        assert method == "GET"
        assert path == "/thing?x=1"
        assert ("X-Test", "yes") in headers


def test_execute_gives_up_when_the_hint_outlasts_the_deadline(
    client: BrokerClient, upstream: Upstream
) -> None:
    upstream.script(Reply(503, [("Retry-After", "5")], b"later"))
    t0 = time.monotonic()
    r = client.execute("GET", upstream.url + "/slow", timeout=1.5)
    elapsed = time.monotonic() - t0

    assert elapsed < 1.5, f"took {elapsed:.2f}s; the broker should return at once"
    assert r.outcome is Outcome.DEADLINE_TOO_SHORT
    assert r.retry_after == pytest.approx(5.0, abs=0.01)
    assert r.status == 503
    assert r.body == b"later"
    assert len(r.attempts) == 1
    assert len(upstream.arrivals) == 1


def test_execute_sends_method_body_and_idempotency_key_on_every_attempt(
    client: BrokerClient, upstream: Upstream
) -> None:
    upstream.script(Reply(503, [("Retry-After", "0")]), Reply(201, [], b"created"))
    r = client.execute(
        "POST",
        upstream.url + "/orders",
        headers={"Idempotency-Key": "k-123", "Content-Type": "application/json"},
        body='{"qty": 1}',
        timeout=20,
    )
    assert r.status == 201
    assert len(r.attempts) == 2
    assert len(upstream.requests) == 2
    for method, _, headers, body in upstream.requests:
        assert method == "POST"
        assert body == b'{"qty": 1}'
        assert [v for n, v in headers if n.lower() == "idempotency-key"] == ["k-123"]


def test_execute_post_without_key_is_not_retried(client: BrokerClient, upstream: Upstream) -> None:
    upstream.script(Reply(503, [("Retry-After", "0")]))
    r = client.execute("POST", upstream.url + "/x", body=b"data", timeout=20)
    assert r.status == 503
    assert r.outcome is Outcome.NOT_RETRYABLE
    assert len(upstream.requests) == 1
    assert r.attempts[0].decision is not None
    assert r.attempts[0].decision.reason is Reason.UNSAFE_METHOD


def test_execute_overrides_limit_retries(client: BrokerClient, upstream: Upstream) -> None:
    upstream.script(Reply(503, [("Retry-After", "0")]))
    r = client.execute(
        "GET", upstream.url + "/x", timeout=20, overrides=ExecuteOverrides(max_retries=1)
    )
    assert r.status == 503
    assert r.outcome is Outcome.ATTEMPTS_EXHAUSTED
    assert len(r.attempts) == 2
    assert len(upstream.requests) == 2


def test_execute_refused_destination_is_permission_denied(
    client: BrokerClient, upstream: Upstream
) -> None:
    # The dev broker may call 127.0.0.1 only; 127.0.0.2 is refused by the
    # destination guard on the dialled address (loopback, so nothing leaves).
    port = upstream.server.server_address[1]
    with pytest.raises(PermissionDeniedError) as ei:
        client.execute("GET", f"http://127.0.0.2:{port}/", timeout=10)
    assert ei.value.code_name == "PERMISSION_DENIED"
    assert upstream.requests == []
