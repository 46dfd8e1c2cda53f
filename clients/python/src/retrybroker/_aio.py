"""AsyncBrokerClient: the asyncio client of the retry broker (grpc.aio)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

import grpc
import grpc.aio

from . import _convert
from ._client import (
    BASE_CHANNEL_OPTIONS,
    CLASSIFY_METHOD,
    EXECUTE_METHOD,
    Body,
    TLSOption,
    call_metadata,
    channel_credentials,
)
from ._errors import error_from_rpc
from ._gen.retrybroker.v1 import broker_pb2 as pb
from ._retry import RetryEvent, adiscard, http_result_of, response_of_exception, transport_error_from_exception
from ._types import Action, Decision, ExecuteOverrides, ExecuteResult, HeadersInput, HttpResult, TransportError

T = TypeVar("T")


class AsyncBrokerClient:
    """AsyncBrokerClient is BrokerClient for asyncio, on grpc.aio.

    Same arguments and methods as BrokerClient, as coroutines. Create it
    inside a running event loop (grpc.aio binds the channel to it), and use
    ``async with`` or ``await close()``. It never retries an RPC itself.
    """

    def __init__(
        self,
        target: str,
        api_key: str | None = None,
        tls: TLSOption = False,
        default_policy: str | None = None,
        timeout: float | None = None,
        *,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        opts = list(BASE_CHANNEL_OPTIONS) + list(options)
        creds = channel_credentials(tls)
        if creds is None:
            self._channel = grpc.aio.insecure_channel(target, options=opts)
        else:
            self._channel = grpc.aio.secure_channel(target, creds, options=opts)
        self._metadata = call_metadata(api_key)
        self._default_policy = default_policy or ""
        self._timeout = timeout
        self._execute: grpc.aio.UnaryUnaryMultiCallable[pb.ExecuteRequest, pb.ExecuteResponse] = (
            self._channel.unary_unary(
                EXECUTE_METHOD,
                request_serializer=pb.ExecuteRequest.SerializeToString,
                response_deserializer=pb.ExecuteResponse.FromString,
            )
        )
        self._classify: grpc.aio.UnaryUnaryMultiCallable[
            pb.ClassifyResponseRequest, pb.ClassifyResponseResponse
        ] = self._channel.unary_unary(
            CLASSIFY_METHOD,
            request_serializer=pb.ClassifyResponseRequest.SerializeToString,
            response_deserializer=pb.ClassifyResponseResponse.FromString,
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
        """close closes the channel; in-flight calls are cancelled."""
        await self._channel.close(grace=None)

    def _timeout_for(self, timeout: float | None) -> float | None:
        return self._timeout if timeout is None else timeout

    async def execute(
        self,
        method: str,
        url: str,
        headers: HeadersInput = None,
        body: Body = None,
        policy: str | None = None,
        provider: str | None = None,
        timeout: float | None = None,
        *,
        overrides: ExecuteOverrides | None = None,
    ) -> ExecuteResult:
        """execute: see BrokerClient.execute."""
        req = _convert.execute_request(
            method, url, headers, body, policy or self._default_policy, provider, overrides
        )
        try:
            resp = await self._execute(req, timeout=self._timeout_for(timeout), metadata=self._metadata)
        except grpc.RpcError as err:
            raise error_from_rpc(err) from None
        return _convert.execute_result_of(resp)

    async def classify(
        self,
        status: int | None = None,
        headers: HeadersInput = None,
        method: str = "GET",
        attempt: int = 1,
        provider: str | None = None,
        policy: str | None = None,
        now: _convert.TimeInput | None = None,
        body: Body = None,
        transport_error: TransportError | str | None = None,
        request_headers: HeadersInput = None,
        url: str | None = None,
        deadline: _convert.TimeInput | None = None,
        *,
        timeout: float | None = None,
    ) -> Decision:
        """classify: see BrokerClient.classify."""
        req = _convert.classify_request(
            status=status,
            headers=headers,
            method=method,
            attempt=attempt,
            provider=provider,
            policy=policy or self._default_policy,
            now=now,
            body=body,
            transport_error=transport_error,
            request_headers=request_headers,
            url=url,
            deadline=deadline,
        )
        try:
            resp = await self._classify(req, timeout=self._timeout_for(timeout), metadata=self._metadata)
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
        transport_error_of: Callable[[BaseException], TransportError | None] = transport_error_from_exception,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] | None = None,
        on_retry: Callable[[RetryEvent[T]], None] | None = None,
    ) -> T:
        """retry: see BrokerClient.retry; ``fn`` and ``sleep`` are async.

        ``asyncio.CancelledError`` is never classified: it propagates at once.
        """
        read = inspect or http_result_of
        now_fn = clock or time.time
        deadline_at = now_fn() + deadline if deadline is not None else None
        attempt = 1
        while True:
            result: T | None = None
            error: BaseException | None = None
            info: HttpResult | None = None
            kind: TransportError | None = None
            try:
                result = await fn()
                info = read(result)
            except Exception as exc:
                info = response_of_exception(exc)
                if info is None:
                    kind = transport_error_of(exc)
                    if kind is None:
                        raise
                error = exc
            decision = await self.classify(
                status=info.status if info is not None else None,
                headers=info.headers if info is not None else None,
                body=info.body if info is not None else None,
                transport_error=kind,
                method=method,
                attempt=attempt,
                provider=provider,
                policy=policy,
                now=clock() if clock is not None else None,
                request_headers=request_headers,
                url=url,
                deadline=deadline_at,
            )
            if decision.action is not Action.RETRY:
                if error is not None:
                    raise error
                return cast(T, result)
            if on_retry is not None:
                on_retry(RetryEvent(attempt=attempt, decision=decision, result=result, error=error))
            elif result is not None:
                await adiscard(result)
            await sleep(decision.delay or 0.0)
            attempt += 1
