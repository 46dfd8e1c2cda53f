"""The core that BrokerClient (grpcio) and AsyncBrokerClient (grpc.aio) share.

Everything here is free of I/O: which RPC to call and how to (de)serialize
it, the channel options, the per-client call settings (key, default policy,
timeout), the requests, and the state of the classify-driven retry loop with
its deadline on ``time.monotonic``. The two clients are thin shells: they own
a channel, make the call (blocking or awaited), sleep, and close responses.
This is the shape of google-api-core's ``retry_base.py``: one policy, two
small loops. A streaming call reuses the same pieces: ``execute_request``
builds its request, and ``StreamState`` reads its messages (head, chunks,
end) for the blocking and the asyncio StreamResponse alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import grpc

from . import _convert
from ._errors import BodyIncompleteError, BrokerError
from ._gen.retrybroker.v1 import broker_pb2 as pb
from ._retry import RetryEvent, response_of_exception
from ._types import (
    Action,
    Attempt,
    Decision,
    ExecuteOverrides,
    HeadersInput,
    HttpResult,
    StreamResult,
    TransportError,
    header_pairs,
)

__version__ = "0.1.0"

T = TypeVar("T")
Req = TypeVar("Req")
Resp = TypeVar("Resp")

#: Channel options every client sets.
#:
#: The client never retries Execute itself. Retrying is the broker's job, and
#: a second retry layer multiplies sends: 3 retries in each of two layers is
#: (1+3) x (1+3) = 16 sends to the upstream. So no retry policy is configured,
#: and service configs from DNS (which could carry one) are ignored. gRPC's
#: transparent retries stay on: they only resend an RPC that never reached
#: the broker's application code, so they cannot cause an extra upstream send.
BASE_CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.service_config_disable_resolution", 1),
    ("grpc.primary_user_agent", f"retrybroker-python/{__version__}"),
)

#: TLS as a caller may choose it: plaintext (False), system roots (True), or
#: ready channel credentials (e.g. mTLS).
TLSOption = bool | grpc.ChannelCredentials


@dataclass(frozen=True)
class Rpc(Generic[Req, Resp]):
    """One method of retrybroker.v1.BrokerService: its path and its codecs."""

    path: str
    serialize: Callable[[Req], bytes]
    deserialize: Callable[[bytes], Resp]


EXECUTE: Rpc[pb.ExecuteRequest, pb.ExecuteResponse] = Rpc(
    "/retrybroker.v1.BrokerService/Execute",
    pb.ExecuteRequest.SerializeToString,
    pb.ExecuteResponse.FromString,
)
EXECUTE_STREAM: Rpc[pb.ExecuteRequest, pb.ExecuteStreamResponse] = Rpc(
    "/retrybroker.v1.BrokerService/ExecuteStream",
    pb.ExecuteRequest.SerializeToString,
    pb.ExecuteStreamResponse.FromString,
)
CLASSIFY: Rpc[pb.ClassifyResponseRequest, pb.ClassifyResponseResponse] = Rpc(
    "/retrybroker.v1.BrokerService/ClassifyResponse",
    pb.ClassifyResponseRequest.SerializeToString,
    pb.ClassifyResponseResponse.FromString,
)

CREATE_TASK: Rpc[pb.CreateTaskRequest, pb.Task] = Rpc(
    "/retrybroker.v1.BrokerService/CreateTask",
    pb.CreateTaskRequest.SerializeToString,
    pb.Task.FromString,
)
GET_TASK: Rpc[pb.GetTaskRequest, pb.Task] = Rpc(
    "/retrybroker.v1.BrokerService/GetTask",
    pb.GetTaskRequest.SerializeToString,
    pb.Task.FromString,
)
LIST_TASKS: Rpc[pb.ListTasksRequest, pb.ListTasksResponse] = Rpc(
    "/retrybroker.v1.BrokerService/ListTasks",
    pb.ListTasksRequest.SerializeToString,
    pb.ListTasksResponse.FromString,
)
CANCEL_TASK: Rpc[pb.CancelTaskRequest, pb.Task] = Rpc(
    "/retrybroker.v1.BrokerService/CancelTask",
    pb.CancelTaskRequest.SerializeToString,
    pb.Task.FromString,
)
WATCH_TASK: Rpc[pb.WatchTaskRequest, pb.Task] = Rpc(
    "/retrybroker.v1.BrokerService/WatchTask",
    pb.WatchTaskRequest.SerializeToString,
    pb.Task.FromString,
)
RETRY_TASK: Rpc[pb.RetryTaskRequest, pb.Task] = Rpc(
    "/retrybroker.v1.BrokerService/RetryTask",
    pb.RetryTaskRequest.SerializeToString,
    pb.Task.FromString,
)


def channel_options(extra: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Return BASE_CHANNEL_OPTIONS followed by the caller's options."""
    return [*BASE_CHANNEL_OPTIONS, *extra]


