"""The core shared by both clients: deadlines on time.monotonic, the retry state, the API shape."""

from __future__ import annotations

import inspect
import urllib.error
from collections.abc import Callable
from email.message import Message
from typing import Any

import pytest

from retrybroker import (
    Action,
    AsyncBrokerClient,
    BrokerClient,
    Decision,
    HttpResult,
    Reason,
    http_result_of,
    transport_error_from_exception,
)
from retrybroker._core import ClientCore, Deadline, RetryLoopState
from retrybroker._gen.retrybroker.v1 import broker_pb2 as pb


class Clocks:
    """A monotonic clock and a wall clock that tests move separately."""

    def __init__(self) -> None:
        self.mono = 500.0  # seconds since some boot
        self.wall = 1_800_000_000.0  # Unix seconds

    def elapse(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += seconds


def _state(
    clocks: Clocks, *, deadline: float | None, clock: Callable[[], float] | None = None
) -> RetryLoopState[Any]:
    return RetryLoopState(
        ClientCore.of(api_key="k", default_policy="standard", timeout=3.0),
        method="GET",
        url="http://127.0.0.1:1/x",
        request_headers=None,
        provider=None,
        policy=None,
        deadline=deadline,
        inspect=http_result_of,
        transport_error_of=transport_error_from_exception,
        clock=clock,
        monotonic=lambda: clocks.mono,
        wall=lambda: clocks.wall,
    )


def _unix(ts: Any) -> float:
    return float(ts.seconds + ts.nanos / 1e9)


def test_the_deadline_is_kept_on_the_monotonic_clock() -> None:
    clocks = Clocks()
    state = _state(clocks, deadline=10.0)
    clocks.elapse(4.0)  # the first attempt took 4 s ...
    clocks.wall -= 3600.0  # ... and NTP stepped the wall clock back an hour
    state.record_result((503, []))
    req = state.classify_request()
    # 6 s are left, whatever the wall clock did: sent as wall now + 6 s.
    assert _unix(req.deadline) == pytest.approx(clocks.wall + 6.0, abs=1e-6)
    assert not req.HasField("now")  # without a fake clock the broker's clock reads hints

    clocks.wall += 7200.0  # and forward again: still not a second lost
    assert _unix(state.classify_request().deadline) == pytest.approx(clocks.wall + 6.0, abs=1e-6)


def test_a_fake_clock_sets_the_deadline_and_now() -> None:
    clocks = Clocks()
    fake = [1_900_000_000.0]
    state = _state(clocks, deadline=8.0, clock=lambda: fake[0])
    fake[0] += 5.0
    state.record_result((503, [("Retry-After", "5")]))
    req = state.classify_request()
    assert _unix(req.deadline) == 1_900_000_008.0
    assert _unix(req.now) == 1_900_000_005.0


def test_no_deadline_sends_none() -> None:
    state = _state(Clocks(), deadline=None)
    state.record_result((200, []))
    assert not state.classify_request().HasField("deadline")


def test_deadline_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="deadline"):
        _state(Clocks(), deadline=-1.0)
    with pytest.raises(ValueError, match="deadline"):
        _state(Clocks(), deadline=float("nan"))


def test_deadline_remaining() -> None:
    now = [10.0]
    d = Deadline.after(2.5, lambda: now[0])
    assert d.remaining() == 2.5
    now[0] = 13.0
    assert d.remaining() == -0.5
    assert d.unix(1000.0) == 999.5


def _retry(delay: float) -> Decision:
    return Decision(Action.RETRY, delay, "retry-after", delay, Reason.SERVER_HINT)


def _stop() -> Decision:
    return Decision(Action.DO_NOT_RETRY, None, "", None, Reason.ATTEMPTS_EXHAUSTED)


def test_retry_state_walks_the_attempts() -> None:
    state = _state(Clocks(), deadline=None)
    state.record_result((503, [("Retry-After", "2")], b"busy"))
    req = state.classify_request()
    assert (req.attempt, req.status_code, req.body) == (1, 503, b"busy")
    assert req.policy == "standard"  # the client's default policy
    assert req.url == "http://127.0.0.1:1/x"
    step = state.next_step(_retry(2.0))
    assert step is not None
    assert step.delay == 2.0
    assert step.event.attempt == 1
    assert step.event.result == (503, [("Retry-After", "2")], b"busy")
    assert step.event.error is None

    boom = ConnectionResetError("reset")
    assert state.record_error(boom)
    req = state.classify_request()
    assert req.attempt == 2
    assert req.status_code == 0
    assert req.transport_error == pb.TRANSPORT_ERROR_CONNECTION_RESET
    assert state.next_step(_stop()) is None
    with pytest.raises(ConnectionResetError) as ei:
        state.finish()
    assert ei.value is boom


def test_retry_state_refuses_what_is_not_a_transport_failure() -> None:
    state = _state(Clocks(), deadline=None)
    assert not state.record_error(KeyError("bug"))


def test_retry_state_classifies_an_http_error_by_its_status() -> None:
    state = _state(Clocks(), deadline=None)
    headers = Message()
    headers["Retry-After"] = "3"
    err = urllib.error.HTTPError("http://127.0.0.1:1/x", 429, "Too Many Requests", headers, None)
    assert state.record_error(err)
    req = state.classify_request()
    assert req.status_code == 429
    assert [(h.name, h.value) for h in req.headers] == [("Retry-After", "3")]
    assert req.transport_error == pb.TRANSPORT_ERROR_UNSPECIFIED
    err.close()


def test_retry_state_returns_the_last_result() -> None:
    state = _state(Clocks(), deadline=None)
    state.record_result(HttpResult(200))
    assert state.next_step(_stop()) is None
    assert state.finish() == HttpResult(200)


def _shape(fn: Callable[..., Any]) -> list[tuple[str, inspect._ParameterKind]]:
    return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("cls", [BrokerClient, AsyncBrokerClient])
@pytest.mark.parametrize(
    ("method", "positional"),
    [
        ("__init__", ["self", "target"]),
        ("execute", ["self", "method", "url"]),
        ("classify", ["self", "status", "headers"]),
        ("retry", ["self", "fn"]),
    ],
)
def test_only_the_first_few_parameters_are_positional(
    cls: type[Any], method: str, positional: list[str]
) -> None:
    shape = _shape(getattr(cls, method))
    assert [n for n, k in shape if k is inspect.Parameter.POSITIONAL_OR_KEYWORD] == positional
    assert all(k is inspect.Parameter.KEYWORD_ONLY for n, k in shape if n not in positional), shape


@pytest.mark.parametrize("method", ["__init__", "execute", "classify", "retry"])
def test_sync_and_async_clients_take_the_same_arguments(method: str) -> None:
    assert _shape(getattr(BrokerClient, method)) == _shape(getattr(AsyncBrokerClient, method))


def test_positional_options_are_refused() -> None:
    with pytest.raises(TypeError):
        BrokerClient("127.0.0.1:1", "key")  # type: ignore[call-arg]
    with BrokerClient("127.0.0.1:1") as c, pytest.raises(TypeError):
        c.execute("GET", "http://127.0.0.1:1/", [("A", "1")])  # type: ignore[call-arg]
