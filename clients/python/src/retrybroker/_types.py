"""Plain Python types of the retry broker contract (retrybroker.v1).

Durations are float seconds everywhere in this package: ``Decision.delay``,
``Decision.hint``, ``Attempt.duration``, ``ExecuteResult.retry_after``. They
come from protobuf Durations with nanosecond precision, so a hint of 1500 ms
is exactly ``1.5``. Times are timezone-aware UTC ``datetime`` objects.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol


class _OpenStrEnum(str, enum.Enum):
    """A str enum that accepts the values a newer broker may send.

    An unknown value becomes a pseudo-member whose name and value are the
    string itself, so an old client keeps working against a newer broker.
    """

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if not isinstance(value, str):
            return None
        member = str.__new__(cls, value)
        member._name_ = value
        member._value_ = value
        return member

    def __str__(self) -> str:
        return str(self.value)


class Action(_OpenStrEnum):
    """Whether to send the request again."""

    RETRY = "retry"
    DO_NOT_RETRY = "do_not_retry"
    UNSPECIFIED = "unspecified"


class Reason(_OpenStrEnum):
    """Why a Decision was taken; the values are the proto enum names."""

    UNSPECIFIED = "REASON_UNSPECIFIED"
    SERVER_HINT = "REASON_SERVER_HINT"
    BACKOFF = "REASON_BACKOFF"
    SUCCESS = "REASON_SUCCESS"
    STATUS_NOT_RETRYABLE = "REASON_STATUS_NOT_RETRYABLE"
    UNSAFE_METHOD = "REASON_UNSAFE_METHOD"
    ATTEMPTS_EXHAUSTED = "REASON_ATTEMPTS_EXHAUSTED"
    HINT_EXCEEDS_MAX_DELAY = "REASON_HINT_EXCEEDS_MAX_DELAY"
    DEADLINE_TOO_SHORT = "REASON_DEADLINE_TOO_SHORT"
    TRANSPORT_ERROR_NOT_RETRYABLE = "REASON_TRANSPORT_ERROR_NOT_RETRYABLE"
    TRANSPORT_RETRY_DISABLED = "REASON_TRANSPORT_RETRY_DISABLED"
    PROVIDER_FORBIDS_RETRY = "REASON_PROVIDER_FORBIDS_RETRY"
    RETRY_BUDGET_EXHAUSTED = "REASON_RETRY_BUDGET_EXHAUSTED"
    GATE_CLOSED = "REASON_GATE_CLOSED"
    CANCELED = "REASON_CANCELED"
    BREAKER_OPEN = "REASON_BREAKER_OPEN"
    SHUTTING_DOWN = "REASON_SHUTTING_DOWN"
    CREDENTIALS_UNAVAILABLE = "REASON_CREDENTIALS_UNAVAILABLE"
    CREDENTIAL_REJECTED = "REASON_CREDENTIAL_REJECTED"


class Outcome(_OpenStrEnum):
    """How an Execute call ended; the values are the proto enum names."""

    UNSPECIFIED = "OUTCOME_UNSPECIFIED"
    SUCCESS = "OUTCOME_SUCCESS"
    NOT_RETRYABLE = "OUTCOME_NOT_RETRYABLE"
    ATTEMPTS_EXHAUSTED = "OUTCOME_ATTEMPTS_EXHAUSTED"
    HINT_EXCEEDS_MAX_DELAY = "OUTCOME_HINT_EXCEEDS_MAX_DELAY"
    DEADLINE_TOO_SHORT = "OUTCOME_DEADLINE_TOO_SHORT"
    RETRY_BUDGET_EXHAUSTED = "OUTCOME_RETRY_BUDGET_EXHAUSTED"
    GATE_CLOSED = "OUTCOME_GATE_CLOSED"
    CANCELED = "OUTCOME_CANCELED"
    BREAKER_OPEN = "OUTCOME_BREAKER_OPEN"
    SHUTTING_DOWN = "OUTCOME_SHUTTING_DOWN"
    CREDENTIALS_UNAVAILABLE = "OUTCOME_CREDENTIALS_UNAVAILABLE"


class BodyEnd(_OpenStrEnum):
    """How a streamed body ended; the values are the proto enum names."""

    UNSPECIFIED = "BODY_END_UNSPECIFIED"
    COMPLETE = "BODY_END_COMPLETE"
    NO_RESPONSE = "BODY_END_NO_RESPONSE"
    UPSTREAM_ERROR = "BODY_END_UPSTREAM_ERROR"
    IDLE_TIMEOUT = "BODY_END_IDLE_TIMEOUT"
    SIZE_LIMIT = "BODY_END_SIZE_LIMIT"
    TIMEOUT = "BODY_END_TIMEOUT"
    CANCELED = "BODY_END_CANCELED"
    SHUTTING_DOWN = "BODY_END_SHUTTING_DOWN"


class TransportError(_OpenStrEnum):
    """The kind of a failure that produced no (complete) HTTP response.

    Values are the lower-case suffixes of the proto enum names (the same
    spelling as the conformance vectors): ``TransportError("timeout")``.
    ``BODY_INCOMPLETE`` is the one kind that comes with a status: the
    response headers arrived but the body ended early.
    """

    CONNECTION_REFUSED = "connection_refused"
    CONNECTION_RESET = "connection_reset"
    EOF = "eof"
    TIMEOUT = "timeout"
    DNS_TEMPORARY = "dns_temporary"
    DNS_NOT_FOUND = "dns_not_found"
    TLS_CERTIFICATE = "tls_certificate"
    CANCELED = "canceled"
    INVALID_URL = "invalid_url"
    DESTINATION_REFUSED = "destination_refused"
    OTHER = "other"
    BODY_INCOMPLETE = "body_incomplete"
    RESPONSE_HEADERS_TOO_LARGE = "response_headers_too_large"

    @classmethod
    def parse(cls, value: TransportError | str) -> TransportError:
        """Return the member named by ``"timeout"``, ``"TRANSPORT_ERROR_TIMEOUT"`` or a member.

        Raises ValueError for a name this client does not know.
        """
        if isinstance(value, TransportError):
            return value
        v = value.strip().lower()
        if v.startswith("transport_error_"):
            v = v[len("transport_error_") :]
        if v not in cls._value2member_map_:
            known = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown transport error {value!r} (one of {known})")
        return cls(v)


class SupportsItems(Protocol):
    """A header container with ``items()``: email/http.client messages, multidicts."""

    def items(self) -> Iterable[tuple[str, Any]]: ...


#: Headers as a caller may pass them: a mapping, an iterable of
#: ``(name, value)`` pairs, or an object with ``items()`` (``http.client``
#: messages, ``requests``/``httpx``/``aiohttp`` headers).
HeadersInput = Mapping[str, str] | Iterable[tuple[str, str]] | SupportsItems | None


def header_pairs(headers: HeadersInput) -> list[tuple[str, str]]:
    """Return HeadersInput as a list of (name, value) pairs.

    Order and duplicates are kept where the source keeps them: an iterable of
    pairs as given; ``httpx.Headers`` through ``multi_items()``; objects with
    ``items()`` (dict, ``email.message.Message``, multidicts) through it.
    """
    if headers is None:
        return []
    source: Any = headers
    if hasattr(source, "multi_items"):
        items = source.multi_items()
    elif hasattr(source, "items"):
        items = source.items()
    else:
        items = source
    out: list[tuple[str, str]] = []
    for item in items:
        name, value = item
        out.append((str(name), str(value)))
    return out


@dataclass(frozen=True)
class Decision:
    """What the broker's rules say to do after one attempt.

    Attributes:
        action: RETRY or DO_NOT_RETRY.
        delay: seconds to wait before the next attempt; set only when action
            is RETRY (``0.0`` means at once), else None.
        hint_source: the lower-case header name (or ``"body:<field>"``) that
            set the delay; ``""`` for backoff or when there was no hint.
        hint: the server's hint in seconds, when a valid one was found, also
            when the broker gives up because it is too long; else None.
        reason: why, e.g. ``Reason.SERVER_HINT`` (== ``"REASON_SERVER_HINT"``).
        provider: the hint reader that was used, e.g. ``"github"``.
        rule: the provider catalog rule that decided, e.g.
            ``"openai/insufficient_quota"``; ``""`` when the header readers
            and the standard rules decided.
    """

    action: Action
    delay: float | None
    hint_source: str
    hint: float | None
    reason: Reason
    provider: str = ""
    rule: str = ""

    @property
    def should_retry(self) -> bool:
        """Whether action is RETRY."""
        return self.action is Action.RETRY


@dataclass(frozen=True)
class Attempt:
    """One send (or one refused chance to send) of an Execute call.

    Attributes:
        number: 1-based attempt number.
        start_time: when the request was sent (UTC), if known.
        duration: seconds from sending to the response headers (or error).
        status: the HTTP status, or None when there was no response. An
            attempt whose body broke off (``TransportError.BODY_INCOMPLETE``)
            has both a status and a transport_error.
        transport_error: the kind of failure when there was no (complete)
            response, else None.
        error_message: the broker's description of that failure (URL redacted).
        decision: the decision taken after this attempt, if any.
        waited: seconds the broker waited before sending this attempt.
        probe: True when the attempt went out as the single trial call of a
            learning cooldown gate or of a half-open failure breaker.
    """

    number: int
    start_time: datetime | None
    duration: float
    status: int | None
    transport_error: TransportError | None
    error_message: str
    decision: Decision | None
    waited: float
    probe: bool = False


@dataclass(frozen=True)
class ExecuteOverrides:
    """Limits that narrow the tenant's policy for one Execute call.

    They can only make the call more conservative; a value above the
    policy's own is refused by the broker with INVALID_ARGUMENT. Durations are
    seconds; ``max_retries`` counts retries (so 0 means a single send).
    """

    max_retries: int | None = None
    max_delay: float | None = None
    total_timeout: float | None = None
    attempt_timeout: float | None = None
    max_response_body: int | None = None


@dataclass(frozen=True)
class ExecuteResult:
    """The final response of an Execute call.

    Attributes:
        status: the final HTTP status, or None when the last attempt ended in
            a transport error or no attempt was sent.
        headers: response headers as (name, value) pairs, in the order
            received, duplicates kept.
        body: the response body, up to the policy's limit.
        body_truncated: True when the body was longer than returned (the
            policy's limit cut it).
        attempts: every attempt, in order.
        outcome: how the call ended, e.g. ``Outcome.SUCCESS``.
        retry_after: seconds after which the caller may try again, when the
            broker gave up early on a hint, a deadline, a closed gate or an
            open breaker, or stopped while waiting (``Outcome.SHUTTING_DOWN``).
        provider: the hint reader that was used.
        body_incomplete: True when the upstream body ended early (reset,
            short Content-Length, timeout while reading); ``body`` holds what
            arrived. Such a result never has ``Outcome.SUCCESS``.
    """

    status: int | None
    headers: list[tuple[str, str]]
    body: bytes
    body_truncated: bool
    attempts: list[Attempt]
    outcome: Outcome
    retry_after: float | None
    provider: str = ""
    body_incomplete: bool = False

    def header(self, name: str) -> str | None:
        """Return the first value of a header (case-insensitive), or None."""
        values = self.header_values(name)
        return values[0] if values else None

    def header_values(self, name: str) -> list[str]:
        """Return every value of a header (case-insensitive), in order."""
        lname = name.lower()
        return [v for n, v in self.headers if n.lower() == lname]

    def text(self, encoding: str = "utf-8", errors: str = "replace") -> str:
        """Return the body decoded as text."""
        return self.body.decode(encoding, errors)

    def json(self) -> Any:
        """Return the body parsed as JSON."""
        return json.loads(self.body)


@dataclass(frozen=True)
class HttpResult:
    """What the retry helpers need from one HTTP response: status, headers, leading body bytes."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


@dataclass(frozen=True)
class FieldViolation:
    """One problem in a request the broker refused."""

    field: str
    description: str


@dataclass(frozen=True)
class StreamResult:
    """How an ExecuteStream call ended: the broker's last message.

    Attributes:
        attempts: every attempt, in order.
        outcome: how the call ended; never ``Outcome.SUCCESS`` when the body
            did not complete.
        retry_after: seconds after which the caller may try again, when the
            broker gave up early; else None.
        body_complete: True only when the whole upstream body was streamed.
        body_end: how the body ended, e.g. ``BodyEnd.IDLE_TIMEOUT``.
        error_message: why the body did not complete (URL redacted); ``""``
            when it did.
        trailers: the upstream's HTTP trailers as (name, value) pairs.
        body_bytes: the number of body bytes the broker streamed.
        provider: the hint reader that was used.
    """

    attempts: list[Attempt]
    outcome: Outcome
    retry_after: float | None
    body_complete: bool
    body_end: BodyEnd
    error_message: str
    trailers: list[tuple[str, str]]
    body_bytes: int
    provider: str = ""


class TaskState(_OpenStrEnum):
    """Where a task is in its life; the values are the proto enum names.

    SUCCEEDED, FAILED and CANCELLED are final (``is_final``): a watch ends
    after one of them.
    """

    UNSPECIFIED = "TASK_STATE_UNSPECIFIED"
    SCHEDULED = "TASK_STATE_SCHEDULED"
    WAITING = "TASK_STATE_WAITING"
    RUNNING = "TASK_STATE_RUNNING"
    SUCCEEDED = "TASK_STATE_SUCCEEDED"
    FAILED = "TASK_STATE_FAILED"
    CANCELLED = "TASK_STATE_CANCELLED"

    @property
    def is_final(self) -> bool:
        """Whether the state is final: SUCCEEDED, FAILED or CANCELLED."""
        return self in (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED)

    @classmethod
    def parse(cls, value: TaskState | str) -> TaskState:
        """Return the member named by ``"waiting"``, ``"TASK_STATE_WAITING"`` or a member.

        Raises ValueError for a name this client does not know.
        """
        if isinstance(value, TaskState):
            return value
        v = value.strip().upper()
        if not v.startswith("TASK_STATE_"):
            v = "TASK_STATE_" + v
        if v not in cls._value2member_map_:
            known = ", ".join(m.name.lower() for m in cls)
            raise ValueError(f"unknown task state {value!r} (one of {known})")
        return cls(v)


@dataclass(frozen=True)
class TaskResponse:
    """The final HTTP response of a task.

    Attributes:
        status: the HTTP status.
        headers: response headers as (name, value) pairs, in the order
            received, duplicates kept.
        body: the response body, up to the policy's ``max_response_body``.
        body_truncated: True when the body was longer and was cut.
        body_incomplete: True when the upstream broke the body off.
    """

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    body_truncated: bool = False
    body_incomplete: bool = False

    def header(self, name: str) -> str | None:
        """Return the first value of a header (case-insensitive), or None."""
        lname = name.lower()
        return next((v for n, v in self.headers if n.lower() == lname), None)

    def text(self, encoding: str = "utf-8", errors: str = "replace") -> str:
        """Return the body decoded as text."""
        return self.body.decode(encoding, errors)


@dataclass(frozen=True)
class Task:
    """A deferred call the broker keeps durably, and what became of it.

    Times are timezone-aware UTC datetimes, on the broker's clock.

    Attributes:
        task_id: names the task within its tenant.
        policy: the policy the task runs under (``""``: the tenant's default).
        state: where the task is, e.g. ``TaskState.WAITING``.
        not_before: the earliest time the task runs.
        give_up_after: when an unfinished task fails; None means never.
        attempts: every send over every dispatch, in order.
        response: the final HTTP response, once there is one; else None.
        outcome: how the last dispatch ended; ``Outcome.UNSPECIFIED``
            before the first.
        create_time: when the task was created.
        update_time: when the task last changed.
        next_run_time: when a SCHEDULED or WAITING task is due next; None
            for a final task.
        wait_reason: why a WAITING task waits, e.g. ``"gate_closed"``.
        idempotency_key: the value of the policy's idempotency header that
            every send of the task carries (the request's own, or one the
            broker generated at creation).
    """

    task_id: str
    policy: str
    state: TaskState
    not_before: datetime | None
    give_up_after: datetime | None
    attempts: list[Attempt]
    response: TaskResponse | None
    outcome: Outcome
    create_time: datetime | None
    update_time: datetime | None
    next_run_time: datetime | None
    wait_reason: str
    idempotency_key: str


@dataclass(frozen=True)
class TaskPage:
    """One page of ``list_tasks_page``.

    Attributes:
        tasks: the page's tasks, oldest first.
        next_page_token: pass it as ``page_token`` for the next page; ``""``
            on the last.
    """

    tasks: list[Task]
    next_page_token: str