def channel_credentials(tls: TLSOption) -> grpc.ChannelCredentials | None:
    """Return the credentials for ``tls``, or None for a plaintext channel."""
    if isinstance(tls, grpc.ChannelCredentials):
        return tls
    if tls:
        return grpc.ssl_channel_credentials()
    return None


@dataclass(frozen=True)
class ClientCore:
    """The settings of one client, applied once, and the requests it sends.

    Attributes:
        metadata: call metadata of every RPC (the tenant's key as
            ``authorization: Bearer <key>``, or nothing).
        default_policy: the policy of calls that name none; ``""`` means
            the tenant's default policy.
        timeout: the default deadline of every RPC in seconds; None means none.
    """

    metadata: tuple[tuple[str, str], ...]
    default_policy: str
    timeout: float | None

    @classmethod
    def of(
        cls, *, api_key: str | None, default_policy: str | None, timeout: float | None
    ) -> ClientCore:
        """Return the core of a client with these constructor arguments.

        The key is sent as call metadata (not CallCredentials) so that it also
        works on the plaintext loopback channel of a local broker.
        """
        metadata = (("authorization", f"Bearer {api_key}"),) if api_key else ()
        return cls(metadata=metadata, default_policy=default_policy or "", timeout=timeout)

    def timeout_for(self, timeout: float | None) -> float | None:
        """Return the deadline of one call: ``timeout``, else the client's."""
        return self.timeout if timeout is None else timeout

    def execute_request(
        self,
        method: str,
        url: str,
        *,
        headers: HeadersInput,
        body: _convert.Body,
        policy: str | None,
        provider: str | None,
        overrides: ExecuteOverrides | None,
    ) -> pb.ExecuteRequest:
        """Return the request of an Execute (or ExecuteStream) call."""
        return _convert.execute_request(
            method,
            url,
            headers=headers,
            body=body,
            policy=policy or self.default_policy,
            provider=provider,
            overrides=overrides,
        )

    def classify_request(
        self,
        *,
        status: int | None,
        headers: HeadersInput,
        body: _convert.Body,
        transport_error: TransportError | str | None,
        method: str,
        attempt: int,
        url: str | None,
        request_headers: HeadersInput,
        provider: str | None,
        policy: str | None,
        now: _convert.TimeInput | None,
        deadline: _convert.TimeInput | None,
    ) -> pb.ClassifyResponseRequest:
        """Return the request of a ClassifyResponse call."""
        return _convert.classify_request(
            status=status,
            headers=headers,
            body=body,
            transport_error=transport_error,
            method=method,
            attempt=attempt,
            url=url,
            request_headers=request_headers,
            provider=provider,
            policy=policy or self.default_policy,
            now=now,
            deadline=deadline,
        )


@dataclass(frozen=True)
class Deadline:
    """A point in time on a monotonic clock.

    The budget of a retry loop is kept on ``time.monotonic``, so a wall-clock
    step (NTP, a suspended laptop, a changed time zone) neither shortens nor
    lengthens it. It is turned into wall-clock time only when it is sent, as
    ``now + remaining``.

    Attributes:
        at: the deadline, in seconds of ``monotonic``.
        monotonic: the clock ``at`` is measured on.
    """

    at: float
    monotonic: Callable[[], float]

    @classmethod
    def after(cls, seconds: float, monotonic: Callable[[], float] = time.monotonic) -> Deadline:
        """Return the deadline ``seconds`` from now on ``monotonic``."""
        return cls(at=monotonic() + seconds, monotonic=monotonic)

    def remaining(self) -> float:
        """Return the seconds left; negative once the deadline has passed."""
        return self.at - self.monotonic()

    def unix(self, wall_now: float) -> float:
        """Return the deadline in Unix seconds, given the wall clock's reading now."""
        return wall_now + self.remaining()


