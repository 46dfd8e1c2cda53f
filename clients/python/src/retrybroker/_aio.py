"""AsyncBrokerClient: the asyncio client of the retry broker (grpc.aio)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

import grpc
import grpc.aio

from . import _convert
from ._client import RETRY_TASK_ERRORS
from ._core import (
    CANCEL_TASK,
    CLASSIFY,
    CREATE_TASK,
    EXECUTE,
    EXECUTE_STREAM,
    GET_TASK,
    LIST_TASKS,
    RETRY_TASK,
    WATCH_TASK,
    ClientCore,
    RetryLoopState,
    Rpc,
    StreamState,
    TLSOption,
    channel_credentials,
    channel_options,
)
from ._errors import BrokerError, error_from_rpc
from ._gen.retrybroker.v1 import broker_pb2 as pb
from ._retry import RetryEvent, adiscard, http_result_of, transport_error_from_exception
from ._stream import EOF, AsyncStreamResponse, cancel
from ._types import (
    Decision,
    ExecuteOverrides,
    ExecuteResult,
    HeadersInput,
    HttpResult,
    Task,
    TaskPage,
    TaskState,
    TransportError,
)

T = TypeVar("T")
Req = TypeVar("Req")
Resp = TypeVar("Resp")


class AsyncBrokerClient:
    """An asyncio client of the retry broker, over grpc.aio.

    The same arguments and methods as BrokerClient, as coroutines: both are
    thin shells around one core (``retrybroker._core``). Create it inside a
    running event loop (grpc.aio binds the channel to it), and use ``async
    with`` or ``await close()``. Every argument after ``target`` is
    keyword-only. It never retries an RPC itself.
    """

    def __init__(
        self,
        target: str,
        *,
        api_key: str | None = None,
        tls: TLSOption = False,
        default_policy: str | None = None,
        timeout: float | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        opts = channel_options(options)
        creds = channel_credentials(tls)
        if creds is None:
            self._channel = grpc.aio.insecure_channel(target, options=opts)
        else:
            self._channel = grpc.aio.secure_channel(target, creds, options=opts)
        self._core = ClientCore.of(api_key=api_key, default_policy=default_policy, timeout=timeout)
        self._execute: grpc.aio.UnaryUnaryMultiCallable[pb.ExecuteRequest, pb.ExecuteResponse] = (
            self._channel.unary_unary(
                EXECUTE.path,
                request_serializer=EXECUTE.serialize,
                response_deserializer=EXECUTE.deserialize,
            )
        )
        self._execute_stream: grpc.aio.UnaryStreamMultiCallable[
            pb.ExecuteRequest, pb.ExecuteStreamResponse
        ] = self._channel.unary_stream(
            EXECUTE_STREAM.path,
            request_serializer=EXECUTE_STREAM.serialize,
            response_deserializer=EXECUTE_STREAM.deserialize,
        )
        self._classify: grpc.aio.UnaryUnaryMultiCallable[
            pb.ClassifyResponseRequest, pb.ClassifyResponseResponse
        ] = self._channel.unary_unary(
            CLASSIFY.path,
            request_serializer=CLASSIFY.serialize,
            response_deserializer=CLASSIFY.deserialize,
        )
        self._create_task = self._unary_unary(CREATE_TASK)
        self._get_task = self._unary_unary(GET_TASK)
        self._list_tasks = self._unary_unary(LIST_TASKS)
        self._cancel_task = self._unary_unary(CANCEL_TASK)
        self._retry_task = self._unary_unary(RETRY_TASK)
        self._watch_task: grpc.aio.UnaryStreamMultiCallable[pb.WatchTaskRequest, pb.Task] = (
            self._channel.unary_stream(
                WATCH_TASK.path,
                request_serializer=WATCH_TASK.serialize,
                response_deserializer=WATCH_TASK.deserialize,
            )
        )

    def _unary_unary(self, rpc: Rpc[Req, Resp]) -> grpc.aio.UnaryUnaryMultiCallable[Req, Resp]:
        return self._channel.unary_unary(
            rpc.path, request_serializer=rpc.serialize, response_deserializer=rpc.deserialize
        )

    async def _call(
        self,
        method: grpc.aio.UnaryUnaryMultiCallable[Req, Resp],
        req: Req,
        timeout: float | None,
        by_code: Mapping[grpc.StatusCode, type[BrokerError]] | None = None,
    ) -> Resp:
        try:
            return await method(
                req, timeout=self._core.timeout_for(timeout), metadata=self._core.metadata
            )
        except grpc.RpcError as err:
            raise error_from_rpc(err, by_code) from None

    async def __aenter__(self) -> AsyncBrokerClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel; calls in flight are cancelled."""
        await self._channel.close(grace=None)

    async def execute(
        self,
        method: str,
        url: str,
        *,
        headers: HeadersInput = None,
        body: _convert.Body = None,
        policy: str | None = None,
        provider: str | None = None,
        overrides: ExecuteOverrides | None = None,
        timeout: float | None = None,
    ) -> ExecuteResult:
        """Have the broker send an HTTP request, retrying it by policy.

        The same as BrokerClient.execute, awaited.
        """
        req = self._core.execute_request(
            method,
            url,
            headers=headers,
            body=body,
            policy=policy,
            provider=provider,
            overrides=overrides,
        )
        try:
            resp = await self._execute(
                req, timeout=self._core.timeout_for(timeout), metadata=self._core.metadata
            )
        except grpc.RpcError as err:
            raise error_from_rpc(err) from None
        return _convert.execute_result_of(resp)

    async def execute_stream(
        self,
        method: str,
        url: str,
        *,
        headers: HeadersInput = None,
        body: _convert.Body = None,
        policy: str | None = None,
        provider: str | None = None,
        overrides: ExecuteOverrides | None = None,
        timeout: float | None = None,
    ) -> AsyncStreamResponse:
        """Have the broker send an HTTP request as execute does, and stream its response.

        The same as BrokerClient.execute_stream, awaited: ``async for chunk
        in response``, ``await response.aclose()``.
        """
        req = self._core.execute_request(
            method,
            url,
            headers=headers,
            body=body,
            policy=policy,
            provider=provider,
            overrides=overrides,
        )
        call = self._execute_stream(
            req, timeout=self._core.timeout_for(timeout), metadata=self._core.metadata
        )
        state = StreamState()
        try:
            first = await call.read()
        except grpc.RpcError as err:
            raise error_from_rpc(err) from None
        except BaseException:
            cancel(call)
            raise
        state.start(None if first is EOF else cast(pb.ExecuteStreamResponse, first))
        return AsyncStreamResponse(call, state)

    async def classify(
        self,
        status: int | None = None,
        headers: HeadersInput = None,
        *,
        body: _convert.Body = None,
        transport_error: TransportError | str | None = None,
        method: str = "GET",
        attempt: int = 1,
        url: str | None = None,
        request_headers: HeadersInput = None,
        provider: str | None = None,
        policy: str | None = None,
        now: _convert.TimeInput | None = None,
        deadline: _convert.TimeInput | None = None,
        timeout: float | None = None,
    ) -> Decision:
        """Ask the broker what to do about a response you got yourself.

        The same as BrokerClient.classify, awaited.
        """
        req = self._core.classify_request(
            status=status,
            headers=headers,
            body=body,
            transport_error=transport_error,
            method=method,
            attempt=attempt,
            url=url,
            request_headers=request_headers,
            provider=provider,
            policy=policy,
            now=now,
            deadline=deadline,
        )
        return await self._classify_request(req, timeout)

    async def _classify_request(
        self, req: pb.ClassifyResponseRequest, timeout: float | None
    ) -> Decision:
        try:
            resp = await self._classify(
                req, timeout=self._core.timeout_for(timeout), metadata=self._core.metadata
            )
        except grpc.RpcError as err:
            raise error_from_rpc(err) from None
        return _convert.decision_of(resp.decision)

    async def retry(
        self,
        fn: Callable[[], Awaitable[T]],
        *,
        method: str = "GET",
        url: str | None = None,
        request_headers: HeadersInput = None,
        provider: str | None = None,
        policy: str | None = None,
        deadline: float | None = None,
        inspect: Callable[[T], HttpResult] | None = None,
        transport_error_of: Callable[
            [BaseException], TransportError | None
        ] = transport_error_from_exception,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] | None = None,
        on_retry: Callable[[RetryEvent[T]], None] | None = None,
    ) -> T:
        """Call ``fn`` until the broker's rules say stop.

        The same as BrokerClient.retry, with an async ``fn`` and an async
        ``sleep`` (default ``asyncio.sleep``). A response about to be
        retried is closed with ``aclose()`` (or an awaited ``close()``).
        ``asyncio.CancelledError`` is never classified: it propagates at once.
        """
        state: RetryLoopState[T] = RetryLoopState(
            self._core,
            method=method,
            url=url,
            request_headers=request_headers,
            provider=provider,
            policy=policy,
            deadline=deadline,
            inspect=inspect or http_result_of,
            transport_error_of=transport_error_of,
            clock=clock,
        )
        while True:
            try:
                state.record_result(await fn())
            except Exception as exc:
                if not state.record_error(exc):
                    raise
            step = state.next_step(await self._classify_request(state.classify_request(), None))
            if step is None:
                return state.finish()
            if on_retry is not None:
                on_retry(step.event)
            elif step.event.result is not None:
                await adiscard(step.event.result)
            await sleep(step.delay)

    async def create_task(
        self,
        method: str,
        url: str,
        *,
        headers: HeadersInput = None,
        body: _convert.Body = None,
        policy: str | None = None,
        provider: str | None = None,
        overrides: ExecuteOverrides | None = None,
        task_id: str | None = None,
        not_before: _convert.TimeInput | None = None,
        give_up_after: _convert.TimeInput | None = None,
        timeout: float | None = None,
    ) -> Task:
        """Hand an HTTP request to the broker as a task.

        The same as BrokerClient.create_task, awaited.
        """
        execute = self._core.execute_request(
            method,
            url,
            headers=headers,
            body=body,
            policy=policy,
            provider=provider,
            overrides=overrides,
        )
        req = _convert.create_task_request(
            execute, task_id=task_id, not_before=not_before, give_up_after=give_up_after
        )
        return _convert.task_of(await self._call(self._create_task, req, timeout))

    async def get_task(self, task_id: str, *, timeout: float | None = None) -> Task:
        """Return the caller's task; the same as BrokerClient.get_task, awaited."""
        req = pb.GetTaskRequest(task_id=task_id)
        return _convert.task_of(await self._call(self._get_task, req, timeout))

    async def cancel_task(self, task_id: str, *, timeout: float | None = None) -> Task:
        """Cancel the caller's task; the same as BrokerClient.cancel_task, awaited."""
        req = pb.CancelTaskRequest(task_id=task_id)
        return _convert.task_of(await self._call(self._cancel_task, req, timeout))

    async def retry_task(self, task_id: str, *, timeout: float | None = None) -> Task:
        """Schedule a FAILED task again; the same as BrokerClient.retry_task, awaited."""
        req = pb.RetryTaskRequest(task_id=task_id)
        return _convert.task_of(await self._call(self._retry_task, req, timeout, RETRY_TASK_ERRORS))

    async def list_tasks_page(
        self,
        *,
        state: TaskState | str | None = None,
        page_size: int | None = None,
        page_token: str = "",
        timeout: float | None = None,
    ) -> TaskPage:
        """Return one page of tasks; the same as BrokerClient.list_tasks_page, awaited."""
        req = _convert.list_tasks_request(state=state, page_size=page_size, page_token=page_token)
        return _convert.task_page_of(await self._call(self._list_tasks, req, timeout))

    async def list_tasks(
        self,
        *,
        state: TaskState | str | None = None,
        page_size: int | None = None,
        timeout: float | None = None,
    ) -> AsyncGenerator[Task, None]:
        """Iterate over the caller's tasks: ``async for task in client.list_tasks(...)``.

        The same as BrokerClient.list_tasks, as an async generator.
        """
        token = ""
        while True:
            page = await self.list_tasks_page(
                state=state, page_size=page_size, page_token=token, timeout=timeout
            )
            for t in page.tasks:
                yield t
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def watch_task(
        self, task_id: str, *, timeout: float | None = None
    ) -> AsyncGenerator[Task, None]:
        """Yield the task now and on every change: ``async for task in client.watch_task(id)``.

        The same as BrokerClient.watch_task, as an async generator; closing
        it (``aclose()``, or leaving an ``async for`` over it) cancels the
        stream.
        """
        call = self._watch_task(
            pb.WatchTaskRequest(task_id=task_id),
            timeout=self._core.timeout_for(timeout),
            metadata=self._core.metadata,
        )
        try:
            async for t in call:
                yield _convert.task_of(t)
        except grpc.RpcError as err:
            raise error_from_rpc(err) from None
        finally:
            cancel(call)
