"""Translation between this package's types and the generated protobufs.

Pure functions, no I/O: the request builders and the response readers that
both clients (and every RPC of a client) share.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import cast

from google.protobuf import duration_pb2, timestamp_pb2

from ._gen.retrybroker.v1 import broker_pb2 as pb
from ._types import (
    Action,
    Attempt,
    BodyEnd,
    Decision,
    ExecuteOverrides,
    ExecuteResult,
    HeadersInput,
    Outcome,
    Reason,
    StreamResult,
    Task,
    TaskPage,
    TaskResponse,
    TaskState,
    TransportError,
    header_pairs,
)

#: Time as a caller may pass it: an aware datetime or Unix seconds.
TimeInput = datetime | float | int

#: A request or response body as a caller may pass it; a str is sent as UTF-8.
Body = bytes | bytearray | memoryview | str | None

_NANOS = 1_000_000_000


def headers_to_proto(headers: HeadersInput) -> list[pb.HttpHeader]:
    """Return the headers as HttpHeader messages, in order, duplicates kept."""
    return [pb.HttpHeader(name=n, value=v) for n, v in header_pairs(headers)]


def body_bytes(body: Body) -> bytes:
    """Return the body as bytes: ``b""`` for None, UTF-8 for a str."""
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    return bytes(body)


def _split_seconds(seconds: float) -> tuple[int, int]:
    """Return (whole seconds, nanoseconds) of a float, the nanoseconds in [0, 1e9)."""
    whole = math.floor(seconds)
    nanos = round((seconds - whole) * 1e9)
    if nanos >= _NANOS:
        return int(whole) + 1, nanos - _NANOS
    return int(whole), nanos


def timestamp(value: TimeInput, what: str) -> timestamp_pb2.Timestamp:
    """Return an aware datetime or Unix seconds as a Timestamp.

    Raises ValueError for a naive datetime (it names no instant) or a value
    that is not finite; ``what`` names the argument in the message.
    """
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{what} must be a timezone-aware datetime (or Unix seconds)")
        value = value.timestamp()
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{what} must be a finite number of Unix seconds")
    seconds, nanos = _split_seconds(value)
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)


def duration(seconds: float, what: str) -> duration_pb2.Duration:
    """Return non-negative float seconds as a Duration (nanosecond precision).

    Raises ValueError for a negative, NaN or infinite value; ``what`` names
    the argument in the message.
    """
    if seconds < 0 or math.isnan(seconds) or math.isinf(seconds):
        raise ValueError(f"{what} must be a finite, non-negative number of seconds")
    whole, nanos = _split_seconds(seconds)
    return duration_pb2.Duration(seconds=whole, nanos=nanos)


def seconds_of(d: duration_pb2.Duration) -> float:
    """Return a Duration as float seconds."""
    return d.seconds + d.nanos / 1e9


def datetime_of(ts: timestamp_pb2.Timestamp) -> datetime:
    """Return a Timestamp as an aware UTC datetime."""
    return datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, tz=timezone.utc)


def transport_error_to_proto(kind: TransportError | str) -> pb.TransportError:
    """Return the proto enum value of a transport error kind (see TransportError.parse)."""
    te = TransportError.parse(kind)
    return cast(pb.TransportError, pb.TransportError.Value("TRANSPORT_ERROR_" + te.value.upper()))


def transport_error_of(value: int) -> TransportError | None:
    """Return the kind of a proto TransportError, or None for UNSPECIFIED.

    A value this client does not know becomes ``"transport_error_<n>"``.
    """
    if value == pb.TRANSPORT_ERROR_UNSPECIFIED:
        return None
    try:
        name = pb.TransportError.Name(value)
    except ValueError:
        return TransportError(f"transport_error_{value}")
    return TransportError(name[len("TRANSPORT_ERROR_") :].lower())


def _enum_name(enum_type: object, value: int, prefix: str) -> str:
    """Return the proto name of an enum value, or ``prefix + str(value)`` when unknown."""
    try:
        return str(enum_type.Name(value))  # type: ignore[attr-defined]
    except ValueError:
        return f"{prefix}{value}"


def decision_of(d: pb.Decision) -> Decision:
    """Return a proto Decision as a Decision; ``delay`` is set only for RETRY."""
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
        rule=d.rule,
    )


def attempt_of(a: pb.Attempt) -> Attempt:
    """Return a proto Attempt as an Attempt.

    ``status`` is None when the attempt got no response; an attempt whose
    body broke off keeps its status next to ``TransportError.BODY_INCOMPLETE``.
    """
    return Attempt(
        number=a.number,
        start_time=datetime_of(a.start_time) if a.HasField("start_time") else None,
        duration=seconds_of(a.duration),
        status=a.status_code if a.status_code != 0 else None,
        transport_error=transport_error_of(a.transport_error),
        error_message=a.error_message,
        decision=decision_of(a.decision) if a.HasField("decision") else None,
        waited=seconds_of(a.waited),
        probe=a.probe,
    )


def outcome_of(value: int) -> Outcome:
    """Return a proto Outcome as an Outcome (an unknown value keeps its number)."""
    return Outcome(_enum_name(pb.Outcome, value, "OUTCOME_"))


def execute_result_of(r: pb.ExecuteResponse) -> ExecuteResult:
    """Return a proto ExecuteResponse as an ExecuteResult."""
    has_response = r.HasField("response")
    resp = r.response
    return ExecuteResult(
        status=resp.status_code if has_response else None,
        headers=[(h.name, h.value) for h in resp.headers],
        body=bytes(resp.body),
        body_truncated=resp.body_truncated,
        attempts=[attempt_of(a) for a in r.attempts],
        outcome=outcome_of(r.outcome),
        retry_after=seconds_of(r.retry_after) if r.HasField("retry_after") else None,
        provider=r.provider,
        body_incomplete=resp.body_incomplete,
    )


def stream_result_of(e: pb.StreamEnd) -> StreamResult:
    """Return a proto StreamEnd as a StreamResult."""
    return StreamResult(
        attempts=[attempt_of(a) for a in e.attempts],
        outcome=outcome_of(e.outcome),
        retry_after=seconds_of(e.retry_after) if e.HasField("retry_after") else None,
        body_complete=e.body_complete,
        body_end=BodyEnd(_enum_name(pb.BodyEnd, e.body_end, "BODY_END_")),
        error_message=e.error_message,
        trailers=[(h.name, h.value) for h in e.trailers],
        body_bytes=e.body_bytes,
        provider=e.provider,
    )


def overrides_to_proto(o: ExecuteOverrides) -> pb.ExecuteOverrides:
    """Return the overrides as a proto message; None fields stay unset."""
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
    *,
    headers: HeadersInput,
    body: Body,
    policy: str,
    provider: str | None,
    overrides: ExecuteOverrides | None,
) -> pb.ExecuteRequest:
    """Return the ExecuteRequest of an HTTP call (for Execute and ExecuteStream alike)."""
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
    body: Body,
    transport_error: TransportError | str | None,
    method: str,
    attempt: int,
    url: str | None,
    request_headers: HeadersInput,
    provider: str | None,
    policy: str,
    now: TimeInput | None,
    deadline: TimeInput | None,
) -> pb.ClassifyResponseRequest:
    """Return the ClassifyResponseRequest for one response or transport failure."""
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


def task_state_to_proto(state: TaskState | str | None) -> pb.TaskState:
    """Return the proto enum value of a task state; None is UNSPECIFIED (every state)."""
    if state is None:
        return pb.TASK_STATE_UNSPECIFIED
    return cast(pb.TaskState, pb.TaskState.Value(TaskState.parse(state).value))


def task_of(t: pb.Task) -> Task:
    """Return a proto Task as a Task (an unknown state keeps its number)."""
    response: TaskResponse | None = None
    if t.HasField("response"):
        r = t.response
        response = TaskResponse(
            status=r.status_code,
            headers=[(h.name, h.value) for h in r.headers],
            body=bytes(r.body),
            body_truncated=r.body_truncated,
            body_incomplete=r.body_incomplete,
        )

    def when(field: str) -> datetime | None:
        return datetime_of(getattr(t, field)) if t.HasField(field) else None

    return Task(
        task_id=t.task_id,
        policy=t.policy,
        state=TaskState(_enum_name(pb.TaskState, t.state, "TASK_STATE_")),
        not_before=when("not_before"),
        give_up_after=when("give_up_after"),
        attempts=[attempt_of(a) for a in t.attempts],
        response=response,
        outcome=outcome_of(t.outcome),
        create_time=when("create_time"),
        update_time=when("update_time"),
        next_run_time=when("next_run_time"),
        wait_reason=t.wait_reason,
        idempotency_key=t.idempotency_key,
    )


def task_page_of(r: pb.ListTasksResponse) -> TaskPage:
    """Return a proto ListTasksResponse as a TaskPage."""
    return TaskPage(tasks=[task_of(t) for t in r.tasks], next_page_token=r.next_page_token)


def create_task_request(
    execute: pb.ExecuteRequest,
    *,
    task_id: str | None,
    not_before: TimeInput | None,
    give_up_after: TimeInput | None,
) -> pb.CreateTaskRequest:
    """Return the CreateTaskRequest of an ExecuteRequest and the task's settings."""
    req = pb.CreateTaskRequest(execute=execute, task_id=task_id or "")
    if not_before is not None:
        req.not_before.CopyFrom(timestamp(not_before, "not_before"))
    if give_up_after is not None:
        req.give_up_after.CopyFrom(timestamp(give_up_after, "give_up_after"))
    return req


def list_tasks_request(
    *, state: TaskState | str | None, page_size: int | None, page_token: str
) -> pb.ListTasksRequest:
    """Return the ListTasksRequest of one page.

    Raises ValueError for an unknown state or a page size outside 1 to 1000.
    """
    if page_size is not None and not 1 <= page_size <= 1000:
        raise ValueError(f"page_size must be 1 to 1000, got {page_size}")
    return pb.ListTasksRequest(
        state=task_state_to_proto(state), page_size=page_size or 0, page_token=page_token
    )
