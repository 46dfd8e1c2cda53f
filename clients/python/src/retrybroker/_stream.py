"""StreamResponse and AsyncStreamResponse: an ExecuteStream call being read.

Both are thin shells around one ``StreamState`` (``_core.py``), which reads
the head, the chunks and the end; they only receive the messages (blocking
or awaited) and cancel the call when closed early.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from types import TracebackType
from typing import Any, cast

import grpc
import grpc.aio

from ._core import StreamState
from ._errors import BodyIncompleteError, error_from_rpc
from ._gen.retrybroker.v1 import broker_pb2 as pb
from ._types import Attempt, StreamResult

#: grpc.aio's end-of-stream marker (grpc-stubs does not declare it).
EOF: Any = cast(Any, grpc.aio).EOF


def cancel(call: object) -> None:
    """Cancel a grpc or grpc.aio call (grpc-stubs leaves ``cancel`` untyped)."""
    cast(Any, call).cancel()


class _Head:
    """What both responses expose of the head."""

    _state: StreamState

    @property
    def status(self) -> int | None:
        """The final HTTP status; None when the call ended without a final response."""
        return self._state.status

    @property
    def headers(self) -> list[tuple[str, str]]:
        """The final response's headers as (name, value) pairs, in order, duplicates kept."""
        return self._state.headers

    @property
    def attempts(self) -> list[Attempt]:
        """The attempts up to the head; once the body ended, ``result.attempts`` has all."""
        return self._state.attempts

    @property
    def provider(self) -> str:
        """The hint reader that was used."""
        return self._state.provider

    @property
    def result(self) -> StreamResult | None:
        """The broker's end of the stream (outcome, body_complete, trailers ...), once read.

        It is set as soon as the call starts when there was no final response,
        and when the body has been read to its end otherwise.
        """
        return self._state.result

    def header(self, name: str) -> str | None:
        """Return the first value of a header (case-insensitive), or None."""
        values = self.header_values(name)
        return values[0] if values else None

    def header_values(self, name: str) -> list[str]:
        """Return every value of a header (case-insensitive), in order."""
        lname = name.lower()
        return [v for n, v in self.headers if n.lower() == lname]


class StreamResponse(_Head):
    """The response of ``BrokerClient.execute_stream``: its head now, its body as it arrives.

    Iterate it (or ``iter_bytes()``) for the body's chunks as the upstream
    sends them, or ``read()`` it whole. A body that did not complete raises
    BodyIncompleteError after the chunks that arrived. ``close()`` (or
    leaving a ``with`` block) before the end cancels the call, and the broker
    cancels the upstream request. The body can be read once.
    """

    def __init__(
        self, call: grpc.CallIterator[pb.ExecuteStreamResponse], state: StreamState
    ) -> None:
        self._call = call
        self._messages = iter(call)
        self._state = state
        self._consumed = False
        self._closed = False

    def __enter__(self) -> StreamResponse:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[bytes]:
        return self.iter_bytes()

    def iter_bytes(self) -> Iterator[bytes]:
        """Yield the body's chunks (bytes) in order as they arrive.

        Raises BodyIncompleteError when the body did not complete, and
        RuntimeError when the body was already read or the response closed.
        """
        if self._consumed or self._closed:
            raise RuntimeError("the response body was already read or closed")
        self._consumed = True
        return self._chunks()

    def _chunks(self) -> Iterator[bytes]:
        state = self._state
        if state.done:
            return
        try:
            for msg in self._messages:
                data = state.feed(msg)
                if data is None:
                    return
                if data:
                    yield data
        except grpc.RpcError as err:
            if self._closed:
                raise BodyIncompleteError("the response was closed before its end") from None
            be = error_from_rpc(err)
            raise state.failed(be) from be
        finally:
            if not state.done:
                cancel(self._call)
        raise state.closed_early()

    def read(self) -> bytes:
        """Return the whole body; raises as ``iter_bytes`` does."""
        return b"".join(self.iter_bytes())

    def close(self) -> None:
        """Cancel the call unless its end arrived; the broker then cancels the upstream request."""
        self._closed = True
        if not self._state.done:
            cancel(self._call)


class AsyncStreamResponse(_Head):
    """The response of ``AsyncBrokerClient.execute_stream``: StreamResponse, awaited.

    ``async for chunk in response`` (or ``aiter_bytes()``), ``await read()``,
    ``await aclose()`` or ``async with``.
    """

    def __init__(
        self,
        call: grpc.aio.UnaryStreamCall[pb.ExecuteRequest, pb.ExecuteStreamResponse],
        state: StreamState,
    ) -> None:
        self._call = call
        self._state = state
        self._consumed = False
        self._closed = False

    async def __aenter__(self) -> AsyncStreamResponse:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.aiter_bytes()

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """Yield the body's chunks in order as they arrive; raise as ``iter_bytes`` does."""
        if self._consumed or self._closed:
            raise RuntimeError("the response body was already read or closed")
        self._consumed = True
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        state = self._state
        if state.done:
            return
        try:
            while True:
                msg = await self._call.read()
                if msg is EOF:
                    break
                assert isinstance(msg, pb.ExecuteStreamResponse)
                data = state.feed(msg)
                if data is None:
                    return
                if data:
                    yield data
        except grpc.RpcError as err:
            if self._closed:
                raise BodyIncompleteError("the response was closed before its end") from None
            be = error_from_rpc(err)
            raise state.failed(be) from be
        finally:
            if not state.done:
                cancel(self._call)
        raise state.closed_early()

    async def read(self) -> bytes:
        """Return the whole body; raises as ``aiter_bytes`` does."""
        return b"".join([c async for c in self.aiter_bytes()])

    async def aclose(self) -> None:
        """Cancel the call unless its end arrived; the broker then cancels the upstream request."""
        self._closed = True
        if not self._state.done:
            cancel(self._call)
