"""Translation between this package's types and the generated protobufs."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import cast

from google.protobuf import duration_pb2, timestamp_pb2

from ._gen.retrybroker.v1 import broker_pb2 as pb
from ._types import (
    Action,
    Attempt,
    Decision,
    ExecuteOverrides,
    ExecuteResult,
    HeadersInput,
    Outcome,
    Reason,
    TransportError,
    header_pairs,
)

#: Time as a caller may pass it: an aware datetime or Unix seconds.
TimeInput = datetime | float | int


def headers_to_proto(headers: HeadersInput) -> list[pb.HttpHeader]:
    return [pb.HttpHeader(name=n, value=v) for n, v in header_pairs(headers)]


def body_bytes(body: bytes | bytearray | memoryview | str | None) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    return bytes(body)


def timestamp(value: TimeInput, what: str) -> timestamp_pb2.Timestamp:
    """timestamp converts an aware datetime or Unix seconds to a Timestamp.

    A naive datetime is refused: it has no defined instant.
    """
    ts = timestamp_pb2.Timestamp()
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{what} must be a timezone-aware datetime (or Unix seconds)")
        value = value.timestamp()
    secs = math.floor(value)
    ts.seconds = int(secs)
    ts.nanos = int(round((value - secs) * 1e9))
    if ts.nanos >= 1_000_000_000:
        ts.seconds += 1
        ts.nanos -= 1_000_000_000
    return ts


def duration(seconds: float, what: str) -> duration_pb2.Duration:
    if seconds < 0 or math.isnan(seconds) or math.isinf(seconds):
        raise ValueError(f"{what} must be a finite, non-negative number of seconds")
    d = duration_pb2.Duration()
    whole = math.floor(seconds)
    d.seconds = int(whole)
    d.nanos = int(round((seconds - whole) * 1e9))
    if d.nanos >= 1_000_000_000:
        d.seconds += 1
        d.nanos -= 1_000_000_000
    return d


def seconds_of(d: duration_pb2.Duration) -> float:
    return d.seconds + d.nanos / 1e9


def datetime_of(ts: timestamp_pb2.Timestamp) -> datetime:
    return datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, tz=timezone.utc)


def transport_error_to_proto(kind: TransportError | str) -> pb.TransportError:
    te = TransportError.parse(kind)
    return cast(pb.TransportError, pb.TransportError.Value("TRANSPORT_ERROR_" + te.value.upper()))


def transport_error_of(value: int) -> TransportError | None:
    if value == pb.TRANSPORT_ERROR_UNSPECIFIED:
        return None
    try:
        name = pb.TransportError.Name(value)
    except ValueError:
        return TransportError(f"transport_error_{value}")
    return TransportError(name[len("TRANSPORT_ERROR_") :].lower())


def _enum_name(enum_type: object, value: int, prefix: str) -> str:
    try:
        return str(enum_type.Name(value))  # type: ignore[attr-defined]
    except ValueError:
        return f"{prefix}{value}"


def decision_of(d: pb.Decision) -> Decision:
    if d.action == pb.ACTION_RETRY:
        action = Action.RETRY
    elif d.action == pb.ACTION_DO_NOT_RETRY:
        action = Action.DO_NOT_RETRY
    else:
        action = Action.UNSPECIFIED
    delay: float | None = None
    if action is Action.RETRY:
        delay = seconds_of(d.delay) if d.HasField("delay") else 0.0
    return Decision(
        action=action,
        delay=delay,
        hint_source=d.hint_source,
        hint=seconds_of(d.hint) if d.HasField("hint") else None,
        reason=Reason(_enum_name(pb.Reason, d.reason, "REASON_")),
        provider=d.provider,
    )


def attempt_of(a: pb.Attempt) -> Attempt:
    te = transport_error_of(a.transport_error)
    return Attempt(
        number=a.number,
        start_time=datetime_of(a.start_time) if a.HasField("start_time") else None,
        duration=seconds_of(a.duration),
        status=a.status_code if te is None and a.status_code != 0 else None,
        transport_error=te,
        error_message=a.error_message,
        decision=decision_of(a.decision) if a.HasField("decision") else None,
        waited=seconds_of(a.waited),
    )


def execute_result_of(r: pb.ExecuteResponse) -> ExecuteResult:
    has_response = r.HasField("response")
    resp = r.response
    return ExecuteResult(
        status=resp.status_code if has_response else None,
        headers=[(h.name, h.value) for h in resp.headers],
        body=bytes(resp.body),
        body_truncated=resp.body_truncated,
        attempts=[attempt_of(a) for a in r.attempts],
        outcome=Outcome(_enum_name(pb.Outcome, r.outcome, "OUTCOME_")),
        retry_after=seconds_of(r.retry_after) if r.HasField("retry_after") else None,
        provider=r.provider,
    )


def overrides_to_proto(o: ExecuteOverrides) -> pb.ExecuteOverrides:
    m = pb.ExecuteOverrides()
    if o.max_retries is not None:
        m.max_retries = o.max_retries
    if o.max_delay is not None:
        m.max_delay.CopyFrom(duration(o.max_delay, "max_delay"))
    if o.total_timeout is not None:
        m.total_timeout.CopyFrom(duration(o.total_timeout, "total_timeout"))
    if o.attempt_timeout is not None:
        m.attempt_timeout.CopyFrom(duration(o.attempt_timeout, "attempt_timeout"))
    if o.max_response_body is not None:
        m.max_response_body = o.max_response_body
    return m


def execute_request(
    method: str,
    url: str,
    headers: HeadersInput,
    body: bytes | bytearray | memoryview | str | None,
    policy: str,
    provider: str | None,
    overrides: ExecuteOverrides | None,
) -> pb.ExecuteRequest:
    req = pb.ExecuteRequest(
        request=pb.HttpRequest(
            method=method,
            url=url,
            headers=headers_to_proto(headers),
            body=body_bytes(body),
        ),
        policy=policy,
        provider=provider or "",
    )
    if overrides is not None:
        req.overrides.CopyFrom(overrides_to_proto(overrides))
    return req


def classify_request(
    *,
    status: int | None,
    headers: HeadersInput,
    method: str,
    attempt: int,
    provider: str | None,
    policy: str,
    now: TimeInput | None,
    body: bytes | bytearray | memoryview | str | None,
    transport_error: TransportError | str | None,
    request_headers: HeadersInput,
    url: str | None,
    deadline: TimeInput | None,
) -> pb.ClassifyResponseRequest:
    req = pb.ClassifyResponseRequest(
        policy=policy,
        provider=provider or "",
        method=method,
        status_code=status or 0,
        headers=headers_to_proto(headers),
        attempt=attempt,
        body=body_bytes(body),
        request_headers=headers_to_proto(request_headers),
        url=url or "",
    )
    if transport_error is not None:
        req.transport_error = transport_error_to_proto(transport_error)
    if now is not None:
        req.now.CopyFrom(timestamp(now, "now"))
    if deadline is not None:
        req.deadline.CopyFrom(timestamp(deadline, "deadline"))
    return req
