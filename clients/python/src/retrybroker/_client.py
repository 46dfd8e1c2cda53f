"""BrokerClient: the blocking client of the retry broker."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

import grpc

from . import _convert
from ._errors import error_from_rpc
from ._gen.retrybroker.v1 import broker_pb2 as pb
from ._retry import RetryEvent, discard, http_result_of, response_of_exception, transport_error_from_exception
from ._types import Action, Decision, ExecuteOverrides, ExecuteResult, HeadersInput, HttpResult, TransportError

__version__ = "0.1.0"

T = TypeVar("T")

EXECUTE_METHOD = "/retrybroker.v1.BrokerService/Execute"
CLASSIFY_METHOD = "/retrybroker.v1.BrokerService/ClassifyResponse"

#: Channel options every client sets.
#:
#: The client never retries Execute itself. Retrying is the broker's job, and
#: a second retry layer multiplies sends: 3 retries in each of two layers is
#: (1+3) x (1+3) = 16 sends to the upstream. So no retry policy is configured,
#: and service configs from DNS (which could carry one) are ignored. gRPC's
#: transparent retries stay on: they only resend an RPC that never reached
#: the broker's application code, so they cannot cause an extra upstream send.
BASE_CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.service_config_disable_resolution", 1),
    ("grpc.primary_user_agent", f"retrybroker-python/{__version__}"),
)

Body = bytes | bytearray | memoryview | str | None
TLSOption = bool | grpc.ChannelCredentials


def channel_credentials(tls: TLSOption) -> grpc.ChannelCredentials | None:
    if isinstance(tls, grpc.ChannelCredentials):
        return tls
    if tls:
        return grpc.ssl_channel_credentials()
    return None


def call_metadata(api_key: str | None) -> tuple[tuple[str, str], ...]:
    # The key is sent as call metadata (not CallCredentials) so that it also
    # works on the plaintext loopback channel of a local broker.
    if api_key:
        return (("authorization", f"Bearer {api_key}"),)
    return ()


class BrokerClient:
    """BrokerClient calls a retry broker over gRPC (blocking).

    Args:
        target: the broker's address, e.g. ``"127.0.0.1:50051"``.
        api_key: the tenant's API key, sent as ``authorization: Bearer <key>``.
            None for the embedded dev tenant of ``make run``.
        tls: False for plaintext, True for TLS with the system roots, or a
            ``grpc.ChannelCredentials`` (e.g. for mTLS).
        default_policy: the policy name used when a call names none; None
            means the tenant's default policy.
        timeout: default deadline, in seconds, of every RPC; None means no
            deadline. A per-call ``timeout`` overrides it. The deadline is
            sent to the broker, which stops waiting for retries (and answers
            with ``Outcome.DEADLINE_TOO_SHORT``) rather than run past it.
        options: extra gRPC channel options.

    The client never retries an RPC itself: see ``BASE_CHANNEL_OPTIONS``.
    Use it as a context manager, or call ``close()``.
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
            self._channel = grpc.insecure_channel(target, options=opts)
        else:
            self._channel = grpc.secure_channel(target, creds, options=opts)
        self._metadata = call_metadata(api_key)
        self._default_policy = default_policy or ""
        self._timeout = timeout
        self._execute: grpc.UnaryUnaryMultiCallable[pb.ExecuteRequest, pb.ExecuteResponse] = (
            self._channel.unary_unary(
                EXECUTE_METHOD,
                request_serializer=pb.ExecuteRequest.SerializeToString,
                response_deserializer=pb.ExecuteResponse.FromString,
            )
        )
        self._classify: grpc.UnaryUnaryMultiCallable[
            pb.ClassifyResponseRequest, pb.ClassifyResponseResponse
        ] = self._channel.unary_unary(
            CLASSIFY_METHOD,
            request_serializer=pb.ClassifyResponseRequest.SerializeToString,
            response_deserializer=pb.ClassifyResponseResponse.FromString,
        )

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """close closes the channel; in-flight calls are cancelled."""
        self._channel.close()

    def _timeout_for(self, timeout: float | None) -> float | None:
        return self._timeout if timeout is None else timeout

    def execute(
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
        """execute has the broker send an HTTP request, retrying by policy.

        Upstream failures are not exceptions: a final 503, a transport error
        or an early give-up is an ExecuteResult whose ``outcome`` says how
        the call ended (and ``retry_after`` when the caller may try again).
        Raises a BrokerError subclass when the broker refuses the call
        (InvalidArgumentError, AuthenticationError, PermissionDeniedError
        for a refused destination, UnknownPolicyError, RateLimitedError) or
        cannot be reached (UnavailableError, DeadlineExceededError).

        Args:
            method: HTTP method, e.g. ``"GET"``.
            url: absolute http(s) URL.
            headers: request headers, a mapping or (name, value) pairs.
            body: request body; a str is sent as UTF-8.
            policy: the tenant's policy name (default: the client's).
            provider: hint reader override, e.g. ``"github"``.
            timeout: deadline of this call in seconds (default: the client's).
            overrides: narrow the policy for this call.
        """
        req = _convert.execute_request(
            method, url, headers, body, policy or self._default_policy, provider, overrides
        )
        try:
            resp = self._execute(req, timeout=self._timeout_for(timeout), metadata=self._metadata)
        except grpc.RpcError as err:
            raise error_from_rpc(err) from None
        return _convert.execute_result_of(resp)

    def classify(
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
        """classify asks the broker what to do about a response you got yourself.

        Pass either ``status`` (with the response ``headers`` and, for
        body-aware readers, the leading bytes of ``body``) or
        ``transport_error`` (e.g. ``"connection_reset"``) when there was no
        response. ``attempt`` is the 1-based number of the attempt that
        produced it. ``now`` and ``deadline`` are aware datetimes or Unix
        seconds: ``now`` is the clock for absolute hints (default: the
        broker's), ``deadline`` is when your logical call must end (the
        decision is DO_NOT_RETRY with ``Reason.DEADLINE_TOO_SHORT`` when the
        wait would run past it). ``request_headers`` are searched for the
        policy's idempotency-key header; ``url`` picks the provider by host.

        Returns a Decision; its ``delay`` is in seconds (float).
        """
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
            resp = self._classify(req, timeout=self._timeout_for(timeout), metadata=self._metadata)
        except grpc.RpcError as err:
            raise error_from_rpc(err) from None
        return _convert.decision_of(resp.decision)

    def retry(
        self,
        fn: Callable[[], T],
        *,
        method: str = "GET",
        url: str | None = None,
        request_headers: HeadersInput = None,
        provider: str | None = None,
        policy: str | None = None,
        deadline: float | None = None,
        inspect: Callable[[T], HttpResult] | None = None,
        transport_error_of: Callable[[BaseException], TransportError | None] = transport_error_from_exception,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] | None = None,
        on_retry: Callable[[RetryEvent[T]], None] | None = None,
    ) -> T:
        """retry calls ``fn`` until the broker's rules say stop.

        For callers that make their own HTTP calls: ``fn()`` makes one
        attempt. Its result (or the exception it raised) is sent to
        ClassifyResponse with the attempt number; on RETRY the helper sleeps
        the returned delay and calls ``fn`` again; on DO_NOT_RETRY it returns
        the last result, or re-raises the last exception. So the rules
        (retryable statuses, methods, hints, backoff, attempt limits) live in
        the broker, even though the traffic does not go through it.

        Args:
            fn: makes one attempt; returns a response, or raises.
            method: the HTTP method fn uses (unsafe methods are not retried
                unless ``request_headers`` carry an idempotency key).
            url: the request URL: picks the provider by host and shares the
                tenant's cooldown gate with Execute.
            request_headers: the headers fn sends.
            provider, policy: as for classify.
            deadline: seconds the whole loop may take, waits included; the
                broker says DO_NOT_RETRY when a wait would run past it.
            inspect: turns fn's result into an HttpResult (status, headers,
                optional leading body bytes). Default: ``http_result_of``,
                which reads ``status_code``/``status`` and ``headers`` of
                requests, httpx, urllib and aiohttp responses, or a
                ``(status, headers)`` tuple.
            transport_error_of: maps an exception to a TransportError, or None
                to re-raise it at once (default: transport_error_from_exception).
            sleep: waits the given seconds (inject a fake in tests).
            clock: Unix-seconds clock (inject a fake in tests). When given,
                it is also sent as ``now`` so absolute hints are read against
                it; when None, ``time.time`` sets the deadline and the
                broker's clock reads hints.
            on_retry: called before each wait, e.g. to log. Without it, a
                response that is about to be retried is closed (its
                ``close()`` is called, if it has one) to release its
                connection; with it, closing is up to you (``event.result``).

        Raises BrokerError when the broker cannot be asked; fn's own
        non-transport exceptions propagate unchanged.
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
                result = fn()
                info = read(result)
            except Exception as exc:
                info = response_of_exception(exc)
                if info is None:
                    kind = transport_error_of(exc)
                    if kind is None:
                        raise
                error = exc
            decision = self.classify(
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
                discard(result)
            sleep(decision.delay or 0.0)
            attempt += 1
