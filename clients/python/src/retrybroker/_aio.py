"""AsyncBrokerClient: the asyncio client of the retry broker (grpc.aio)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

import grpc
import grpc.aio

from . import _convert
from ._core import (
    CLASSIFY,
    EXECUTE,
    EXECUTE_STREAM,
    ClientCore,
    RetryLoopState,
    StreamState,
    TLSOption,
    channel_credentials,
    channel_options,
)
from ._errors import error_from_rpc
from ._gen.retrybroker.v1 import broker_pb2 as pb
from ._retry import RetryEvent, adiscard, http_result_of, transport_error_from_exception
from ._stream import EOF, AsyncStreamResponse, cancel
from ._types import (
    Decision,
    ExecuteOverrides,
    ExecuteResult,
    HeadersInput,
    HttpResult,
    TransportError,
)

T = TypeVar("T")


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
