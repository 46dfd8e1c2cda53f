"""A requests transport adapter that sends every request through the broker's ExecuteStream.

Existing requests code routes through the broker with one line::

    session.mount("https://", BrokerAdapter(BrokerClient("127.0.0.1:50051")))

The broker retries by the tenant's policy; with ``stream=True`` the body
streams as the upstream sends it (``iter_content(chunk_size=None)``,
``iter_lines()`` for server-sent events). Requires ``requests``.
"""

from __future__ import annotations

import http.client
from collections.abc import Generator, Iterator, Mapping
from typing import Any, cast

import requests
import requests.adapters
import requests.exceptions
from urllib3 import HTTPHeaderDict
from urllib3.exceptions import ProtocolError
from urllib3.response import HTTPResponse

from ._client import BrokerClient
from ._core import forwarded_headers
from ._errors import BodyIncompleteError, NoResponseError
from ._stream import StreamResponse
from ._types import ExecuteOverrides, TransportError


class _Fp:
    """The file object urllib3 reads the streamed body from."""

    def __init__(self, resp: StreamResponse) -> None:
        self._resp = resp
        self._chunks: Iterator[bytes] | None = None
        self._buf = b""
        self._eof = False

    @property
    def closed(self) -> bool:
        return self._eof

    def _fill(self) -> None:
        if self._buf or self._eof:
            return
        if self._chunks is None:
            self._chunks = self._resp.iter_bytes()
        try:
            self._buf = next(self._chunks)
        except StopIteration:
            self._eof = True
        except BodyIncompleteError as e:
            self._eof = True
            raise ProtocolError(str(e), e) from e

    def read1(self, amt: int | None = None) -> bytes:
        """Return the next bytes as they arrive (at most ``amt``); b"" at the end."""
        self._fill()
        n = len(self._buf) if amt is None or amt < 0 else amt
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def read(self, amt: int | None = None) -> bytes:
        """Return up to ``amt`` bytes (all the rest when None); b"" at the end."""
        if amt is not None and amt >= 0:
            return self.read1(amt)
        return b"".join(iter(self.read1, b""))

    def close(self) -> None:
        self._eof = True
        self._resp.close()


class _StreamedResponse(HTTPResponse):
    """A urllib3 response whose ``stream()`` yields bytes as they arrive.

    urllib3's own ``stream(amt)`` waits for ``amt`` bytes; server-sent
    events need each event as soon as it is sent.
    """

    def stream(
        self, amt: int | None = 2**16, decode_content: bool | None = None
    ) -> Generator[bytes]:
        """Yield the body in pieces of at most ``amt`` bytes, each as soon as it arrived."""
        while True:
            data = self.read1(amt=amt, decode_content=decode_content)
            if not data:
                return
            yield data


def _body_bytes(body: Any) -> bytes:
    """Return a prepared request's body (bytes, str, file or iterable) as bytes."""
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if hasattr(body, "read"):
        data = body.read()
        return data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return b"".join(p.encode("utf-8") if isinstance(p, str) else bytes(p) for p in body)


class BrokerAdapter(requests.adapters.HTTPAdapter):
    """A requests transport adapter that sends each request through the broker.

    Mount it for the prefixes to route: ``session.mount("https://",
    BrokerAdapter(broker))``.

    Args:
        client: the BrokerClient to send through (not closed by the adapter).
        policy: the tenant's policy for every request (default: the client's).
        provider: hint reader override for every request.
        overrides: narrow the policy for every request.
        timeout: deadline in seconds of each call, body included (default:
            the client's). The ``timeout=`` of a requests call does not
            apply: the broker's policy bounds the attempts and the body.

    Every argument after ``client`` is keyword-only. The final response comes
    back whatever its status. A call that ended without one raises
    ``requests.exceptions.ConnectionError`` (``ReadTimeout`` after a
    timeout, ``SSLError`` for a rejected certificate), with a NoResponseError
    carrying the attempts as its ``__cause__``. A body that does not complete
    raises ``requests.exceptions.ChunkedEncodingError``; closing the response
    early cancels the call and the upstream request. A request the broker
    refuses raises its BrokerError. ``verify``, ``cert`` and ``proxies`` do
    not apply (the broker makes the call). ``response.raw.broker`` is the
    broker's StreamResponse. Never put it under another retrying layer.
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
        super().__init__(max_retries=0)
        self._client = client
        self._policy = policy
        self._provider = provider
        self._overrides = overrides
        self._timeout = timeout

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float, float] | tuple[float, None] | None = None,
        verify: bool | str = True,
        cert: bytes | str | tuple[bytes | str, bytes | str] | None = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """Send ``request`` through the broker and return the streamed response."""
        method = request.method or "GET"
        resp = self._client.execute_stream(
            method,
            request.url or "",
            headers=forwarded_headers(request.headers.items()),
            body=_body_bytes(request.body),
            policy=self._policy,
            provider=self._provider,
            overrides=self._overrides,
            timeout=self._timeout,
        )
        if resp.status is None:
            result = resp.result
            last = result.attempts[-1] if result and result.attempts else None
            kind = last.transport_error if last else None
            why = (
                f"{kind}: {last.error_message}" if last and kind else str(result and result.outcome)
            )
            msg = f"no response through the retry broker ({why})"
            cls: type[requests.exceptions.RequestException] = requests.exceptions.ConnectionError
            if kind is TransportError.TIMEOUT:
                cls = requests.exceptions.ReadTimeout
            elif kind is TransportError.TLS_CERTIFICATE:
                cls = requests.exceptions.SSLError
            err = cls(msg, request=request)
            if result is not None:
                raise err from NoResponseError(msg, result)
            raise err
        headers = HTTPHeaderDict()
        for name, value in resp.headers:
            headers.add(name, value)
        raw = _StreamedResponse(
            body=cast(Any, _Fp(resp)),
            headers=headers,
            status=resp.status,
            reason=http.client.responses.get(resp.status, ""),
            preload_content=False,
            decode_content=True,
            request_method=method,
            request_url=request.url,
        )
        raw.broker = resp  # type: ignore[attr-defined]
        return self.build_response(request, raw)
