"""gRPC statuses become precise exceptions."""

from __future__ import annotations

import socket
import time
from datetime import datetime

import grpc
import pytest

from retrybroker import (
    BrokerClient,
    BrokerError,
    DeadlineExceededError,
    InvalidArgumentError,
    UnavailableError,
    UnknownPolicyError,
)

from .conftest import free_port


def test_invalid_status_has_field_violation(client: BrokerClient) -> None:
    with pytest.raises(InvalidArgumentError) as ei:
        client.classify(status=42)
    err = ei.value
    assert err.code is grpc.StatusCode.INVALID_ARGUMENT
    assert isinstance(err, BrokerError)
    assert [v.field for v in err.field_violations] == ["status_code"]
    assert "between 100 and 599" in err.field_violations[0].description
    assert "status_code" in err.message


def test_every_problem_is_reported(client: BrokerClient) -> None:
    with pytest.raises(InvalidArgumentError) as ei:
        client.classify(
            status=503,
            headers=[("ok", "1"), ("bad name", "x")],
            provider="no-such-provider",
            method="G E T",
        )
    fields = {v.field for v in ei.value.field_violations}
    assert fields == {"headers[1].name", "provider", "method"}


def test_status_and_transport_error_together_is_invalid(client: BrokerClient) -> None:
    with pytest.raises(InvalidArgumentError) as ei:
        client.classify(status=503, transport_error="timeout")
    assert [v.field for v in ei.value.field_violations] == ["status_code"]


def test_execute_invalid_url_is_invalid_argument(client: BrokerClient) -> None:
    with pytest.raises(InvalidArgumentError) as ei:
        client.execute("GET", "ftp://example.invalid/file", timeout=10)
    assert ei.value.field_violations, ei.value
    assert any("url" in v.field for v in ei.value.field_violations), ei.value.field_violations


def test_unknown_policy(client: BrokerClient) -> None:
    with pytest.raises(UnknownPolicyError) as ei:
        client.classify(status=503, policy="no-such-policy")
    assert ei.value.code is grpc.StatusCode.FAILED_PRECONDITION
    assert "no-such-policy" in ei.value.message


def test_timeout_is_a_grpc_deadline() -> None:
    # A TCP listener that accepts and never speaks HTTP/2: the call can only
    # end by its deadline.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        with BrokerClient(f"127.0.0.1:{port}", timeout=30) as c:
            t0 = time.monotonic()
            with pytest.raises(DeadlineExceededError) as ei:
                c.classify(status=200, timeout=0.5)
            elapsed = time.monotonic() - t0
    assert isinstance(ei.value, TimeoutError)
    assert 0.4 <= elapsed < 5.0


def test_unreachable_broker_is_unavailable() -> None:
    with BrokerClient(f"127.0.0.1:{free_port()}", timeout=5) as c:
        with pytest.raises(UnavailableError):
            c.classify(status=200)


def test_client_side_argument_checks(client: BrokerClient) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        client.classify(status=503, now=datetime(2026, 12, 1, 12, 0, 0))
    with pytest.raises(ValueError, match="unknown transport error"):
        client.classify(transport_error="gremlins")
