"""Proto messages become the client's own types, new contract fields included."""

from __future__ import annotations

import enum
import importlib.util
from datetime import datetime, timezone
from typing import cast

import pytest

from retrybroker import (
    Action,
    BrokerClient,
    Decision,
    Outcome,
    Reason,
    TaskState,
    TransportError,
)
from retrybroker import _convert as convert
from retrybroker._gen.retrybroker.v1 import broker_pb2 as pb


def _members(cls: type[enum.Enum]) -> set[str]:
    return {str(m.value) for m in cls}


def test_every_proto_reason_and_outcome_is_a_member() -> None:
    # A value the client lacks would still convert (as an open pseudo-member),
    # but callers could not name it: the enums must follow the proto.
    assert set(pb.Reason.keys()) == _members(Reason)
    assert set(pb.Outcome.keys()) == _members(Outcome)
    kinds = {"TRANSPORT_ERROR_" + v.upper() for v in _members(TransportError)}
    assert kinds == set(pb.TransportError.keys()) - {"TRANSPORT_ERROR_UNSPECIFIED"}
    assert set(pb.TaskState.keys()) == _members(TaskState)


def test_task_of_reads_every_field_and_leaves_unset_times_none() -> None:
    t = pb.Task(
        task_id="t1",
        policy="bulk",
        state=pb.TASK_STATE_WAITING,
        outcome=pb.OUTCOME_GATE_CLOSED,
        wait_reason="gate_closed",
        idempotency_key="k",
        attempts=[pb.Attempt(number=1, status_code=429)],
        response=pb.HttpResponse(
            status_code=429, headers=[pb.HttpHeader(name="Retry-After", value="60")], body=b"x"
        ),
    )
    t.not_before.FromSeconds(1_700_000_000)
    t.next_run_time.FromSeconds(1_700_000_060)
    task = convert.task_of(t)
    assert task.task_id == "t1"
    assert task.policy == "bulk"
    assert task.state is TaskState.WAITING
    assert not task.state.is_final
    assert task.outcome is Outcome.GATE_CLOSED
    assert task.wait_reason == "gate_closed"
    assert task.idempotency_key == "k"
    assert [a.status for a in task.attempts] == [429]
    assert task.response is not None
    assert task.response.header("retry-after") == "60"
    assert task.not_before == datetime.fromtimestamp(1_700_000_000, tz=timezone.utc)
    assert task.next_run_time == datetime.fromtimestamp(1_700_000_060, tz=timezone.utc)
    assert task.give_up_after is None
    assert task.create_time is None
    assert convert.task_of(pb.Task(state=cast(pb.TaskState, 99))).state == "TASK_STATE_99"
    assert convert.task_of(pb.Task()).response is None


def test_task_state_names() -> None:
    assert TaskState.parse("waiting") is TaskState.WAITING
    assert TaskState.parse(" TASK_STATE_FAILED ") is TaskState.FAILED
    assert convert.task_state_to_proto(None) == pb.TASK_STATE_UNSPECIFIED
    assert convert.task_state_to_proto("cancelled") == pb.TASK_STATE_CANCELLED
    with pytest.raises(ValueError, match="unknown task state"):
        TaskState.parse("asleep")
    with pytest.raises(ValueError, match="page_size"):
        convert.list_tasks_request(state=None, page_size=0, page_token="")


@pytest.mark.parametrize(
    ("proto", "reason"),
    [
        (pb.REASON_BREAKER_OPEN, Reason.BREAKER_OPEN),
        (pb.REASON_SHUTTING_DOWN, Reason.SHUTTING_DOWN),
        (pb.REASON_CREDENTIALS_UNAVAILABLE, Reason.CREDENTIALS_UNAVAILABLE),
        (pb.REASON_GATE_CLOSED, Reason.GATE_CLOSED),
    ],
)
def test_decision_reasons(proto: int, reason: Reason) -> None:
    d = convert.decision_of(pb.Decision(action=pb.ACTION_DO_NOT_RETRY, reason=proto))  # type: ignore[arg-type]
    assert d.reason is reason
    assert d.action is Action.DO_NOT_RETRY
    assert d.delay is None


def test_decision_rule_and_durations() -> None:
    msg = pb.Decision(
        action=pb.ACTION_RETRY,
        reason=pb.REASON_SERVER_HINT,
        hint_source="body:retry_after",
        provider="openai",
        rule="openai/rate_limit",
    )
    msg.delay.FromMilliseconds(1500)
    msg.hint.FromMilliseconds(1500)
    d = convert.decision_of(msg)
    assert d == Decision(
        action=Action.RETRY,
        delay=1.5,
        hint_source="body:retry_after",
        hint=1.5,
        reason=Reason.SERVER_HINT,
        provider="openai",
        rule="openai/rate_limit",
    )
    assert d.should_retry
    assert convert.decision_of(pb.Decision(action=pb.ACTION_RETRY)).delay == 0.0
    assert convert.decision_of(pb.Decision()).rule == ""


