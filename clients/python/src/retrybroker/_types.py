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
from typing import Any, Protocol, Union


class _OpenStrEnum(str, enum.Enum):
    """A str enum that accepts values a newer broker may send.

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
    """Action says whether to send the request again."""

    RETRY = "retry"
    DO_NOT_RETRY = "do_not_retry"
    UNSPECIFIED = "unspecified"


class Reason(_OpenStrEnum):
    """Reason explains a Decision; values are the proto enum names."""

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


class Outcome(_OpenStrEnum):
    """Outcome says how an Execute call ended; values are the proto enum names."""

    UNSPECIFIED = "OUTCOME_UNSPECIFIED"
    SUCCESS = "OUTCOME_SUCCESS"
    NOT_RETRYABLE = "OUTCOME_NOT_RETRYABLE"
    ATTEMPTS_EXHAUSTED = "OUTCOME_ATTEMPTS_EXHAUSTED"
    HINT_EXCEEDS_MAX_DELAY = "OUTCOME_HINT_EXCEEDS_MAX_DELAY"
    DEADLINE_TOO_SHORT = "OUTCOME_DEADLINE_TOO_SHORT"
    RETRY_BUDGET_EXHAUSTED = "OUTCOME_RETRY_BUDGET_EXHAUSTED"
    GATE_CLOSED = "OUTCOME_GATE_CLOSED"
    CANCELED = "OUTCOME_CANCELED"


class TransportError(_OpenStrEnum):
    """TransportError is the kind of a failure that produced no HTTP response.

    Values are the lower-case suffixes of the proto enum names (the same
    spelling as the conformance vectors): ``TransportError("timeout")``.
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

    @classmethod
    def parse(cls, value: TransportError | str) -> TransportError:
        """parse accepts a member, ``"timeout"`` or ``"TRANSPORT_ERROR_TIMEOUT"``.

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
    """Header containers with ``items()``: email/http.client messages, multidicts."""

    def items(self) -> Iterable[tuple[str, Any]]: ...


#: Headers as a caller may pass them: a mapping, an iterable of
#: ``(name, value)`` pairs, or an object with ``items()`` (``http.client``
#: messages, ``requests``/``httpx``/``aiohttp`` headers).
HeadersInput = Union[Mapping[str, str], Iterable[tuple[str, str]], SupportsItems, None]


def header_pairs(headers: HeadersInput) -> list[tuple[str, str]]:
    """header_pairs normalises HeadersInput to a list of (name, value) pairs.

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
    """Decision is what the broker's rules say to do after one attempt.

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
    """

    action: Action
    delay: float | None
    hint_source: str
    hint: float | None
    reason: Reason
    provider: str = ""

    @property
    def should_retry(self) -> bool:
        """should_retry is True when action is RETRY."""
        return self.action is Action.RETRY


@dataclass(frozen=True)
class Attempt:
    """Attempt records one send (or one refused chance to send) of Execute.

    Attributes:
        number: 1-based attempt number.
        start_time: when the request was sent (UTC), if known.
        duration: seconds from sending to the response headers (or error).
        status: the HTTP status, or None when transport_error is set.
        transport_error: the kind of failure when there was no response.
        error_message: the broker's description of that failure (URL redacted).
        decision: the decision taken after this attempt, if any.
        waited: seconds the broker waited before sending this attempt.
    """

    number: int
    start_time: datetime | None
    duration: float
    status: int | None
    transport_error: TransportError | None
    error_message: str
    decision: Decision | None
    waited: float


@dataclass(frozen=True)
class ExecuteOverrides:
    """ExecuteOverrides narrow the tenant's policy for one Execute call.

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
    """ExecuteResult is the final response of an Execute call.

    Attributes:
        status: the final HTTP status, or None when the last attempt ended in
            a transport error or no attempt was sent.
        headers: response headers as (name, value) pairs, in the order
            received, duplicates kept.
        body: the response body, up to the policy's limit.
        body_truncated: True when the body was longer than returned.
        attempts: every attempt, in order.
        outcome: how the call ended, e.g. ``Outcome.SUCCESS``.
        retry_after: seconds after which the caller may try again, when the
            broker gave up early on a hint, a deadline or a closed gate.
        provider: the hint reader that was used.
    """

    status: int | None
    headers: list[tuple[str, str]]
    body: bytes
    body_truncated: bool
    attempts: list[Attempt]
    outcome: Outcome
    retry_after: float | None
    provider: str = ""

    def header(self, name: str) -> str | None:
        """header returns the first value of a header (case-insensitive), or None."""
        values = self.header_values(name)
        return values[0] if values else None

    def header_values(self, name: str) -> list[str]:
        """header_values returns every value of a header (case-insensitive), in order."""
        lname = name.lower()
        return [v for n, v in self.headers if n.lower() == lname]

    def text(self, encoding: str = "utf-8", errors: str = "replace") -> str:
        """text decodes the body."""
        return self.body.decode(encoding, errors)

    def json(self) -> Any:
        """json parses the body as JSON."""
        return json.loads(self.body)


@dataclass(frozen=True)
class HttpResult:
    """HttpResult is what the retry helpers need from one HTTP response."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


@dataclass(frozen=True)
class FieldViolation:
    """FieldViolation is one problem in a request the broker refused."""

    field: str
    description: str
