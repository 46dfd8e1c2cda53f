import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTION_UNSPECIFIED: _ClassVar[Action]
    ACTION_RETRY: _ClassVar[Action]
    ACTION_DO_NOT_RETRY: _ClassVar[Action]

class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REASON_UNSPECIFIED: _ClassVar[Reason]
    REASON_SERVER_HINT: _ClassVar[Reason]
    REASON_BACKOFF: _ClassVar[Reason]
    REASON_SUCCESS: _ClassVar[Reason]
    REASON_STATUS_NOT_RETRYABLE: _ClassVar[Reason]
    REASON_UNSAFE_METHOD: _ClassVar[Reason]
    REASON_ATTEMPTS_EXHAUSTED: _ClassVar[Reason]
    REASON_HINT_EXCEEDS_MAX_DELAY: _ClassVar[Reason]
    REASON_DEADLINE_TOO_SHORT: _ClassVar[Reason]
    REASON_TRANSPORT_ERROR_NOT_RETRYABLE: _ClassVar[Reason]
    REASON_TRANSPORT_RETRY_DISABLED: _ClassVar[Reason]
    REASON_PROVIDER_FORBIDS_RETRY: _ClassVar[Reason]
    REASON_RETRY_BUDGET_EXHAUSTED: _ClassVar[Reason]
    REASON_GATE_CLOSED: _ClassVar[Reason]
    REASON_CANCELED: _ClassVar[Reason]
    REASON_BREAKER_OPEN: _ClassVar[Reason]
    REASON_SHUTTING_DOWN: _ClassVar[Reason]
    REASON_CREDENTIALS_UNAVAILABLE: _ClassVar[Reason]
    REASON_CREDENTIAL_REJECTED: _ClassVar[Reason]