@dataclass(frozen=True)
class RetryStep(Generic[T]):
    """The loop's next move after a RETRY decision: wait ``delay`` seconds, then try again.

    Attributes:
        delay: seconds to sleep before the next attempt.
        event: what ``on_retry`` receives; ``event.result`` is the response
            to close when there is no ``on_retry``.
    """

    delay: float
    event: RetryEvent[T]


class RetryLoopState(Generic[T]):
    """The state of one run of the classify-driven retry loop, without I/O.

    Attributes:
        attempt: the 1-based number of the attempt being made.

    Both clients drive it the same way; only the calls, the sleep and the
    closing of responses differ (blocking or awaited)::

        state = RetryLoopState(core, ...)
        while True:
            try:
                state.record_result(fn())
            except Exception as exc:
                if not state.record_error(exc):
                    raise
            step = state.next_step(classify(state.classify_request()))
            if step is None:
                return state.finish()
            on_retry(step.event) if on_retry else discard(step.event.result)
            sleep(step.delay)

    Time: with ``clock`` (a fake Unix-seconds clock in tests), the deadline
    is measured on it and its reading is sent as ``now``, so absolute hints
    are read against it. Without it, the deadline is measured on
    ``monotonic`` and sent as ``wall() + remaining``, and the broker's clock
    reads the hints.
    """

    def __init__(
        self,
        core: ClientCore,
        *,
        method: str,
        url: str | None,
        request_headers: HeadersInput,
        provider: str | None,
        policy: str | None,
        deadline: float | None,
        inspect: Callable[[T], HttpResult],
        transport_error_of: Callable[[BaseException], TransportError | None],
        clock: Callable[[], float] | None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if deadline is not None and (deadline != deadline or deadline < 0):
            raise ValueError("deadline must be a non-negative number of seconds")
        self._core = core
        self._method = method
        self._url = url
        self._request_headers = request_headers
        self._provider = provider
        self._policy = policy
        self._inspect = inspect
        self._transport_error_of = transport_error_of
        self._clock = clock
        self._wall = clock or wall
        self._deadline = (
            Deadline.after(deadline, clock or monotonic) if deadline is not None else None
        )
        self.attempt = 1
        self._result: T | None = None
        self._error: BaseException | None = None
        self._info: HttpResult | None = None
        self._kind: TransportError | None = None

    def _clear(self) -> None:
        self._result = None
        self._error = None
        self._info = None
        self._kind = None

    def record_result(self, result: T) -> None:
        """Record what fn returned and read its status and headers with ``inspect``.

        An exception from ``inspect`` propagates; pass it to record_error.
        """
        self._result = result
        self._info = self._inspect(result)

    def record_error(self, exc: Exception) -> bool:
        """Record what fn (or inspect) raised; return False when it must propagate at once.

        An exception that carries an HTTP response (``urllib.error.HTTPError``)
        is classified by its status; one that ``transport_error_of`` maps to a
        kind is classified as that transport failure; any other is not the
        broker's business and returns False.
        """
        info = response_of_exception(exc)
        if info is None:
            kind = self._transport_error_of(exc)
            if kind is None:
                return False
            self._kind = kind
        self._info = info
        self._error = exc
        return True

    def classify_request(self) -> pb.ClassifyResponseRequest:
        """Return the ClassifyResponse request for the attempt just recorded."""
        info = self._info
        return self._core.classify_request(
            status=info.status if info is not None else None,
            headers=info.headers if info is not None else None,
            body=info.body if info is not None else None,
            transport_error=self._kind,
            method=self._method,
            attempt=self.attempt,
            url=self._url,
            request_headers=self._request_headers,
            provider=self._provider,
            policy=self._policy,
            now=self._clock() if self._clock is not None else None,
            deadline=self._deadline.unix(self._wall()) if self._deadline is not None else None,
        )

    def next_step(self, decision: Decision) -> RetryStep[T] | None:
        """Return what to do after ``decision``: None to stop, else a RetryStep.

        On RETRY the state moves on to the next attempt.
        """
        if decision.action is not Action.RETRY:
            return None
        event = RetryEvent(
            attempt=self.attempt, decision=decision, result=self._result, error=self._error
        )
        self.attempt += 1
        self._clear()
        return RetryStep(delay=decision.delay or 0.0, event=event)

    def finish(self) -> T:
        """Return the last result, or raise the last error, once the broker said stop."""
        if self._error is not None:
            raise self._error
        return cast(T, self._result)


#: Request headers an HTTP seam leaves out: hop-by-hop headers and those the
#: broker sets itself (it refuses a request that carries them), as an HTTP
#: proxy would not forward them. Lower-case.
DROPPED_REQUEST_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
    }
)


