"""BrokerClient: the blocking client of the retry broker (grpcio)."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import grpc

from . import _convert
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
from ._errors import BrokerError, FailedPreconditionError, error_from_rpc
from ._gen.retrybroker.v1 import broker_pb2 as pb
from ._retry import RetryEvent, discard, http_result_of, transport_error_from_exception
from ._stream import StreamResponse, cancel
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

#: RetryTask's FAILED_PRECONDITION: the task is not FAILED (not an unknown policy).
RETRY_TASK_ERRORS: Mapping[grpc.StatusCode, type[BrokerError]] = {
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError
}


class BrokerClient:
    """A blocking client of the retry broker, over gRPC.

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

    Every argument after ``target`` is keyword-only. The client never
    retries an RPC itself: see ``BASE_CHANNEL_OPTIONS``. Use it as a context
    manager, or call ``close()``.
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
            self._channel = grpc.insecure_channel(target, options=opts)
        else:
            self._channel = grpc.secure_channel(target, creds, options=opts)
        self._core = ClientCore.of(api_key=api_key, default_policy=default_policy, timeout=timeout)
        self._execute: grpc.UnaryUnaryMultiCallable[pb.ExecuteRequest, pb.ExecuteResponse] = (
            self._channel.unary_unary(
                EXECUTE.path,
                request_serializer=EXECUTE.serialize,
                response_deserializer=EXECUTE.deserialize,
            )
        )
        self._execute_stream: grpc.UnaryStreamMultiCallable[
            pb.ExecuteRequest, pb.ExecuteStreamResponse
        ] = self._channel.unary_stream(
            EXECUTE_STREAM.path,
            request_serializer=EXECUTE_STREAM.serialize,
            response_deserializer=EXECUTE_STREAM.deserialize,
        )
        self._classify: grpc.UnaryUnaryMultiCallable[
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
        self._watch_task: grpc.UnaryStreamMultiCallable[pb.WatchTaskRequest, pb.Task] = (
            self._channel.unary_stream(
                WATCH_TASK.path,
                request_serializer=WATCH_TASK.serialize,
                response_deserializer=WATCH_TASK.deserialize,
            )
        )

    def _unary_unary(self, rpc: Rpc[Req, Resp]) -> grpc.UnaryUnaryMultiCallable[Req, Resp]:
        return self._channel.unary_unary(
            rpc.path, request_serializer=rpc.serialize, response_deserializer=rpc.deserialize
        )

    def _call(
        self,
        method: grpc.UnaryUnaryMultiCallable[Req, Resp],
        req: Req,
        timeout: float | None,
        by_code: Mapping[grpc.StatusCode, type[BrokerError]] | None = None,
    ) -> Resp:
        try:
            return method(
                req, timeout=self._core.timeout_for(timeout), metadata=self._core.metadata
            )
        except grpc.RpcError as err:
            raise error_from_rpc(err, by_code) from None

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
        """Close the channel; calls in flight are cancelled."""
        self._channel.close()

    def execute(
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
            overrides: narrow the policy for this call.
            timeout: deadline of this call in seconds (default: the client's).

        Every argument after ``url`` is keyword-only.
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
            resp = self._execute(
                req, timeout=self._core.timeout_for(timeout), metadata=self._core.metadata
            )
        except grpc.RpcError as err:
            raise error_from_rpc(err) from None
        return _convert.execute_result_of(resp)

    def execute_stream(
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
    ) -> StreamResponse:
        """Have the broker send an HTTP request as execute does, and stream its response.

        The broker retries by policy until a response is final, then sends
        its status and headers (this returns once they arrived) and the body
        as the upstream sends it: iterate the StreamResponse for its chunks.
        Nothing is retried once a body byte has been sent. A body that does
        not complete raises BodyIncompleteError from the iteration;
        ``response.result`` then has the broker's end (``body_end``,
        ``error_message``, attempts, outcome). A call without a final
        response returns at once with ``status`` None and ``result`` set.
        Closing the response before its end cancels the call and the
        upstream request. Use it as a context manager.

        ``timeout`` (default: the client's) is the deadline of the whole call,
        body included. The body is otherwise bounded by the policy's stream
        limits (idle timeout, optional max duration and byte cap), not by
        its total_timeout. Raises BrokerError subclasses as execute does,
        and RateLimitedError when the tenant has as many streams open as its
        policy allows. The arguments are those of execute.
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
            first = next(iter(call), None)
        except grpc.RpcError as err:
            raise error_from_rpc(err) from None
        except BaseException:
            cancel(call)
            raise
        state.start(first)
        return StreamResponse(call, state)

    def classify(
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

        Pass either ``status`` (with the response ``headers`` and, for
        body-aware readers, the leading bytes of ``body``) or
        ``transport_error`` (e.g. ``"connection_reset"``) when there was no
        response. Every argument after ``headers`` is keyword-only.

        Args:
            status: the HTTP status, 100 to 599.
            headers: the response headers.
            body: the leading bytes of the response body (at most 64 KiB).
            transport_error: the failure, when there was no response.
            method: the request's HTTP method.
            attempt: the 1-based number of the attempt that produced it.
            url: the request URL; picks the provider by host and shares the
                tenant's cooldown gate with Execute.
            request_headers: the headers the request was sent with (searched
                for the policy's idempotency-key header).
            provider: hint reader override, e.g. ``"github"``.
            policy: the tenant's policy name (default: the client's).
            now: the clock for absolute hints, an aware datetime or Unix
                seconds (default: the broker's).
            deadline: when your logical call must end, an aware datetime or
                Unix seconds; a wait that would run past it gives DO_NOT_RETRY
                with ``Reason.DEADLINE_TOO_SHORT``.
            timeout: deadline of this RPC in seconds (default: the client's).

        Returns a Decision; its ``delay`` is in seconds (float).
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
        return self._classify_request(req, timeout)

    def _classify_request(self, req: pb.ClassifyResponseRequest, timeout: float | None) -> Decision:
        try:
            resp = self._classify(
                req, timeout=self._core.timeout_for(timeout), metadata=self._core.metadata
            )
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
        transport_error_of: Callable[
            [BaseException], TransportError | None
        ] = transport_error_from_exception,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] | None = None,
        on_retry: Callable[[RetryEvent[T]], None] | None = None,
    ) -> T:
        """Call ``fn`` until the broker's rules say stop.

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
            provider: as for classify.
            policy: as for classify.
            deadline: seconds the whole loop may take, waits included,
                measured on ``time.monotonic`` (or on ``clock``); the broker
                says DO_NOT_RETRY when a wait would run past it.
            inspect: turns fn's result into an HttpResult (status, headers,
                optional leading body bytes). Default: ``http_result_of``,
                which reads ``status_code``/``status`` and ``headers`` of
                requests, httpx, urllib and aiohttp responses, or a
                ``(status, headers)`` tuple.
            transport_error_of: maps an exception to a TransportError, or None
                to re-raise it at once (default: transport_error_from_exception).
            sleep: waits the given seconds (inject a fake in tests).
            clock: a Unix-seconds clock (inject a fake in tests). When given,
                the deadline is measured on it and its reading is sent as
                ``now``, so absolute hints are read against it; when None,
                the broker's clock reads hints.
            on_retry: called before each wait, e.g. to log. Without it, a
                response that is about to be retried is closed (its
                ``close()`` is called, if it has one) to release its
                connection; with it, closing is up to you (``event.result``).

        Raises BrokerError when the broker cannot be asked; fn's own
        non-transport exceptions propagate unchanged.
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
                state.record_result(fn())
            except Exception as exc:
                if not state.record_error(exc):
                    raise
            step = state.next_step(self._classify_request(state.classify_request(), None))
            if step is None:
                return state.finish()
            if on_retry is not None:
                on_retry(step.event)
            elif step.event.result is not None:
                discard(step.event.result)
            sleep(step.delay)

    def create_task(
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
        """Hand an HTTP request to the broker as a task, to run when it is due and allowed.

        The broker stores the task durably and sends it through the same
        engine and policy as execute when it is due (``not_before``) and
        its gate allows; a closed gate or an open breaker makes it wait
        (``TaskState.WAITING``) without using up its attempts. Every send
        carries the same idempotency key (the request's own value of the
        policy's idempotency header, or one the broker generates), so a POST
        task is retried safely. Returns the stored task.

        Args:
            method, url, headers, body, policy, provider, overrides: the
                request, as for execute. A sensitive header
                (Authorization, Cookie, X-Api-Key) is refused with
                InvalidArgumentError: it would be stored; let the broker
                hold the credential instead.
            task_id: names the task in the tenant (1 to 128 characters of
                ``[A-Za-z0-9_-]``); a second create with the same id returns
                the first task unchanged. None: the broker generates one.
            not_before: the earliest time the task runs, an aware datetime
                or Unix seconds; None means now.
            give_up_after: when an unfinished task becomes FAILED (after
                ``not_before``); None means never.
            timeout: deadline of this RPC in seconds (default: the client's);
                it does not bound the task.

        Raises the BrokerError subclasses of execute; BrokerError with code
        UNIMPLEMENTED when the broker runs without task storage.
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
        return _convert.task_of(self._call(self._create_task, req, timeout))

    def get_task(self, task_id: str, *, timeout: float | None = None) -> Task:
        """Return the caller's task ``task_id``.

        Raises NotFoundError for a task that does not exist or belongs to
        another tenant.
        """
        return _convert.task_of(
            self._call(self._get_task, pb.GetTaskRequest(task_id=task_id), timeout)
        )

    def cancel_task(self, task_id: str, *, timeout: float | None = None) -> Task:
        """Cancel the caller's task unless it is final, and return it.

        A final task is returned unchanged. Raises NotFoundError as get_task.
        """
        return _convert.task_of(
            self._call(self._cancel_task, pb.CancelTaskRequest(task_id=task_id), timeout)
        )

    def retry_task(self, task_id: str, *, timeout: float | None = None) -> Task:
        """Schedule the caller's FAILED task again (due now, same idempotency key); return it.

        Raises FailedPreconditionError for a task that is not FAILED, and
        NotFoundError as get_task.
        """
        req = pb.RetryTaskRequest(task_id=task_id)
        return _convert.task_of(self._call(self._retry_task, req, timeout, RETRY_TASK_ERRORS))

    def list_tasks_page(
        self,
        *,
        state: TaskState | str | None = None,
        page_size: int | None = None,
        page_token: str = "",
        timeout: float | None = None,
    ) -> TaskPage:
        """Return one page of the caller's tasks, oldest first.

        Args:
            state: list only tasks in this state (``TaskState.WAITING`` or
                ``"waiting"``); None lists every state.
            page_size: tasks per page, 1 to 1000; None means the broker's
                default (100).
            page_token: ``""`` for the first page, then the previous page's
                ``next_page_token``. A token the broker did not issue raises
                InvalidArgumentError.
            timeout: deadline of this RPC in seconds (default: the client's).
        """
        req = _convert.list_tasks_request(state=state, page_size=page_size, page_token=page_token)
        return _convert.task_page_of(self._call(self._list_tasks, req, timeout))

    def list_tasks(
        self,
        *,
        state: TaskState | str | None = None,
        page_size: int | None = None,
        timeout: float | None = None,
    ) -> Generator[Task, None, None]:
        """Iterate over the caller's tasks, oldest first, one page per RPC as needed.

        A generator: it fetches the next page only when the loop reaches it,
        and stopping early fetches no more. ``timeout`` bounds each page's
        RPC. The arguments are those of list_tasks_page.
        """
        token = ""
        while True:
            page = self.list_tasks_page(
                state=state, page_size=page_size, page_token=token, timeout=timeout
            )
            yield from page.tasks
            if not page.next_page_token:
                return
            token = page.next_page_token

    def watch_task(
        self, task_id: str, *, timeout: float | None = None
    ) -> Generator[Task, None, None]:
        """Yield the caller's task now and on every change, ending after a final state.

        A generator: the RPC starts at the first ``next()``; closing it (or
        leaving the loop and dropping it) cancels the stream. ``timeout``
        (default: the client's) bounds the whole watch: give one as long as
        the task may wait. Raises NotFoundError as get_task, and
        DeadlineExceededError when the timeout runs out first.
        """
        call = self._watch_task(
            pb.WatchTaskRequest(task_id=task_id),
            timeout=self._core.timeout_for(timeout),
            metadata=self._core.metadata,
        )
        try:
            for t in call:
                yield _convert.task_of(t)
        except grpc.RpcError as err:
            raise error_from_rpc(err) from None
        finally:
            cancel(call)
