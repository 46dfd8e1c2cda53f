"""AsyncBrokerClient against the same real broker."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from retrybroker import Action, AsyncBrokerClient, InvalidArgumentError, Outcome, Reason

from .conftest import BrokerProcess, Reply, Upstream


@pytest_asyncio.fixture
async def aclient(broker: BrokerProcess) -> AsyncIterator[AsyncBrokerClient]:
    async with AsyncBrokerClient(broker.target, timeout=10) as c:
        yield c


@pytest.mark.asyncio
async def test_async_classify(aclient: AsyncBrokerClient) -> None:
    d = await aclient.classify(status=429, headers=[("Retry-After", "7")])
    assert d.action is Action.RETRY
    assert d.reason is Reason.SERVER_HINT
    assert d.delay == 7.0
    assert d.hint_source == "retry-after"


@pytest.mark.asyncio
async def test_async_execute(aclient: AsyncBrokerClient, upstream: Upstream) -> None:
    upstream.script(Reply(503, [("Retry-After", "0")]), Reply(200, [], b"async ok"))
    r = await aclient.execute("GET", upstream.url + "/async", timeout=20)
    assert r.status == 200
    assert r.body == b"async ok"
    assert r.outcome is Outcome.SUCCESS
    assert len(r.attempts) == 2
    assert len(upstream.requests) == 2


@pytest.mark.asyncio
async def test_async_invalid_argument(aclient: AsyncBrokerClient) -> None:
    with pytest.raises(InvalidArgumentError) as ei:
        await aclient.classify(status=700)
    assert [v.field for v in ei.value.field_violations] == ["status_code"]


@pytest.mark.asyncio
async def test_async_retry_with_fake_sleep(aclient: AsyncBrokerClient) -> None:
    sleeps: list[float] = []
    replies = [(503, [("Retry-After", "3")]), (200, [])]

    async def fake_sleep(s: float) -> None:
        sleeps.append(s)

    async def fn() -> tuple[int, list[tuple[str, str]]]:
        return replies.pop(0)

    assert await aclient.retry(fn, sleep=fake_sleep) == (200, [])
    assert sleeps == [3.0]


@pytest.mark.asyncio
async def test_async_retry_maps_errors_and_closes_discarded_responses(
    aclient: AsyncBrokerClient,
) -> None:
    class Resp:  # shaped like an httpx response
        def __init__(self, status: int) -> None:
            self.status_code = status
            self.headers = {"Retry-After": "0"}
            self.closed = False

        async def aclose(self) -> None:
            self.closed = True

    sleeps: list[float] = []
    first, last = Resp(503), Resp(200)
    script: list[object] = [ConnectionResetError(), first, last]

    async def fake_sleep(s: float) -> None:
        sleeps.append(s)

    async def fn() -> Resp:
        r = script.pop(0)
        if isinstance(r, BaseException):
            raise r
        assert isinstance(r, Resp)
        return r

    assert await aclient.retry(fn, sleep=fake_sleep) is last
    assert first.closed
    assert not last.closed
    assert len(sleeps) == 2
    assert 0.0 <= sleeps[0] <= 1.0  # backoff after the reset
    assert sleeps[1] == 0.0  # the 503's Retry-After: 0


@pytest.mark.asyncio
async def test_async_retry_propagates_other_exceptions(aclient: AsyncBrokerClient) -> None:
    async def fn() -> None:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        await aclient.retry(fn)