class TransportError(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSPORT_ERROR_UNSPECIFIED: _ClassVar[TransportError]
    TRANSPORT_ERROR_CONNECTION_REFUSED: _ClassVar[TransportError]
    TRANSPORT_ERROR_CONNECTION_RESET: _ClassVar[TransportError]
    TRANSPORT_ERROR_EOF: _ClassVar[TransportError]
    TRANSPORT_ERROR_TIMEOUT: _ClassVar[TransportError]
    TRANSPORT_ERROR_DNS_TEMPORARY: _ClassVar[TransportError]
    TRANSPORT_ERROR_DNS_NOT_FOUND: _ClassVar[TransportError]
    TRANSPORT_ERROR_TLS_CERTIFICATE: _ClassVar[TransportError]
    TRANSPORT_ERROR_CANCELED: _ClassVar[TransportError]
    TRANSPORT_ERROR_INVALID_URL: _ClassVar[TransportError]
    TRANSPORT_ERROR_DESTINATION_REFUSED: _ClassVar[TransportError]
    TRANSPORT_ERROR_OTHER: _ClassVar[TransportError]
    TRANSPORT_ERROR_BODY_INCOMPLETE: _ClassVar[TransportError]
    TRANSPORT_ERROR_RESPONSE_HEADERS_TOO_LARGE: _ClassVar[TransportError]

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_UNSPECIFIED: _ClassVar[Outcome]
    OUTCOME_SUCCESS: _ClassVar[Outcome]
    OUTCOME_NOT_RETRYABLE: _ClassVar[Outcome]
    OUTCOME_ATTEMPTS_EXHAUSTED: _ClassVar[Outcome]
    OUTCOME_HINT_EXCEEDS_MAX_DELAY: _ClassVar[Outcome]
    OUTCOME_DEADLINE_TOO_SHORT: _ClassVar[Outcome]
    OUTCOME_RETRY_BUDGET_EXHAUSTED: _ClassVar[Outcome]
    OUTCOME_GATE_CLOSED: _ClassVar[Outcome]
    OUTCOME_CANCELED: _ClassVar[Outcome]
    OUTCOME_BREAKER_OPEN: _ClassVar[Outcome]
    OUTCOME_SHUTTING_DOWN: _ClassVar[Outcome]
    OUTCOME_CREDENTIALS_UNAVAILABLE: _ClassVar[Outcome]

class BodyEnd(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BODY_END_UNSPECIFIED: _ClassVar[BodyEnd]
    BODY_END_COMPLETE: _ClassVar[BodyEnd]
    BODY_END_NO_RESPONSE: _ClassVar[BodyEnd]
    BODY_END_UPSTREAM_ERROR: _ClassVar[BodyEnd]
    BODY_END_IDLE_TIMEOUT: _ClassVar[BodyEnd]
    BODY_END_SIZE_LIMIT: _ClassVar[BodyEnd]
    BODY_END_TIMEOUT: _ClassVar[BodyEnd]
    BODY_END_CANCELED: _ClassVar[BodyEnd]
    BODY_END_SHUTTING_DOWN: _ClassVar[BodyEnd]

class TaskState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_STATE_UNSPECIFIED: _ClassVar[TaskState]
    TASK_STATE_SCHEDULED: _ClassVar[TaskState]
    TASK_STATE_WAITING: _ClassVar[TaskState]
    TASK_STATE_RUNNING: _ClassVar[TaskState]
    TASK_STATE_SUCCEEDED: _ClassVar[TaskState]
    TASK_STATE_FAILED: _ClassVar[TaskState]
    TASK_STATE_CANCELLED: _ClassVar[TaskState]

class TaskCallbackState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_CALLBACK_STATE_UNSPECIFIED: _ClassVar[TaskCallbackState]
    TASK_CALLBACK_STATE_AWAITING_TASK: _ClassVar[TaskCallbackState]
    TASK_CALLBACK_STATE_PENDING: _ClassVar[TaskCallbackState]
    TASK_CALLBACK_STATE_DELIVERED: _ClassVar[TaskCallbackState]
    TASK_CALLBACK_STATE_FAILED: _ClassVar[TaskCallbackState]
ACTION_UNSPECIFIED: Action
ACTION_RETRY: Action
ACTION_DO_NOT_RETRY: Action
REASON_UNSPECIFIED: Reason
REASON_SERVER_HINT: Reason
REASON_BACKOFF: Reason
REASON_SUCCESS: Reason
REASON_STATUS_NOT_RETRYABLE: Reason
REASON_UNSAFE_METHOD: Reason
REASON_ATTEMPTS_EXHAUSTED: Reason
REASON_HINT_EXCEEDS_MAX_DELAY: Reason
REASON_DEADLINE_TOO_SHORT: Reason
REASON_TRANSPORT_ERROR_NOT_RETRYABLE: Reason
REASON_TRANSPORT_RETRY_DISABLED: Reason
REASON_PROVIDER_FORBIDS_RETRY: Reason
REASON_RETRY_BUDGET_EXHAUSTED: Reason
REASON_GATE_CLOSED: Reason
REASON_CANCELED: Reason
REASON_BREAKER_OPEN: Reason
REASON_SHUTTING_DOWN: Reason
REASON_CREDENTIALS_UNAVAILABLE: Reason
REASON_CREDENTIAL_REJECTED: Reason
TRANSPORT_ERROR_UNSPECIFIED: TransportError
TRANSPORT_ERROR_CONNECTION_REFUSED: TransportError
TRANSPORT_ERROR_CONNECTION_RESET: TransportError
TRANSPORT_ERROR_EOF: TransportError
TRANSPORT_ERROR_TIMEOUT: TransportError
TRANSPORT_ERROR_DNS_TEMPORARY: TransportError
TRANSPORT_ERROR_DNS_NOT_FOUND: TransportError
TRANSPORT_ERROR_TLS_CERTIFICATE: TransportError
TRANSPORT_ERROR_CANCELED: TransportError
TRANSPORT_ERROR_INVALID_URL: TransportError
TRANSPORT_ERROR_DESTINATION_REFUSED: TransportError
TRANSPORT_ERROR_OTHER: TransportError
TRANSPORT_ERROR_BODY_INCOMPLETE: TransportError
TRANSPORT_ERROR_RESPONSE_HEADERS_TOO_LARGE: TransportError
OUTCOME_UNSPECIFIED: Outcome
OUTCOME_SUCCESS: Outcome
OUTCOME_NOT_RETRYABLE: Outcome
OUTCOME_ATTEMPTS_EXHAUSTED: Outcome
OUTCOME_HINT_EXCEEDS_MAX_DELAY: Outcome
OUTCOME_DEADLINE_TOO_SHORT: Outcome
OUTCOME_RETRY_BUDGET_EXHAUSTED: Outcome
OUTCOME_GATE_CLOSED: Outcome
OUTCOME_CANCELED: Outcome
OUTCOME_BREAKER_OPEN: Outcome
OUTCOME_SHUTTING_DOWN: Outcome
OUTCOME_CREDENTIALS_UNAVAILABLE: Outcome
BODY_END_UNSPECIFIED: BodyEnd
BODY_END_COMPLETE: BodyEnd
BODY_END_NO_RESPONSE: BodyEnd
BODY_END_UPSTREAM_ERROR: BodyEnd
BODY_END_IDLE_TIMEOUT: BodyEnd
BODY_END_SIZE_LIMIT: BodyEnd
BODY_END_TIMEOUT: BodyEnd
BODY_END_CANCELED: BodyEnd
BODY_END_SHUTTING_DOWN: BodyEnd
TASK_STATE_UNSPECIFIED: TaskState
TASK_STATE_SCHEDULED: TaskState
TASK_STATE_WAITING: TaskState
TASK_STATE_RUNNING: TaskState
TASK_STATE_SUCCEEDED: TaskState
TASK_STATE_FAILED: TaskState
TASK_STATE_CANCELLED: TaskState
TASK_CALLBACK_STATE_UNSPECIFIED: TaskCallbackState
TASK_CALLBACK_STATE_AWAITING_TASK: TaskCallbackState
TASK_CALLBACK_STATE_PENDING: TaskCallbackState
TASK_CALLBACK_STATE_DELIVERED: TaskCallbackState
TASK_CALLBACK_STATE_FAILED: TaskCallbackState

class HttpHeader(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class Decision(_message.Message):
    __slots__ = ("action", "delay", "hint_source", "hint", "reason", "provider", "rule")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    HINT_SOURCE_FIELD_NUMBER: _ClassVar[int]
    HINT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    action: Action
    delay: _duration_pb2.Duration
    hint_source: str
    hint: _duration_pb2.Duration
    reason: Reason
    provider: str
    rule: str
    def __init__(self, action: _Optional[_Union[Action, str]] = ..., delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., hint_source: _Optional[str] = ..., hint: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., reason: _Optional[_Union[Reason, str]] = ..., provider: _Optional[str] = ..., rule: _Optional[str] = ...) -> None: ...

class ClassifyResponseRequest(_message.Message):
    __slots__ = ("policy", "provider", "method", "status_code", "headers", "attempt", "now", "body", "transport_error", "request_headers", "url", "deadline")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_ERROR_FIELD_NUMBER: _ClassVar[int]
    REQUEST_HEADERS_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    policy: str
    provider: str
    method: str
    status_code: int
    headers: _containers.RepeatedCompositeFieldContainer[HttpHeader]
    attempt: int
    now: _timestamp_pb2.Timestamp
    body: bytes
    transport_error: TransportError
    request_headers: _containers.RepeatedCompositeFieldContainer[HttpHeader]
    url: str
    deadline: _timestamp_pb2.Timestamp
    def __init__(self, policy: _Optional[str] = ..., provider: _Optional[str] = ..., method: _Optional[str] = ..., status_code: _Optional[int] = ..., headers: _Optional[_Iterable[_Union[HttpHeader, _Mapping]]] = ..., attempt: _Optional[int] = ..., now: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., body: _Optional[bytes] = ..., transport_error: _Optional[_Union[TransportError, str]] = ..., request_headers: _Optional[_Iterable[_Union[HttpHeader, _Mapping]]] = ..., url: _Optional[str] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ClassifyResponseResponse(_message.Message):
    __slots__ = ("decision",)
    DECISION_FIELD_NUMBER: _ClassVar[int]
    decision: Decision
    def __init__(self, decision: _Optional[_Union[Decision, _Mapping]] = ...) -> None: ...

class HttpRequest(_message.Message):
    __slots__ = ("method", "url", "headers", "body")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    method: str
    url: str
    headers: _containers.RepeatedCompositeFieldContainer[HttpHeader]
    body: bytes
    def __init__(self, method: _Optional[str] = ..., url: _Optional[str] = ..., headers: _Optional[_Iterable[_Union[HttpHeader, _Mapping]]] = ..., body: _Optional[bytes] = ...) -> None: ...

class HttpResponse(_message.Message):
    __slots__ = ("status_code", "headers", "body", "body_truncated", "body_incomplete")
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    BODY_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    BODY_INCOMPLETE_FIELD_NUMBER: _ClassVar[int]
    status_code: int
    headers: _containers.RepeatedCompositeFieldContainer[HttpHeader]
    body: bytes
    body_truncated: bool
    body_incomplete: bool
    def __init__(self, status_code: _Optional[int] = ..., headers: _Optional[_Iterable[_Union[HttpHeader, _Mapping]]] = ..., body: _Optional[bytes] = ..., body_truncated: _Optional[bool] = ..., body_incomplete: _Optional[bool] = ...) -> None: ...

class ExecuteOverrides(_message.Message):
    __slots__ = ("max_retries", "max_delay", "total_timeout", "attempt_timeout", "max_response_body")
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    MAX_DELAY_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_RESPONSE_BODY_FIELD_NUMBER: _ClassVar[int]
    max_retries: int
    max_delay: _duration_pb2.Duration
    total_timeout: _duration_pb2.Duration
    attempt_timeout: _duration_pb2.Duration
    max_response_body: int
    def __init__(self, max_retries: _Optional[int] = ..., max_delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., total_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., attempt_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_response_body: _Optional[int] = ...) -> None: ...

class ExecuteRequest(_message.Message):
    __slots__ = ("request", "policy", "provider", "overrides")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    OVERRIDES_FIELD_NUMBER: _ClassVar[int]
    request: HttpRequest
    policy: str
    provider: str
    overrides: ExecuteOverrides
    def __init__(self, request: _Optional[_Union[HttpRequest, _Mapping]] = ..., policy: _Optional[str] = ..., provider: _Optional[str] = ..., overrides: _Optional[_Union[ExecuteOverrides, _Mapping]] = ...) -> None: ...

class Attempt(_message.Message):
    __slots__ = ("number", "start_time", "duration", "status_code", "transport_error", "error_message", "decision", "waited", "probe")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    WAITED_FIELD_NUMBER: _ClassVar[int]
    PROBE_FIELD_NUMBER: _ClassVar[int]
    number: int
    start_time: _timestamp_pb2.Timestamp
    duration: _duration_pb2.Duration
    status_code: int
    transport_error: TransportError
    error_message: str
    decision: Decision
    waited: _duration_pb2.Duration
    probe: bool
    def __init__(self, number: _Optional[int] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., status_code: _Optional[int] = ..., transport_error: _Optional[_Union[TransportError, str]] = ..., error_message: _Optional[str] = ..., decision: _Optional[_Union[Decision, _Mapping]] = ..., waited: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., probe: _Optional[bool] = ...) -> None: ...

class ExecuteResponse(_message.Message):
    __slots__ = ("response", "attempts", "outcome", "retry_after", "provider")
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    response: HttpResponse
    attempts: _containers.RepeatedCompositeFieldContainer[Attempt]
    outcome: Outcome
    retry_after: _duration_pb2.Duration
    provider: str
    def __init__(self, response: _Optional[_Union[HttpResponse, _Mapping]] = ..., attempts: _Optional[_Iterable[_Union[Attempt, _Mapping]]] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., provider: _Optional[str] = ...) -> None: ...

class ExecuteStreamResponse(_message.Message):
    __slots__ = ("head", "chunk", "end")
    HEAD_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    head: StreamHead
    chunk: bytes
    end: StreamEnd
    def __init__(self, head: _Optional[_Union[StreamHead, _Mapping]] = ..., chunk: _Optional[bytes] = ..., end: _Optional[_Union[StreamEnd, _Mapping]] = ...) -> None: ...

class StreamHead(_message.Message):
    __slots__ = ("status_code", "headers", "attempts", "provider")
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    status_code: int
    headers: _containers.RepeatedCompositeFieldContainer[HttpHeader]
    attempts: _containers.RepeatedCompositeFieldContainer[Attempt]
    provider: str
    def __init__(self, status_code: _Optional[int] = ..., headers: _Optional[_Iterable[_Union[HttpHeader, _Mapping]]] = ..., attempts: _Optional[_Iterable[_Union[Attempt, _Mapping]]] = ..., provider: _Optional[str] = ...) -> None: ...

class StreamEnd(_message.Message):
    __slots__ = ("attempts", "outcome", "retry_after", "body_complete", "body_end", "error_message", "trailers", "body_bytes", "provider")
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    BODY_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    BODY_END_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRAILERS_FIELD_NUMBER: _ClassVar[int]
    BODY_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    attempts: _containers.RepeatedCompositeFieldContainer[Attempt]
    outcome: Outcome
    retry_after: _duration_pb2.Duration
    body_complete: bool
    body_end: BodyEnd
    error_message: str
    trailers: _containers.RepeatedCompositeFieldContainer[HttpHeader]
    body_bytes: int
    provider: str
    def __init__(self, attempts: _Optional[_Iterable[_Union[Attempt, _Mapping]]] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., body_complete: _Optional[bool] = ..., body_end: _Optional[_Union[BodyEnd, str]] = ..., error_message: _Optional[str] = ..., trailers: _Optional[_Iterable[_Union[HttpHeader, _Mapping]]] = ..., body_bytes: _Optional[int] = ..., provider: _Optional[str] = ...) -> None: ...

class TaskCallback(_message.Message):
    __slots__ = ("url",)
    URL_FIELD_NUMBER: _ClassVar[int]
    url: str
    def __init__(self, url: _Optional[str] = ...) -> None: ...

class CreateTaskRequest(_message.Message):
    __slots__ = ("execute", "task_id", "not_before", "give_up_after", "callback")
    EXECUTE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_FIELD_NUMBER: _ClassVar[int]
    GIVE_UP_AFTER_FIELD_NUMBER: _ClassVar[int]
    CALLBACK_FIELD_NUMBER: _ClassVar[int]
    execute: ExecuteRequest
    task_id: str
    not_before: _timestamp_pb2.Timestamp
    give_up_after: _timestamp_pb2.Timestamp
    callback: TaskCallback
    def __init__(self, execute: _Optional[_Union[ExecuteRequest, _Mapping]] = ..., task_id: _Optional[str] = ..., not_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., give_up_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., callback: _Optional[_Union[TaskCallback, _Mapping]] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("task_id", "policy", "state", "not_before", "give_up_after", "attempts", "response", "outcome", "create_time", "update_time", "next_run_time", "wait_reason", "idempotency_key", "callback_state", "callback_attempts", "callback_last_error")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_FIELD_NUMBER: _ClassVar[int]
    GIVE_UP_AFTER_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_TIME_FIELD_NUMBER: _ClassVar[int]
    WAIT_REASON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CALLBACK_STATE_FIELD_NUMBER: _ClassVar[int]
    CALLBACK_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CALLBACK_LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    policy: str
    state: TaskState
    not_before: _timestamp_pb2.Timestamp
    give_up_after: _timestamp_pb2.Timestamp
    attempts: _containers.RepeatedCompositeFieldContainer[Attempt]
    response: HttpResponse
    outcome: Outcome
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    next_run_time: _timestamp_pb2.Timestamp
    wait_reason: str
    idempotency_key: str
    callback_state: TaskCallbackState
    callback_attempts: int
    callback_last_error: str
    def __init__(self, task_id: _Optional[str] = ..., policy: _Optional[str] = ..., state: _Optional[_Union[TaskState, str]] = ..., not_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., give_up_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., attempts: _Optional[_Iterable[_Union[Attempt, _Mapping]]] = ..., response: _Optional[_Union[HttpResponse, _Mapping]] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., next_run_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., wait_reason: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., callback_state: _Optional[_Union[TaskCallbackState, str]] = ..., callback_attempts: _Optional[int] = ..., callback_last_error: _Optional[str] = ...) -> None: ...

class GetTaskRequest(_message.Message):
    __slots__ = ("task_id",)
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    def __init__(self, task_id: _Optional[str] = ...) -> None: ...

class ListTasksRequest(_message.Message):
    __slots__ = ("state", "page_size", "page_token")
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    state: TaskState
    page_size: int
    page_token: str
    def __init__(self, state: _Optional[_Union[TaskState, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTasksResponse(_message.Message):
    __slots__ = ("tasks", "next_page_token")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    next_page_token: str
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CancelTaskRequest(_message.Message):
    __slots__ = ("task_id",)
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    def __init__(self, task_id: _Optional[str] = ...) -> None: ...

class WatchTaskRequest(_message.Message):
    __slots__ = ("task_id",)
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    def __init__(self, task_id: _Optional[str] = ...) -> None: ...

class RetryTaskRequest(_message.Message):
    __slots__ = ("task_id",)
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    def __init__(self, task_id: _Optional[str] = ...) -> None: ...
