"""httpx transports that send every request through the broker's ExecuteStream.

Existing httpx code routes through the broker with one line::

    client = httpx.Client(transport=BrokerTransport(BrokerClient("127.0.0.1:50051")))
    client = httpx.AsyncClient(transport=AsyncBrokerTransport(AsyncBrokerClient(...)))

The broker retries by the tenant's policy; the response body streams as the
upstream sends it (``client.stream(...)``, ``response.iter_bytes()``,
``iter_lines()`` for server-sent events). Requires ``httpx``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx

from ._aio import AsyncBrokerClient
from ._client import BrokerClient
from ._core import forwarded_headers
from ._errors import BodyIncompleteError, NoResponseError
from ._stream import AsyncStreamResponse, StreamResponse
from ._types import ExecuteOverrides, StreamResult, TransportError

#: The key of ``response.extensions`` that holds the broker's
#: StreamResponse (``.attempts`` now, ``.result`` once the body was read).
EXTENSION = "retrybroker"


def _no_response(result: StreamResult | None, request: httpx.Request) -> httpx.TransportError:
    """Return the httpx error of a call that ended without a final response."""
    last = result.attempts[-1] if result and result.attempts else None
    kind = last.transport_error if last else None
    why = (
        f"{kind}: {last.error_message}" if last and kind else str(result.outcome if result else "")
    )
    msg = f"no response through the retry broker ({why})"
    err: httpx.TransportError
    if kind is TransportError.TIMEOUT:
        err = httpx.ReadTimeout(msg, request=request)
    else:
        err = httpx.ConnectError(msg, request=request)
    if result is not None:
        err.__cause__ = NoResponseError(msg, result)
    return err


def _incomplete(e: BodyIncompleteError, request: httpx.Request) -> httpx.RemoteProtocolError:
    err = httpx.RemoteProtocolError(str(e), request=request)
    err.__cause__ = e
    return err


class _Body(httpx.SyncByteStream):
    def __init__(self, resp: StreamResponse, request: httpx.Request) -> None:
        self._resp = resp
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._resp.iter_bytes()
        except BodyIncompleteError as e:
            raise _incomplete(e, self._request) from e

    def close(self) -> None:
        self._resp.close()


class _AsyncBody(httpx.AsyncByteStream):
    def __init__(self, resp: AsyncStreamResponse, request: httpx.Request) -> None:
        self._resp = resp
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._resp.aiter_bytes():
                yield chunk
        except BodyIncompleteError as e:
            raise _incomplete(e, self._request) from e

    async def aclose(self) -> None:
        await self._resp.aclose()


class BrokerTransport(httpx.BaseTransport):
    """An ``httpx.BaseTransport`` that sends each request through the broker.

    Args:
        client: the BrokerClient to send through (not closed by this transport).
        policy: the tenant's policy for every request (default: the client's).
        provider: hint reader override for every request.
        overrides: narrow the policy for every request.
        timeout: deadline in seconds of each call, body included (default:
            the client's). httpx's own per-operation timeouts do not apply:
            the broker's policy bounds the attempts and the body.

    Every argument after ``client`` is keyword-only. The final response comes
    back whatever its status (the retries happened in the broker). A call
    that ended without one raises ``httpx.ConnectError`` (``httpx.ReadTimeout``
    after a timeout), with a NoResponseError carrying the attempts as its
    ``__cause__``. A body that does not complete raises
    ``httpx.RemoteProtocolError``; closing the response early cancels the
    call and the upstream request. A request the broker refuses raises its
    BrokerError (e.g. PermissionDeniedError). Hop-by-hop headers and Host are
    not forwarded. ``response.extensions["retrybroker"]`` is the broker's
    StreamResponse. Never put it under another retrying layer.
    """

    def __init__(
        self,
        client: BrokerClient,
        *,
        policy: str | None = None,
        provider: str | None = None,
        overrides: ExecuteOverrides | None = None,
        timeout: float | None = None,
    ) -> None:
        self._client = client
        self._policy = policy
        self._provider = provider
        self._overrides = overrides
        self._timeout = timeout

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through the broker and return the streamed response."""
        body = request.read()
        resp = self._client.execute_stream(
            request.method,
            str(request.url),
            headers=forwarded_headers(request.headers.multi_items()),
            body=body,
            policy=self._policy,
            provider=self._provider,
            overrides=self._overrides,
            timeout=self._timeout,
        )
        if resp.status is None:
            raise _no_response(resp.result, request)
        return httpx.Response(
            resp.status,
            headers=resp.headers,
            stream=_Body(resp, request),
            extensions={"http_version": b"HTTP/1.1", EXTENSION: resp},
        )


class AsyncBrokerTransport(httpx.AsyncBaseTransport):
    """An ``httpx.AsyncBaseTransport`` that sends each request through the broker.

    The same as BrokerTransport, over an AsyncBrokerClient.
    """

    def __init__(
        self,
        client: AsyncBrokerClient,
        *,
        policy: str | None = None,
        provider: str | None = None,
        overrides: ExecuteOverrides | None = None,
        timeout: float | None = None,
    ) -> None:
        self._client = client
        self._policy = policy
        self._provider = provider
        self._overrides = overrides
        self._timeout = timeout

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through the broker and return the streamed response."""
        body = await request.aread()
        resp = await self._client.execute_stream(
            request.method,
            str(request.url),
            headers=forwarded_headers(request.headers.multi_items()),
            body=body,
            policy=self._policy,
            provider=self._provider,
            overrides=self._overrides,
            timeout=self._timeout,
        )
        if resp.status is None:
            raise _no_response(resp.result, request)
        return httpx.Response(
            resp.status,
            headers=resp.headers,
            stream=_AsyncBody(resp, request),
            extensions={"http_version": b"HTTP/1.1", EXTENSION: resp},
        )