def test_unknown_enum_values_keep_their_number() -> None:
    d = convert.decision_of(pb.Decision(action=pb.ACTION_DO_NOT_RETRY, reason=99))  # type: ignore[arg-type]
    assert d.reason == "REASON_99"
    assert convert.outcome_of(77) == "OUTCOME_77"
    assert convert.transport_error_of(55) == "transport_error_55"


def test_attempt_probe_and_body_incomplete_keep_the_status() -> None:
    a = pb.Attempt(
        number=2,
        status_code=200,
        transport_error=pb.TRANSPORT_ERROR_BODY_INCOMPLETE,
        error_message="unexpected EOF after 10 of 20 bytes",
        probe=True,
    )
    a.start_time.FromSeconds(1_800_000_000)
    a.duration.FromMilliseconds(250)
    a.waited.FromMilliseconds(1000)
    got = convert.attempt_of(a)
    assert got.number == 2
    assert got.status == 200
    assert got.transport_error is TransportError.BODY_INCOMPLETE
    assert got.probe is True
    assert got.duration == 0.25
    assert got.waited == 1.0
    assert got.start_time == datetime.fromtimestamp(1_800_000_000, tz=timezone.utc)
    assert got.decision is None

    refused = convert.attempt_of(pb.Attempt(number=1, transport_error=pb.TRANSPORT_ERROR_TIMEOUT))
    assert refused.status is None
    assert refused.transport_error is TransportError.TIMEOUT
    assert refused.probe is False
    assert refused.start_time is None


def test_execute_result_body_incomplete_and_new_outcomes() -> None:
    r = pb.ExecuteResponse(
        response=pb.HttpResponse(
            status_code=200,
            headers=[pb.HttpHeader(name="A", value="1"), pb.HttpHeader(name="a", value="2")],
            body=b"partial",
            body_incomplete=True,
        ),
        outcome=pb.OUTCOME_ATTEMPTS_EXHAUSTED,
        provider="retry-after",
    )
    got = convert.execute_result_of(r)
    assert got.status == 200
    assert got.body == b"partial"
    assert got.body_incomplete is True
    assert got.body_truncated is False
    assert got.header_values("a") == ["1", "2"]
    assert got.retry_after is None

    for proto, outcome in [
        (pb.OUTCOME_BREAKER_OPEN, Outcome.BREAKER_OPEN),
        (pb.OUTCOME_SHUTTING_DOWN, Outcome.SHUTTING_DOWN),
        (pb.OUTCOME_CREDENTIALS_UNAVAILABLE, Outcome.CREDENTIALS_UNAVAILABLE),
    ]:
        msg = pb.ExecuteResponse(outcome=proto)
        msg.retry_after.FromSeconds(30)
        res = convert.execute_result_of(msg)
        assert res.outcome is outcome
        assert res.retry_after == 30.0
        assert res.status is None
        assert res.body_incomplete is False


@pytest.mark.parametrize(
    ("given", "proto"),
    [
        ("body_incomplete", pb.TRANSPORT_ERROR_BODY_INCOMPLETE),
        ("TRANSPORT_ERROR_BODY_INCOMPLETE", pb.TRANSPORT_ERROR_BODY_INCOMPLETE),
        (TransportError.CONNECTION_RESET, pb.TRANSPORT_ERROR_CONNECTION_RESET),
        (" Timeout ", pb.TRANSPORT_ERROR_TIMEOUT),
    ],
)
def test_transport_error_to_proto(given: TransportError | str, proto: int) -> None:
    assert convert.transport_error_to_proto(given) == proto


def test_durations_and_timestamps_split_exactly() -> None:
    d = convert.duration(1.5, "x")
    assert (d.seconds, d.nanos) == (1, 500_000_000)
    d = convert.duration(0.9999999999, "x")  # rounds up to the next second
    assert (d.seconds, d.nanos) == (1, 0)
    ts = convert.timestamp(datetime(2026, 12, 1, 12, 0, 0, 250_000, tzinfo=timezone.utc), "now")
    assert ts.ToDatetime(tzinfo=timezone.utc) == datetime(
        2026, 12, 1, 12, 0, 0, 250_000, tzinfo=timezone.utc
    )
    with pytest.raises(ValueError, match="non-negative"):
        convert.duration(-1.0, "max_delay")
    with pytest.raises(ValueError, match="finite"):
        convert.timestamp(float("nan"), "deadline")


def test_the_new_kind_is_accepted_by_classify(client: BrokerClient) -> None:
    # A body that broke off is a retryable transport failure: backoff.
    d = client.classify(transport_error=TransportError.BODY_INCOMPLETE)
    assert d.action is Action.RETRY
    assert d.reason is Reason.BACKOFF
    assert d.delay is not None
    assert d.rule == ""


def test_no_grpc_stub_is_generated() -> None:
    # The clients call the RPCs through channel.unary_unary with the codecs
    # in _core, so generate.sh makes no broker_pb2_grpc module.
    assert importlib.util.find_spec("retrybroker._gen.retrybroker.v1.broker_pb2") is not None
    assert importlib.util.find_spec("retrybroker._gen.retrybroker.v1.broker_pb2_grpc") is None