def forwarded_headers(headers: HeadersInput) -> list[tuple[str, str]]:
    """Return the request headers an HTTP seam sends: all but DROPPED_REQUEST_HEADERS."""
    return [(n, v) for n, v in header_pairs(headers) if n.lower() not in DROPPED_REQUEST_HEADERS]


class StreamState:
    """The reading of one ExecuteStream call, without I/O.

    The broker sends one head (status, headers, attempts so far), the body as
    chunks, then one end; a call without a final response sends only the end.
    Both StreamResponse classes feed it the messages they receive.

    Attributes:
        status: the final HTTP status; None when the call ended without one.
        headers: the final response's headers, (name, value) pairs in order.
        attempts: the attempts up to the head (``result.attempts`` has all).
        provider: the hint reader that was used.
        result: the end of the stream once it arrived, else None.
    """

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: list[tuple[str, str]] = []
        self.attempts: list[Attempt] = []
        self.provider = ""
        self.result: StreamResult | None = None

    @property
    def done(self) -> bool:
        """Whether the end arrived (or the call had no final response)."""
        return self.result is not None

    def start(self, first: pb.ExecuteStreamResponse | None) -> None:
        """Read the first message: the head (a body follows) or the end (no response).

        Raises BrokerError when the broker closed the stream without either.
        """
        if first is None:
            raise BrokerError(
                grpc.StatusCode.INTERNAL, "the broker closed the stream without a response"
            )
        kind = first.WhichOneof("event")
        if kind == "head":
            h = first.head
            self.status = h.status_code
            self.headers = [(x.name, x.value) for x in h.headers]
            self.attempts = [_convert.attempt_of(a) for a in h.attempts]
            self.provider = h.provider
        elif kind == "end":
            self.result = _convert.stream_result_of(first.end)
            self.attempts = self.result.attempts
            self.provider = self.result.provider
        else:
            raise BrokerError(grpc.StatusCode.INTERNAL, f"the stream began with {kind!r}")

    def feed(self, msg: pb.ExecuteStreamResponse) -> bytes | None:
        """Return the next body bytes, or None once the body is complete.

        Raises BodyIncompleteError when the end says the body did not complete.
        """
        kind = msg.WhichOneof("event")
        if kind == "chunk":
            return bytes(msg.chunk)
        if kind == "end":
            self.result = _convert.stream_result_of(msg.end)
            if not self.result.body_complete:
                raise BodyIncompleteError(
                    f"response body incomplete ({self.result.body_end}): "
                    f"{self.result.error_message}",
                    self.result,
                )
            return None
        raise BodyIncompleteError(f"unexpected {kind!r} message in the body")

    def closed_early(self) -> BodyIncompleteError:
        """Return the error of a stream that closed before its end."""
        return BodyIncompleteError("the stream closed before its end")

    def failed(self, err: BrokerError) -> BodyIncompleteError:
        """Return the error of a stream whose RPC failed mid-body (raise it from ``err``)."""
        return BodyIncompleteError(f"the stream failed: {err}")
