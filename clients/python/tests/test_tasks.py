"""Tasks through a real broker with --tasks-sqlite to a local HTTP upstream."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from retrybroker import (
    Action,
    AsyncBrokerClient,
    BrokerClient,
    BrokerError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    Outcome,
    Task,
    TaskState,
    UnknownPolicyError,
)

from .conftest import BrokerProcess, Reply, Upstream

#: Generous: a task is dispatched up to about 5 s after it is due (River's
#: scheduler), and the machine may be loaded.
WATCH_TIMEOUT = 90.0


@pytest.fixture
def tasks_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """Run a broker with task storage in a SQLite file under the test's tmp_path."""
    b = BrokerProcess(
        ["--allow-destinations", "127.0.0.1/32", "--tasks-sqlite", str(tmp_path / "tasks.db")]
    )
    yield b
    b.stop()


@pytest.fixture
def tc(tasks_broker: BrokerProcess) -> Iterator[BrokerClient]:
    with BrokerClient(tasks_broker.target, timeout=10.0) as c:
        yield c


def watch_all(c: BrokerClient, task_id: str) -> list[Task]:
    seen = list(c.watch_task(task_id, timeout=WATCH_TIMEOUT))
    assert seen, "watch_task yielded nothing"
    assert {t.task_id for t in seen} == {task_id}
    assert all(not t.state.is_final for t in seen[:-1]), [t.state for t in seen]
    return seen


def future() -> datetime:
    return datetime.now(timezone.utc) + timedelta(hours=1)


def test_post_task_retried_to_succeeded_with_one_idempotency_key(
    tc: BrokerClient, upstream: Upstream
) -> None:
    upstream.script(Reply(503, [("Retry-After", "0")], b"busy"), Reply(201, [], b"created"))
    created = tc.create_task(
        "POST",
        upstream.url + "/orders",
        headers={"Content-Type": "application/json"},
        body='{"qty": 1}',
        task_id="post-1",
    )
    assert created.task_id == "post-1"
    assert created.state is TaskState.SCHEDULED
    assert created.idempotency_key
    assert created.outcome is Outcome.UNSPECIFIED
    assert created.create_time is not None
    assert created.next_run_time is not None
    assert created.response is None

    seen = watch_all(tc, "post-1")
    final = seen[-1]
    assert final.state is TaskState.SUCCEEDED
    assert final.state.is_final
    assert final.outcome is Outcome.SUCCESS
    assert final.next_run_time is None
    assert final.idempotency_key == created.idempotency_key
    assert [a.status for a in final.attempts] == [503, 201]
    assert final.attempts[0].decision is not None
    assert final.attempts[0].decision.action is Action.RETRY
    assert final.response is not None
    assert final.response.status == 201
    assert final.response.body == b"created"
    assert final.response.header("content-length") == "7"

    assert len(upstream.requests) == 2
    for method, path, headers, body in upstream.requests:
        assert method == "POST"
        assert path == "/orders"
        assert body == b'{"qty": 1}'
        keys = [v for n, v in headers if n.lower() == "idempotency-key"]
        assert keys == [created.idempotency_key]

    got = tc.get_task("post-1")
    assert got.state is TaskState.SUCCEEDED
    assert len(got.attempts) == 2


def test_task_id_deduplicates_creation(tc: BrokerClient) -> None:
    nb = future()
    first = tc.create_task("GET", "http://127.0.0.1:1/a", task_id="dedup", not_before=nb)
    again = tc.create_task(
        "POST",
        "http://127.0.0.1:1/b",
        headers={"Idempotency-Key": "another-key"},
        task_id="dedup",
    )
    assert first.not_before is not None
    assert abs((first.not_before - nb).total_seconds()) < 0.001
    assert again.idempotency_key == first.idempotency_key
    assert again.idempotency_key != "another-key"
    assert again.create_time == first.create_time
    assert again.not_before == first.not_before
    assert again.state is TaskState.SCHEDULED
    assert [t.task_id for t in tc.list_tasks()] == ["dedup"]


def test_cancel_a_task_whose_not_before_is_in_the_future(
    tc: BrokerClient, upstream: Upstream
) -> None:
    upstream.script(Reply(200))
    nb = future()
    created = tc.create_task(
        "GET",
        upstream.url + "/later",
        task_id="later",
        not_before=nb,
        give_up_after=nb.timestamp() + 3600,  # Unix seconds work too
    )
    assert created.state is TaskState.SCHEDULED
    assert created.next_run_time is not None
    assert abs((created.next_run_time - nb).total_seconds()) < 0.001
    assert created.give_up_after is not None
    assert abs((created.give_up_after - nb).total_seconds() - 3600) < 0.001

    cancelled = tc.cancel_task("later")
    assert cancelled.state is TaskState.CANCELLED
    assert cancelled.next_run_time is None
    assert cancelled.attempts == []
    again = tc.cancel_task("later")  # a final task comes back unchanged
    assert again.state is TaskState.CANCELLED
    assert again.update_time == cancelled.update_time
    assert [t.state for t in tc.watch_task("later")] == [TaskState.CANCELLED]
    with pytest.raises(FailedPreconditionError) as ei:
        tc.retry_task("later")
    assert not isinstance(ei.value, UnknownPolicyError)
    assert ei.value.code is grpc.StatusCode.FAILED_PRECONDITION
    assert upstream.requests == []


