"""retrybroker: Python client of the retry broker.

Quick start against a local broker (``make run`` listens on 127.0.0.1:50051)::

    from retrybroker import BrokerClient

    with BrokerClient("127.0.0.1:50051") as broker:
        d = broker.classify(status=429, headers=[("Retry-After", "5")])
        print(d.action, d.delay, d.hint_source)   # retry 5.0 retry-after

Durations are float seconds throughout. ``execute_stream`` streams a
response as the upstream sends it; ``retrybroker.httpx_transport`` and
``retrybroker.requests_adapter`` route httpx and requests code through it.
See README.md for more.
"""

from ._aio import AsyncBrokerClient
from ._client import BrokerClient
from ._core import BASE_CHANNEL_OPTIONS, __version__
from ._errors import (
    AuthenticationError,
    BodyIncompleteError,
    BrokerError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    NoResponseError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    UnavailableError,
    UnknownPolicyError,
)
from ._retry import RetryEvent, http_result_of, transport_error_from_exception
from ._stream import AsyncStreamResponse, StreamResponse
from ._types import (
    Action,
    Attempt,
    BodyEnd,
    Decision,
    ExecuteOverrides,
    ExecuteResult,
    FieldViolation,
    HttpResult,
    Outcome,
    Reason,
    StreamResult,
    Task,
    TaskPage,
    TaskResponse,
    TaskState,
    TransportError,
)

__all__ = [
    "BASE_CHANNEL_OPTIONS",
    "Action",
    "AsyncBrokerClient",
    "AsyncStreamResponse",
    "Attempt",
    "AuthenticationError",
    "BodyEnd",
    "BodyIncompleteError",
    "BrokerClient",
    "BrokerError",
    "DeadlineExceededError",
    "Decision",
    "ExecuteOverrides",
    "ExecuteResult",
    "FailedPreconditionError",
    "FieldViolation",
    "HttpResult",
    "InvalidArgumentError",
    "NoResponseError",
    "NotFoundError",
    "Outcome",
    "PermissionDeniedError",
    "RateLimitedError",
    "Reason",
    "RetryEvent",
    "StreamResponse",
    "StreamResult",
    "Task",
    "TaskPage",
    "TaskResponse",
    "TaskState",
    "TransportError",
    "UnavailableError",
    "UnknownPolicyError",
    "__version__",
    "http_result_of",
    "transport_error_from_exception",
]
