"""gRPC statuses become precise exceptions."""

from __future__ import annotations

import socket
import time
from datetime import datetime
from typing import Any

import google.rpc.error_details_pb2 as error_details_pb2
import google.rpc.status_pb2 as status_pb2
import grpc
import pytest
from google.protobuf.message import Message

from retrybroker import (
    AuthenticationError,
    BrokerClient,
    BrokerError,
    DeadlineExceededError,
    InvalidArgumentError,
    PermissionDeniedError,
    RateLimitedError,
    UnavailableError,
    UnknownPolicyError,
)
from retrybroker._errors import error_from_rpc

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
    with (
        BrokerClient(f"127.0.0.1:{free_port()}", timeout=5) as c,
        pytest.raises(UnavailableError),
    ):
        c.classify(status=200)


def test_client_side_argument_checks(client: BrokerClient) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        client.classify(status=503, now=datetime(2026, 12, 1, 12, 0, 0))
    with pytest.raises(ValueError, match="unknown transport error"):
        client.classify(transport_error="gremlins")


class _FakeRpcError(grpc.RpcError):
    """A failed call as grpc raises it, with rich status details in the trailers."""

    def __init__(self, code: grpc.StatusCode, message: str, *details: Message) -> None:
        st = status_pb2.Status(code=code.value[0], message=message)
        for d in details:
            st.details.add().Pack(d)
        self._code, self._message = code, message
        self._trailers = (("grpc-status-details-bin", st.SerializeToString()),)

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._message

    def trailing_metadata(self) -> Any:  # grpc-stubs types this oddly
        return self._trailers


def test_resource_exhausted_carries_the_retry_delay() -> None:
    info = error_details_pb2.RetryInfo()
    info.retry_delay.FromMilliseconds(2500)
    err = error_from_rpc(_FakeRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "pacing", info))
    assert isinstance(err, RateLimitedError)
    assert err.retry_delay == 2.5
    assert err.message == "pacing"


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (grpc.StatusCode.UNAUTHENTICATED, AuthenticationError),
        (grpc.StatusCode.PERMISSION_DENIED, PermissionDeniedError),
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidArgumentError),
        (grpc.StatusCode.FAILED_PRECONDITION, UnknownPolicyError),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, RateLimitedError),
        (grpc.StatusCode.DEADLINE_EXCEEDED, DeadlineExceededError),
        (grpc.StatusCode.UNAVAILABLE, UnavailableError),
        (grpc.StatusCode.INTERNAL, BrokerError),
    ],
)
def test_status_codes_map_to_exceptions(code: grpc.StatusCode, cls: type[BrokerError]) -> None:
    err = error_from_rpc(_FakeRpcError(code, "m"))
    assert type(err) is cls
    assert err.code is code
    assert err.code_name == code.name