def test_list_tasks_by_state_paged(tc: BrokerClient) -> None:
    nb = future()
    ids = [f"list-{i}" for i in range(5)]
    for i in ids:
        tc.create_task("GET", "http://127.0.0.1:1/", task_id=i, not_before=nb)
    tc.create_task("GET", "http://127.0.0.1:1/", task_id="gone", not_before=nb)
    tc.cancel_task("gone")

    listed = list(tc.list_tasks(state=TaskState.SCHEDULED, page_size=2))
    assert [t.task_id for t in listed] == ids  # oldest first, across 3 pages
    assert all(t.state is TaskState.SCHEDULED for t in listed)
    assert [t.task_id for t in tc.list_tasks(state="cancelled")] == ["gone"]
    assert [t.task_id for t in tc.list_tasks()] == [*ids, "gone"]

    sizes = []
    token = ""
    while True:
        page = tc.list_tasks_page(state="TASK_STATE_SCHEDULED", page_size=2, page_token=token)
        sizes.append(len(page.tasks))
        if not page.next_page_token:
            break
        token = page.next_page_token
    assert sizes == [2, 2, 1]

    # A generator: it fetches a page only when the loop reaches it.
    it = tc.list_tasks(state=TaskState.SCHEDULED, page_size=2)
    assert next(it).task_id == "list-0"
    it.close()

    # A watch of a task due in an hour can be closed after its first task.
    w = tc.watch_task("list-0", timeout=WATCH_TIMEOUT)
    assert next(w).state is TaskState.SCHEDULED
    w.close()

    with pytest.raises(InvalidArgumentError) as ei:
        tc.list_tasks_page(page_token="not-a-token")
    assert "page_token" in ei.value.message
    with pytest.raises(ValueError, match="unknown task state"):
        tc.list_tasks_page(state="asleep")


def test_retry_task_runs_a_failed_task_again(tc: BrokerClient, upstream: Upstream) -> None:
    upstream.script(Reply(400, [], b"bad"), Reply(200, [], b"fine"))
    created = tc.create_task("GET", upstream.url + "/flaky", task_id="retry-me")
    failed = watch_all(tc, "retry-me")[-1]
    assert failed.state is TaskState.FAILED
    assert failed.outcome is Outcome.NOT_RETRYABLE
    assert failed.response is not None
    assert failed.response.status == 400
    assert len(failed.attempts) == 1

    retried = tc.retry_task("retry-me")
    assert retried.state is TaskState.SCHEDULED
    assert retried.idempotency_key == created.idempotency_key
    done = watch_all(tc, "retry-me")[-1]
    assert done.state is TaskState.SUCCEEDED
    assert done.response is not None
    assert done.response.text() == "fine"
    assert len(done.attempts) == 2
    assert len(upstream.requests) == 2
    with pytest.raises(FailedPreconditionError):
        tc.retry_task("retry-me")


def test_unknown_task_is_not_found(tc: BrokerClient) -> None:
    for op in (tc.get_task, tc.cancel_task, tc.retry_task):
        with pytest.raises(NotFoundError) as ei:
            op("nope")
        assert ei.value.code is grpc.StatusCode.NOT_FOUND
        assert ei.value.code_name == "NOT_FOUND"
    with pytest.raises(NotFoundError):
        list(tc.watch_task("nope"))


def test_sensitive_header_is_refused(tc: BrokerClient) -> None:
    with pytest.raises(InvalidArgumentError) as ei:
        tc.create_task("GET", "http://127.0.0.1:1/", headers={"Authorization": "Bearer s3cret"})
    assert len(ei.value.field_violations) == 1
    assert "broker-held credential" in ei.value.field_violations[0].description
    assert "s3cret" not in str(ei.value)


def test_tasks_unimplemented_without_storage(client: BrokerClient) -> None:
    with pytest.raises(BrokerError) as ei:
        client.get_task("x")
    assert ei.value.code is grpc.StatusCode.UNIMPLEMENTED
    assert "--tasks-sqlite" in ei.value.message


@pytest_asyncio.fixture
async def atc(tasks_broker: BrokerProcess) -> AsyncIterator[AsyncBrokerClient]:
    async with AsyncBrokerClient(tasks_broker.target, timeout=10) as c:
        yield c


@pytest.mark.asyncio
async def test_async_tasks(atc: AsyncBrokerClient, upstream: Upstream) -> None:
    upstream.script(Reply(503, [("Retry-After", "0")]), Reply(200, [], b"async ok"))
    t0 = time.monotonic()
    created = await atc.create_task("POST", upstream.url + "/a", task_id="a-1")
    seen = [t async for t in atc.watch_task("a-1", timeout=WATCH_TIMEOUT)]
    final = seen[-1]
    assert final.state is TaskState.SUCCEEDED, [t.state for t in seen]
    assert [a.status for a in final.attempts] == [503, 200]
    assert final.response is not None
    assert final.response.body == b"async ok"
    keys = [[v for n, v in h if n.lower() == "idempotency-key"] for _, _, h, _ in upstream.requests]
    assert keys == [[created.idempotency_key], [created.idempotency_key]]
    assert time.monotonic() - t0 < WATCH_TIMEOUT

    later = datetime.now(timezone.utc) + timedelta(hours=1)
    for i in range(3):
        await atc.create_task("GET", "http://127.0.0.1:1/", task_id=f"s-{i}", not_before=later)
    listed = [t.task_id async for t in atc.list_tasks(state=TaskState.SCHEDULED, page_size=2)]
    assert listed == ["s-0", "s-1", "s-2"]
    page = await atc.list_tasks_page(page_size=1)
    assert [t.task_id for t in page.tasks] == ["a-1"]
    assert page.next_page_token

    cancelled = await atc.cancel_task("s-0")
    assert cancelled.state is TaskState.CANCELLED
    assert (await atc.get_task("s-1")).state is TaskState.SCHEDULED
    with pytest.raises(NotFoundError):
        await atc.get_task("nope")
    with pytest.raises(NotFoundError):
        _ = [t async for t in atc.watch_task("nope")]
    with pytest.raises(FailedPreconditionError):
        await atc.retry_task("a-1")
