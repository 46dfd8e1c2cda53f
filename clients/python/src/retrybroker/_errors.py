"""Exceptions raised by the broker clients.

Every failed RPC becomes a BrokerError (or a subclass chosen by its gRPC
status code) carrying the code and the broker's message. Upstream HTTP
failures are not errors: Execute returns them in its result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import google.rpc.error_details_pb2 as error_details_pb2
import google.rpc.status_pb2 as status_pb2
import grpc
from grpc_status import rpc_status

from ._types import FieldViolation, StreamResult


class BrokerError(Exception):
    """A failed broker RPC.

    Attributes:
        code: the gRPC status code.
        message: the broker's message (what a caller can act on).
        details: the decoded google.rpc status details (protobuf messages).
    """

    def __init__(self, code: grpc.StatusCode, message: str, details: Sequence[Any] = ()) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.details = list(details)

    @property
    def code_name(self) -> str:
        """The status code's name, e.g. ``"UNAUTHENTICATED"``."""
        return str(self.code.name)


class AuthenticationError(BrokerError):
    """UNAUTHENTICATED: a missing or unknown API key."""


class PermissionDeniedError(BrokerError):
    """PERMISSION_DENIED: e.g. a refused destination, or another tenant's policy."""


class InvalidArgumentError(BrokerError):
    """INVALID_ARGUMENT: a malformed request.

    Attributes:
        field_violations: one entry per problem, from the google.rpc.BadRequest
            detail (field paths such as ``"headers[0].name"``).
    """

    def __init__(self, code: grpc.StatusCode, message: str, details: Sequence[Any] = ()) -> None:
        super().__init__(code, message, details)
        self.field_violations = [
            FieldViolation(field=v.field, description=v.description)
            for d in self.details
            if isinstance(d, error_details_pb2.BadRequest)
            for v in d.field_violations
        ]


class FailedPreconditionError(BrokerError):
    """FAILED_PRECONDITION: the request cannot apply in the current state.

    ``retry_task`` raises it for a task that is not FAILED; an unknown
    policy raises its subclass UnknownPolicyError.
    """


class UnknownPolicyError(FailedPreconditionError):
    """FAILED_PRECONDITION: the tenant has no such policy."""


class NotFoundError(BrokerError):
    """NOT_FOUND: a task that does not exist, or belongs to another tenant.

    The broker does not tell the two apart, so task ids cannot be probed.
    """


class RateLimitedError(BrokerError):
    """RESOURCE_EXHAUSTED: pacing could not admit the call, or a limit was reached.

    Attributes:
        retry_delay: seconds to wait before trying again, from the
            google.rpc.RetryInfo detail, or None when the broker sent none.
    """

    def __init__(self, code: grpc.StatusCode, message: str, details: Sequence[Any] = ()) -> None:
        super().__init__(code, message, details)
        self.retry_delay: float | None = None
        for d in self.details:
            if isinstance(d, error_details_pb2.RetryInfo) and d.HasField("retry_delay"):
                self.retry_delay = d.retry_delay.seconds + d.retry_delay.nanos / 1e9
                break


class DeadlineExceededError(BrokerError, TimeoutError):
    """DEADLINE_EXCEEDED: the call's timeout ran out."""


class UnavailableError(BrokerError):
    """UNAVAILABLE: the broker could not be reached, or is shutting down."""


class BodyIncompleteError(Exception):
    """A streamed body that did not complete; the bytes before it are all that arrived.

    Raised by the iteration of a StreamResponse. The httpx transports raise
    ``httpx.RemoteProtocolError`` and the requests adapter
    ``requests.exceptions.ChunkedEncodingError`` instead, with this as their
    ``__cause__``.

    Attributes:
        result: the broker's end of the stream, or None when the stream
            itself failed first (``__cause__`` is then the BrokerError).
        message: why the body did not complete.
    """

    def __init__(self, message: str, result: StreamResult | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.result = result


class NoResponseError(Exception):
    """An ExecuteStream call through an HTTP seam that ended without a final response.

    Raised as the ``__cause__`` of the httpx and requests errors (a failed
    connection, a timeout) when every attempt failed in transport, or a
    closed cooldown gate or open breaker stopped the call.

    Attributes:
        result: the broker's end of the stream (attempts, outcome, retry_after).
    """

    def __init__(self, message: str, result: StreamResult) -> None:
        super().__init__(message)
        self.message = message
        self.result = result


_BY_CODE: dict[grpc.StatusCode, type[BrokerError]] = {
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.FAILED_PRECONDITION: UnknownPolicyError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: RateLimitedError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
}

_DETAIL_TYPES: tuple[type[Any], ...] = (
    error_details_pb2.BadRequest,
    error_details_pb2.RetryInfo,
    error_details_pb2.ErrorInfo,
    error_details_pb2.QuotaFailure,
    error_details_pb2.PreconditionFailure,
    error_details_pb2.ResourceInfo,
    error_details_pb2.Help,
    error_details_pb2.LocalizedMessage,
    error_details_pb2.DebugInfo,
)


def _rich_status(call: Any) -> status_pb2.Status | None:
    """Return the google.rpc.Status in the call's trailers, or None.

    grpcio-status's ``rpc_status.from_call`` works on grpc and grpc.aio
    errors alike. It refuses a detail whose code or message disagrees with
    the call's; such a detail (or a malformed one) is ignored rather than
    hiding the error itself.
    """
    try:
        st = rpc_status.from_call(call)
    except Exception:
        return None
    return st if isinstance(st, status_pb2.Status) else None


def _unpack_details(st: status_pb2.Status | None) -> list[Any]:
    """Return the status details of the known google.rpc types, decoded; others are skipped."""
    out: list[Any] = []
    if st is None:
        return out
    for any_msg in st.details:
        for t in _DETAIL_TYPES:
            if any_msg.Is(t.DESCRIPTOR):
                msg = t()
                any_msg.Unpack(msg)
                out.append(msg)
                break
    return out


def error_from_rpc(
    err: grpc.RpcError, by_code: Mapping[grpc.StatusCode, type[BrokerError]] | None = None
) -> BrokerError:
    """Return the BrokerError (or subclass, by status code) of a grpc or grpc.aio RpcError.

    ``by_code`` chooses the class of some codes where an RPC gives them a
    meaning of its own (RetryTask's FAILED_PRECONDITION is not a policy's).
    """
    call = cast(Any, err)
    code = call.code() if hasattr(call, "code") else grpc.StatusCode.UNKNOWN
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN
    message = call.details() if hasattr(call, "details") else str(err)
    if message is None:
        message = ""
    details = _unpack_details(_rich_status(call)) if hasattr(call, "trailing_metadata") else []
    cls = (by_code or {}).get(code) or _BY_CODE.get(code, BrokerError)
    return cls(code, str(message), details)
