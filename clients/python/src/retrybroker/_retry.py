"""What the classify-driven retry loops (sync and async) read from responses and exceptions."""

from __future__ import annotations

import errno
import http.client
import inspect
import socket
import ssl
import urllib.error
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ._types import Decision, HttpResult, TransportError, header_pairs

T = TypeVar("T")

_MAX_CHAIN = 8


def transport_error_from_exception(exc: BaseException) -> TransportError | None:
    """Return the transport error kind of an exception, or None when it is not one.

    It walks the exception's cause chain (``__cause__``, ``__context__``,
    ``URLError.reason`` and urllib3-style ``.reason``), so errors wrapped by
    ``urllib``, ``requests``, ``httpx`` or ``aiohttp`` map to the OS error
    underneath. Returns None for exceptions that are not transport failures
    (programming errors, cancellation): the retry helpers re-raise those at
    once without asking the broker.

    Mapping: ``ConnectionRefusedError`` -> connection_refused;
    ``ConnectionResetError``/``BrokenPipeError``/``ConnectionAbortedError``
    -> connection_reset; ``http.client.IncompleteRead`` (the body ended
    before Content-Length) -> body_incomplete;
    ``http.client.RemoteDisconnected``/``EOFError`` -> eof;
    ``TimeoutError`` (and any exception class whose name contains
    "Timeout") -> timeout; ``socket.gaierror`` -> dns_not_found
    (EAI_NONAME, EAI_NODATA) or dns_temporary (others);
    ``ssl.SSLCertVerificationError`` -> tls_certificate; any other ``OSError``
    -> other (not retryable).
    """
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    fallback: TransportError | None = None
    while todo and len(seen) < _MAX_CHAIN:
        e = todo.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        kind = _direct_kind(e)
        if kind is not None and kind is not TransportError.OTHER:
            return kind
        if kind is TransportError.OTHER and fallback is None:
            fallback = kind
        for nxt in (e.__cause__, e.__context__, getattr(e, "reason", None)):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
        for arg in getattr(e, "args", ()):
            if isinstance(arg, BaseException):
                todo.append(arg)
    return fallback


def _direct_kind(e: BaseException) -> TransportError | None:
    """Return the kind of ``e`` itself, without looking at its causes."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return TransportError.TLS_CERTIFICATE
    if isinstance(e, http.client.IncompleteRead):
        return TransportError.BODY_INCOMPLETE
    if isinstance(e, (http.client.RemoteDisconnected, EOFError)):
        return TransportError.EOF
    if isinstance(e, ConnectionRefusedError):
        return TransportError.CONNECTION_REFUSED
    if isinstance(e, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        return TransportError.CONNECTION_RESET
    if isinstance(e, socket.gaierror):
        if e.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)):
            return TransportError.DNS_NOT_FOUND
        return TransportError.DNS_TEMPORARY
    if isinstance(e, TimeoutError) or "Timeout" in type(e).__name__:
        return TransportError.TIMEOUT
    if isinstance(e, OSError):
        if e.errno == errno.ECONNREFUSED:
            return TransportError.CONNECTION_REFUSED
        if e.errno in (errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED):
            return TransportError.CONNECTION_RESET
        if e.errno == errno.ETIMEDOUT:
            return TransportError.TIMEOUT
        if isinstance(e, urllib.error.URLError):
            return None  # look at .reason instead
        return TransportError.OTHER
    return None


def http_result_of(value: Any) -> HttpResult:
    """Return the status, headers and (when cheap) body of a response.

    Accepted: an HttpResult; a ``(status, headers)`` or ``(status, headers,
    body)`` tuple; or any object with ``status_code`` (requests, httpx) or
    ``status`` (urllib, http.client, aiohttp) and ``headers``. The body is
    not read from response objects (that would consume streams); pass
    ``inspect=`` to the retry helper to include it for body-aware readers.
    """
    if isinstance(value, HttpResult):
        return value
    if isinstance(value, tuple) and 2 <= len(value) <= 3 and isinstance(value[0], int):
        body = value[2] if len(value) == 3 else b""
        return HttpResult(status=value[0], headers=header_pairs(value[1]), body=bytes(body or b""))
    status = getattr(value, "status_code", None)
    if not isinstance(status, int):
        status = getattr(value, "status", None)
    if not isinstance(status, int):
        raise TypeError(
            f"cannot read an HTTP status from {type(value).__name__}; "
            "return an HttpResult or pass inspect= to the retry helper"
        )
    return HttpResult(status=status, headers=header_pairs(getattr(value, "headers", None)))


def response_of_exception(exc: BaseException) -> HttpResult | None:
    """Return the HTTP response an exception carries, or None.

    ``urllib.error.HTTPError`` is raised for 4xx/5xx responses; it is a
    response, not a transport failure, so it is classified by its status.
    """
    if isinstance(exc, urllib.error.HTTPError):
        return HttpResult(status=exc.code, headers=header_pairs(exc.headers))
    return None


def discard(result: object) -> None:
    """Close a response that is about to be retried, when it can be closed.

    requests, httpx and http.client responses hold a connection until closed.
    """
    close = getattr(result, "close", None)
    if callable(close):
        close()


async def adiscard(result: object) -> None:
    """Close an asyncio response that is about to be retried.

    httpx responses have ``aclose()``; aiohttp's ``close()`` may or may not
    return an awaitable.
    """
    aclose = getattr(result, "aclose", None)
    if callable(aclose):
        await aclose()
        return
    close = getattr(result, "close", None)
    if callable(close):
        ret = close()
        if inspect.isawaitable(ret):
            await ret


@dataclass(frozen=True)
class RetryEvent(Generic[T]):
    """What ``on_retry`` receives before the helper sleeps.

    Attributes:
        attempt: the number of the attempt that just failed (1-based).
        decision: the broker's decision (action is RETRY).
        result: the failed attempt's response, when fn returned one (close
            it here if it holds a connection).
        error: the exception fn raised, when it raised.
    """

    attempt: int
    decision: Decision
    result: T | None
    error: BaseException | None
