import type { GenEnum, GenFile, GenMessage, GenService } from "@bufbuild/protobuf/codegenv2";
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file retrybroker/v1/broker.proto.
 */
export declare const file_retrybroker_v1_broker: GenFile;
/**
 * HttpHeader is one header line. Lists of headers keep their order and their
 * duplicates: a header that appears twice is sent (or was received) twice.
 *
 * @generated from message retrybroker.v1.HttpHeader
 */
export type HttpHeader = Message<"retrybroker.v1.HttpHeader"> & {
    /**
     * name is the header field name, an RFC 9110 token (case-insensitive).
     *
     * @generated from field: string name = 1;
     */
    name: string;
    /**
     * value is the field value. It must not hold CR, LF or NUL.
     *
     * @generated from field: string value = 2;
     */
    value: string;
};
/**
 * Describes the message retrybroker.v1.HttpHeader.
 * Use `create(HttpHeaderSchema)` to create a new message.
 */
export declare const HttpHeaderSchema: GenMessage<HttpHeader>;
/**
 * Decision is the outcome of applying the retry rules to one attempt.
 *
 * @generated from message retrybroker.v1.Decision
 */
export type Decision = Message<"retrybroker.v1.Decision"> & {
    /**
     * action says whether to send the request again.
     *
     * @generated from field: retrybroker.v1.Action action = 1;
     */
    action: Action;
    /**
     * delay is the wait before the next attempt. Set only when action is
     * ACTION_RETRY; zero means "retry at once". A delay that comes from a
     * server hint is never shortened by jitter.
     *
     * @generated from field: google.protobuf.Duration delay = 2;
     */
    delay?: Duration | undefined;
    /**
     * hint_source is the lower-case header name that set the delay, or
     * "body:<field>" for a body field (for example "body:retry_after").
     * Empty when the delay is backoff or there is no hint.
     *
     * @generated from field: string hint_source = 3;
     */
    hintSource: string;
    /**
     * hint is the server's hint, when a valid one was found, also when the
     * broker gives up because it is longer than max_delay or the deadline.
     * Unset when there is no valid hint.
     *
     * @generated from field: google.protobuf.Duration hint = 4;
     */
    hint?: Duration | undefined;
    /**
     * reason explains the decision.
     *
     * @generated from field: retrybroker.v1.Reason reason = 5;
     */
    reason: Reason;
    /**
     * provider is the hint reader that was used, for example "github".
     *
     * @generated from field: string provider = 6;
     */
    provider: string;
    /**
     * rule names the provider catalog rule that decided, for example
     * "openai/insufficient_quota"; empty when the header readers and the
     * standard rules decided.
     *
     * @generated from field: string rule = 7;
     */
    rule: string;
};
/**
 * Describes the message retrybroker.v1.Decision.
 * Use `create(DecisionSchema)` to create a new message.
 */
export declare const DecisionSchema: GenMessage<Decision>;
/**
 * ClassifyResponseRequest describes a response the caller got itself.
 * Exactly one of status_code and transport_error must be set.
 *
 * @generated from message retrybroker.v1.ClassifyResponseRequest
 */
export type ClassifyResponseRequest = Message<"retrybroker.v1.ClassifyResponseRequest"> & {
    /**
     * policy names a policy of the caller's tenant; empty means the tenant's
     * default policy. An unknown name answers FAILED_PRECONDITION.
     *
     * @generated from field: string policy = 1;
     */
    policy: string;
    /**
     * provider overrides the hint reader, for example "github" or "none".
     * Empty means the policy's provider, or the one chosen from url's host.
     * An unknown name answers INVALID_ARGUMENT.
     *
     * @generated from field: string provider = 2;
     */
    provider: string;
    /**
     * method is the HTTP method of the request, for example "GET"
     * (case-sensitive, an RFC 9110 token). Empty means GET.
     *
     * @generated from field: string method = 3;
     */
    method: string;
    /**
     * status_code is the HTTP status, 100 to 599. Zero when transport_error is set.
     *
     * @generated from field: int32 status_code = 4;
     */
    statusCode: number;
    /**
     * headers are the response headers, in order, duplicates kept. At most 256
     * headers and 64 KiB in all. An idempotency-key header found here (some
     * providers echo it) counts as if the request carried it.
     *
     * @generated from field: repeated retrybroker.v1.HttpHeader headers = 5;
     */
    headers: HttpHeader[];
    /**
     * attempt is the 1-based number of the attempt that produced this
     * response; 0 means 1. At most 1000.
     *
     * @generated from field: uint32 attempt = 6;
     */
    attempt: number;
    /**
     * now is the clock used for absolute hints (HTTP-dates, reset times).
     * Unset means the broker's clock.
     *
     * @generated from field: google.protobuf.Timestamp now = 7;
     */
    now?: Timestamp | undefined;
    /**
     * body holds the leading bytes of the response body, for body-aware
     * readers (discord, google). At most 64 KiB.
     *
     * @generated from field: bytes body = 8;
     */
    body: Uint8Array;
    /**
     * transport_error reports a failure that produced no response, instead of
     * a status. TRANSPORT_ERROR_DESTINATION_REFUSED is not accepted here.
     *
     * @generated from field: retrybroker.v1.TransportError transport_error = 9;
     */
    transportError: TransportError;
    /**
     * request_headers are the headers the request was sent with; the broker
     * looks for the policy's idempotency-key header here. Same limits as headers.
     *
     * @generated from field: repeated retrybroker.v1.HttpHeader request_headers = 10;
     */
    requestHeaders: HttpHeader[];
    /**
     * url is the request URL (optional). When set, it chooses the provider by
     * host, and the broker both reports and updates the tenant's cooldown gate
     * for that destination, so callers share gates with Execute.
     *
     * @generated from field: string url = 11;
     */
    url: string;
    /**
     * deadline is when the caller's logical call must end (optional). When the
     * wait before the next attempt would end at or after it, the decision is
     * ACTION_DO_NOT_RETRY with REASON_DEADLINE_TOO_SHORT, and the hint is
     * still reported.
     *
     * @generated from field: google.protobuf.Timestamp deadline = 12;
     */
    deadline?: Timestamp | undefined;
};
/**
 * Describes the message retrybroker.v1.ClassifyResponseRequest.
 * Use `create(ClassifyResponseRequestSchema)` to create a new message.
 */
export declare const ClassifyResponseRequestSchema: GenMessage<ClassifyResponseRequest>;
/**
 * ClassifyResponseResponse carries the decision.
 *
 * @generated from message retrybroker.v1.ClassifyResponseResponse
 */
export type ClassifyResponseResponse = Message<"retrybroker.v1.ClassifyResponseResponse"> & {
    /**
     * decision is what to do next.
     *
     * @generated from field: retrybroker.v1.Decision decision = 1;
     */
    decision?: Decision | undefined;
};
/**
 * Describes the message retrybroker.v1.ClassifyResponseResponse.
 * Use `create(ClassifyResponseResponseSchema)` to create a new message.
 */
export declare const ClassifyResponseResponseSchema: GenMessage<ClassifyResponseResponse>;
/**
 * HttpRequest describes an outbound HTTP request.
 *
 * @generated from message retrybroker.v1.HttpRequest
 */
export type HttpRequest = Message<"retrybroker.v1.HttpRequest"> & {
    /**
     * method is the HTTP method, an RFC 9110 token. Empty means GET.
     *
     * @generated from field: string method = 1;
     */
    method: string;
    /**
     * url is the absolute http or https URL to call.
     *
     * @generated from field: string url = 2;
     */
    url: string;
    /**
     * headers are sent in order, duplicates kept. Hop-by-hop headers
     * (Connection, Transfer-Encoding, ...), Host and Content-Length are set by
     * the broker and rejected here.
     *
     * @generated from field: repeated retrybroker.v1.HttpHeader headers = 3;
     */
    headers: HttpHeader[];
    /**
     * body is sent on every attempt, unchanged. At most the policy's
     * max_request_body (default 1 MiB).
     *
     * @generated from field: bytes body = 4;
     */
    body: Uint8Array;
};
/**
 * Describes the message retrybroker.v1.HttpRequest.
 * Use `create(HttpRequestSchema)` to create a new message.
 */
export declare const HttpRequestSchema: GenMessage<HttpRequest>;
/**
 * HttpResponse is the final response of an Execute call.
 *
 * @generated from message retrybroker.v1.HttpResponse
 */
export type HttpResponse = Message<"retrybroker.v1.HttpResponse"> & {
    /**
     * status_code is the HTTP status.
     *
     * @generated from field: int32 status_code = 1;
     */
    statusCode: number;
    /**
     * headers are the response headers, in the order received, duplicates kept.
     *
     * @generated from field: repeated retrybroker.v1.HttpHeader headers = 2;
     */
    headers: HttpHeader[];
    /**
     * body is the response body, up to the policy's max_response_body.
     *
     * @generated from field: bytes body = 3;
     */
    body: Uint8Array;
    /**
     * body_truncated is true when the body was longer than returned.
     *
     * @generated from field: bool body_truncated = 4;
     */
    bodyTruncated: boolean;
    /**
     * body_incomplete is true when the upstream body ended early (reset,
     * short Content-Length, timeout while reading): body holds what arrived.
     * Such a response is never reported with OUTCOME_SUCCESS.
     *
     * @generated from field: bool body_incomplete = 5;
     */
    bodyIncomplete: boolean;
};
/**
 * Describes the message retrybroker.v1.HttpResponse.
 * Use `create(HttpResponseSchema)` to create a new message.
 */
export declare const HttpResponseSchema: GenMessage<HttpResponse>;
/**
 * ExecuteOverrides narrow the policy for one call. They can only make the
 * call more conservative: a value above the policy's own is refused with
 * INVALID_ARGUMENT.
 *
 * @generated from message retrybroker.v1.ExecuteOverrides
 */
export type ExecuteOverrides = Message<"retrybroker.v1.ExecuteOverrides"> & {
    /**
     * max_retries lowers the policy's max_retries for this call.
     *
     * @generated from field: optional uint32 max_retries = 1;
     */
    maxRetries?: number | undefined;
    /**
     * max_delay lowers the longest hint the broker will wait for.
     *
     * @generated from field: google.protobuf.Duration max_delay = 2;
     */
    maxDelay?: Duration | undefined;
    /**
     * total_timeout lowers the overall time for the call, waits included.
     *
     * @generated from field: google.protobuf.Duration total_timeout = 3;
     */
    totalTimeout?: Duration | undefined;
    /**
     * attempt_timeout lowers the time for one attempt.
     *
     * @generated from field: google.protobuf.Duration attempt_timeout = 4;
     */
    attemptTimeout?: Duration | undefined;
    /**
     * max_response_body lowers the number of body bytes returned (bytes).
     *
     * @generated from field: optional uint64 max_response_body = 5;
     */
    maxResponseBody?: bigint | undefined;
};
/**
 * Describes the message retrybroker.v1.ExecuteOverrides.
 * Use `create(ExecuteOverridesSchema)` to create a new message.
 */
export declare const ExecuteOverridesSchema: GenMessage<ExecuteOverrides>;
/**
 * ExecuteRequest asks the broker to perform an HTTP call.
 *
 * @generated from message retrybroker.v1.ExecuteRequest
 */
export type ExecuteRequest = Message<"retrybroker.v1.ExecuteRequest"> & {
    /**
     * request is the HTTP request to send. Required.
     *
     * @generated from field: retrybroker.v1.HttpRequest request = 1;
     */
    request?: HttpRequest | undefined;
    /**
     * policy names a policy of the caller's tenant; empty means the default.
     *
     * @generated from field: string policy = 2;
     */
    policy: string;
    /**
     * provider overrides the hint reader; empty means the policy's, or the
     * one chosen from the URL's host.
     *
     * @generated from field: string provider = 3;
     */
    provider: string;
    /**
     * overrides narrow the policy for this call.
     *
     * @generated from field: retrybroker.v1.ExecuteOverrides overrides = 4;
     */
    overrides?: ExecuteOverrides | undefined;
};
/**
 * Describes the message retrybroker.v1.ExecuteRequest.
 * Use `create(ExecuteRequestSchema)` to create a new message.
 */
export declare const ExecuteRequestSchema: GenMessage<ExecuteRequest>;
/**
 * Attempt records one send (or one refused chance to send: an attempt
 * whose decision reason is REASON_CREDENTIALS_UNAVAILABLE was not sent).
 *
 * @generated from message retrybroker.v1.Attempt
 */
export type Attempt = Message<"retrybroker.v1.Attempt"> & {
    /**
     * number is 1-based.
     *
     * @generated from field: uint32 number = 1;
     */
    number: number;
    /**
     * start_time is when the request was sent.
     *
     * @generated from field: google.protobuf.Timestamp start_time = 2;
     */
    startTime?: Timestamp | undefined;
    /**
     * duration is from sending to the response headers (or the error).
     *
     * @generated from field: google.protobuf.Duration duration = 3;
     */
    duration?: Duration | undefined;
    /**
     * status_code is the HTTP status, or 0 when transport_error is set.
     *
     * @generated from field: int32 status_code = 4;
     */
    statusCode: number;
    /**
     * transport_error is the kind of failure when there was no response.
     *
     * @generated from field: retrybroker.v1.TransportError transport_error = 5;
     */
    transportError: TransportError;
    /**
     * error_message describes the transport failure (URL redacted).
     *
     * @generated from field: string error_message = 6;
     */
    errorMessage: string;
    /**
     * decision is the decision taken after this attempt.
     *
     * @generated from field: retrybroker.v1.Decision decision = 7;
     */
    decision?: Decision | undefined;
    /**
     * waited is how long the broker waited before sending this attempt
     * (backoff, hint, cooldown gate or pacing).
     *
     * @generated from field: google.protobuf.Duration waited = 8;
     */
    waited?: Duration | undefined;
    /**
     * probe is true when the attempt went out as the single unproven call of
     * a learning cooldown gate or of a half-open failure breaker.
     *
     * @generated from field: bool probe = 9;
     */
    probe: boolean;
};
/**
 * Describes the message retrybroker.v1.Attempt.
 * Use `create(AttemptSchema)` to create a new message.
 */
export declare const AttemptSchema: GenMessage<Attempt>;
/**
 * ExecuteResponse is the result of an Execute call.
 *
 * @generated from message retrybroker.v1.ExecuteResponse
 */
export type ExecuteResponse = Message<"retrybroker.v1.ExecuteResponse"> & {
    /**
     * response is the final HTTP response; unset when the last attempt ended
     * in a transport error or no attempt was sent.
     *
     * @generated from field: retrybroker.v1.HttpResponse response = 1;
     */
    response?: HttpResponse | undefined;
    /**
     * attempts records every attempt, in order.
     *
     * @generated from field: repeated retrybroker.v1.Attempt attempts = 2;
     */
    attempts: Attempt[];
    /**
     * outcome says how the call ended.
     *
     * @generated from field: retrybroker.v1.Outcome outcome = 3;
     */
    outcome: Outcome;
    /**
     * retry_after is when the caller may try again, when the broker gave up
     * early on a hint, a deadline or a closed gate.
     *
     * @generated from field: google.protobuf.Duration retry_after = 4;
     */
    retryAfter?: Duration | undefined;
    /**
     * provider is the hint reader that was used.
     *
     * @generated from field: string provider = 5;
     */
    provider: string;
};
/**
 * Describes the message retrybroker.v1.ExecuteResponse.
 * Use `create(ExecuteResponseSchema)` to create a new message.
 */
export declare const ExecuteResponseSchema: GenMessage<ExecuteResponse>;
/**
 * ExecuteStreamResponse is one message of an ExecuteStream call: exactly one
 * head (when a response is final by the rules), then zero or more chunks,
 * then exactly one end, always last.
 *
 * @generated from message retrybroker.v1.ExecuteStreamResponse
 */
export type ExecuteStreamResponse = Message<"retrybroker.v1.ExecuteStreamResponse"> & {
    /**
     * event is the message's kind.
     *
     * @generated from oneof retrybroker.v1.ExecuteStreamResponse.event
     */
    event: {
        /**
         * head carries the final response's status and headers, and the
         * attempts so far (the last one is the attempt being streamed).
         *
         * @generated from field: retrybroker.v1.StreamHead head = 1;
         */
        value: StreamHead;
        case: "head";
    } | {
        /**
         * chunk holds the next body bytes, in order, as the upstream sent them.
         *
         * @generated from field: bytes chunk = 2;
         */
        value: Uint8Array;
        case: "chunk";
    } | {
        /**
         * end closes the stream: how the call ended and whether the body is
         * complete.
         *
         * @generated from field: retrybroker.v1.StreamEnd end = 3;
         */
        value: StreamEnd;
        case: "end";
    } | {
        case: undefined;
        value?: undefined;
    };
};
/**
 * Describes the message retrybroker.v1.ExecuteStreamResponse.
 * Use `create(ExecuteStreamResponseSchema)` to create a new message.
 */
export declare const ExecuteStreamResponseSchema: GenMessage<ExecuteStreamResponse>;
/**
 * StreamHead is the status and headers of the response being streamed.
 *
 * @generated from message retrybroker.v1.StreamHead
 */
export type StreamHead = Message<"retrybroker.v1.StreamHead"> & {
    /**
     * status_code is the HTTP status.
     *
     * @generated from field: int32 status_code = 1;
     */
    statusCode: number;
    /**
     * headers are the response headers (as in HttpResponse.headers).
     *
     * @generated from field: repeated retrybroker.v1.HttpHeader headers = 2;
     */
    headers: HttpHeader[];
    /**
     * attempts records every attempt so far, in order.
     *
     * @generated from field: repeated retrybroker.v1.Attempt attempts = 3;
     */
    attempts: Attempt[];
    /**
     * provider is the hint reader that was used.
     *
     * @generated from field: string provider = 4;
     */
    provider: string;
};
/**
 * Describes the message retrybroker.v1.StreamHead.
 * Use `create(StreamHeadSchema)` to create a new message.
 */
export declare const StreamHeadSchema: GenMessage<StreamHead>;
/**
 * StreamEnd is the last message of an ExecuteStream call.
 *
 * @generated from message retrybroker.v1.StreamEnd
 */
export type StreamEnd = Message<"retrybroker.v1.StreamEnd"> & {
    /**
     * attempts records every attempt, in order.
     *
     * @generated from field: repeated retrybroker.v1.Attempt attempts = 1;
     */
    attempts: Attempt[];
    /**
     * outcome says how the call ended (as ExecuteResponse.outcome). A body
     * that did not complete never ends with OUTCOME_SUCCESS.
     *
     * @generated from field: retrybroker.v1.Outcome outcome = 2;
     */
    outcome: Outcome;
    /**
     * retry_after is when the caller may try again, when the broker gave up
     * early on a hint, a deadline, a closed gate or an open breaker.
     *
     * @generated from field: google.protobuf.Duration retry_after = 3;
     */
    retryAfter?: Duration | undefined;
    /**
     * body_complete is true only when the whole upstream body was streamed.
     *
     * @generated from field: bool body_complete = 4;
     */
    bodyComplete: boolean;
    /**
     * body_end says how the body ended.
     *
     * @generated from field: retrybroker.v1.BodyEnd body_end = 5;
     */
    bodyEnd: BodyEnd;
    /**
     * error_message describes why the body did not complete (URLs redacted).
     *
     * @generated from field: string error_message = 6;
     */
    errorMessage: string;
    /**
     * trailers are the upstream's HTTP trailers, if any.
     *
     * @generated from field: repeated retrybroker.v1.HttpHeader trailers = 7;
     */
    trailers: HttpHeader[];
    /**
     * body_bytes is the number of body bytes streamed.
     *
     * @generated from field: uint64 body_bytes = 8;
     */
    bodyBytes: bigint;
    /**
     * provider is the hint reader that was used.
     *
     * @generated from field: string provider = 9;
     */
    provider: string;
};
/**
 * Describes the message retrybroker.v1.StreamEnd.
 * Use `create(StreamEndSchema)` to create a new message.
 */
export declare const StreamEndSchema: GenMessage<StreamEnd>;
/**
 * TaskCallback asks the broker to POST the final task as JSON (the Task
 * message in protobuf's JSON mapping) to url when the task reaches a final
 * state, signed as Standard Webhooks do (webhook-id, webhook-timestamp,
 * webhook-signature; see docs/tasks.md). The broker must be started with
 * --tasks-callback-secret-file, or CreateTask answers FAILED_PRECONDITION.
 *
 * @generated from message retrybroker.v1.TaskCallback
 */
export type TaskCallback = Message<"retrybroker.v1.TaskCallback"> & {
    /**
     * url is the http or https URL to POST to (validated as the request's
     * URL is); it is dialled through the destination guard with the task
     * policy's allow_destinations, allow_ports and allow_hosts.
     *
     * @generated from field: string url = 1;
     */
    url: string;
};
/**
 * Describes the message retrybroker.v1.TaskCallback.
 * Use `create(TaskCallbackSchema)` to create a new message.
 */
export declare const TaskCallbackSchema: GenMessage<TaskCallback>;
/**
 * CreateTaskRequest creates a task.
 *
 * @generated from message retrybroker.v1.CreateTaskRequest
 */
export type CreateTaskRequest = Message<"retrybroker.v1.CreateTaskRequest"> & {
    /**
     * execute is the call to make, validated as Execute validates it. Required.
     *
     * @generated from field: retrybroker.v1.ExecuteRequest execute = 1;
     */
    execute?: ExecuteRequest | undefined;
    /**
     * task_id names the task within the caller's tenant: at most 128
     * characters of [A-Za-z0-9_-]. Empty means a generated id. A second
     * create with the same id returns the first task unchanged.
     *
     * @generated from field: string task_id = 2;
     */
    taskId: string;
    /**
     * not_before is the earliest time the task runs; unset means now.
     *
     * @generated from field: google.protobuf.Timestamp not_before = 3;
     */
    notBefore?: Timestamp | undefined;
    /**
     * give_up_after is when a task that has not succeeded becomes FAILED;
     * unset means never. It must be after not_before.
     *
     * @generated from field: google.protobuf.Timestamp give_up_after = 4;
     */
    giveUpAfter?: Timestamp | undefined;
    /**
     * callback, when set, receives the final task.
     *
     * @generated from field: retrybroker.v1.TaskCallback callback = 5;
     */
    callback?: TaskCallback | undefined;
};
/**
 * Describes the message retrybroker.v1.CreateTaskRequest.
 * Use `create(CreateTaskRequestSchema)` to create a new message.
 */
export declare const CreateTaskRequestSchema: GenMessage<CreateTaskRequest>;
/**
 * Task is a deferred call and what became of it.
 *
 * @generated from message retrybroker.v1.Task
 */
export type Task = Message<"retrybroker.v1.Task"> & {
    /**
     * task_id names the task within its tenant.
     *
     * @generated from field: string task_id = 1;
     */
    taskId: string;
    /**
     * policy is the policy the task runs under (empty: the tenant's default).
     *
     * @generated from field: string policy = 2;
     */
    policy: string;
    /**
     * state is where the task is.
     *
     * @generated from field: retrybroker.v1.TaskState state = 3;
     */
    state: TaskState;
    /**
     * not_before is the earliest time the task runs.
     *
     * @generated from field: google.protobuf.Timestamp not_before = 4;
     */
    notBefore?: Timestamp | undefined;
    /**
     * give_up_after is when an unfinished task fails; unset means never.
     *
     * @generated from field: google.protobuf.Timestamp give_up_after = 5;
     */
    giveUpAfter?: Timestamp | undefined;
    /**
     * attempts records every send over every dispatch, in order.
     *
     * @generated from field: repeated retrybroker.v1.Attempt attempts = 6;
     */
    attempts: Attempt[];
    /**
     * response is the final HTTP response, once there is one.
     *
     * @generated from field: retrybroker.v1.HttpResponse response = 7;
     */
    response?: HttpResponse | undefined;
    /**
     * outcome is how the last dispatch ended; OUTCOME_UNSPECIFIED before
     * the first.
     *
     * @generated from field: retrybroker.v1.Outcome outcome = 8;
     */
    outcome: Outcome;
    /**
     * create_time is when the task was created.
     *
     * @generated from field: google.protobuf.Timestamp create_time = 9;
     */
    createTime?: Timestamp | undefined;
    /**
     * update_time is when the task last changed.
     *
     * @generated from field: google.protobuf.Timestamp update_time = 10;
     */
    updateTime?: Timestamp | undefined;
    /**
     * next_run_time is when the task is due next (SCHEDULED or WAITING).
     *
     * @generated from field: google.protobuf.Timestamp next_run_time = 11;
     */
    nextRunTime?: Timestamp | undefined;
    /**
     * wait_reason says why a WAITING task waits: the outcome's name, e.g.
     * "gate_closed", "breaker_open", "hint_exceeds_max_delay".
     *
     * @generated from field: string wait_reason = 12;
     */
    waitReason: string;
    /**
     * idempotency_key is the value of the policy's idempotency header that
     * every send of the task carries.
     *
     * @generated from field: string idempotency_key = 13;
     */
    idempotencyKey: string;
    /**
     * callback_state is where the delivery of the task's callback is
     * (UNSPECIFIED: the task has none).
     *
     * @generated from field: retrybroker.v1.TaskCallbackState callback_state = 14;
     */
    callbackState: TaskCallbackState;
    /**
     * callback_attempts counts the POSTs tried for the current final state
     * (a refused destination counts one, though nothing was sent).
     *
     * @generated from field: int32 callback_attempts = 15;
     */
    callbackAttempts: number;
    /**
     * callback_last_error describes the last failed try (the receiver's
     * status, a transport error or a refused destination); empty after a
     * delivery. It never holds the signing secret.
     *
     * @generated from field: string callback_last_error = 16;
     */
    callbackLastError: string;
};
/**
 * Describes the message retrybroker.v1.Task.
 * Use `create(TaskSchema)` to create a new message.
 */
export declare const TaskSchema: GenMessage<Task>;
/**
 * GetTaskRequest names a task.
 *
 * @generated from message retrybroker.v1.GetTaskRequest
 */
export type GetTaskRequest = Message<"retrybroker.v1.GetTaskRequest"> & {
    /**
     * task_id names the task. Required.
     *
     * @generated from field: string task_id = 1;
     */
    taskId: string;
};
/**
 * Describes the message retrybroker.v1.GetTaskRequest.
 * Use `create(GetTaskRequestSchema)` to create a new message.
 */
export declare const GetTaskRequestSchema: GenMessage<GetTaskRequest>;
/**
 * ListTasksRequest pages through the caller's tasks.
 *
 * @generated from message retrybroker.v1.ListTasksRequest
 */
export type ListTasksRequest = Message<"retrybroker.v1.ListTasksRequest"> & {
    /**
     * state, when set, lists only tasks in that state.
     *
     * @generated from field: retrybroker.v1.TaskState state = 1;
     */
    state: TaskState;
    /**
     * page_size is at most 1000; 0 means 100.
     *
     * @generated from field: int32 page_size = 2;
     */
    pageSize: number;
    /**
     * page_token is a previous response's next_page_token.
     *
     * @generated from field: string page_token = 3;
     */
    pageToken: string;
};
/**
 * Describes the message retrybroker.v1.ListTasksRequest.
 * Use `create(ListTasksRequestSchema)` to create a new message.
 */
export declare const ListTasksRequestSchema: GenMessage<ListTasksRequest>;
/**
 * ListTasksResponse is one page of tasks, oldest first.
 *
 * @generated from message retrybroker.v1.ListTasksResponse
 */
export type ListTasksResponse = Message<"retrybroker.v1.ListTasksResponse"> & {
    /**
     * tasks is the page.
     *
     * @generated from field: repeated retrybroker.v1.Task tasks = 1;
     */
    tasks: Task[];
    /**
     * next_page_token fetches the next page; empty on the last.
     *
     * @generated from field: string next_page_token = 2;
     */
    nextPageToken: string;
};
/**
 * Describes the message retrybroker.v1.ListTasksResponse.
 * Use `create(ListTasksResponseSchema)` to create a new message.
 */
export declare const ListTasksResponseSchema: GenMessage<ListTasksResponse>;
/**
 * CancelTaskRequest names a task to cancel.
 *
 * @generated from message retrybroker.v1.CancelTaskRequest
 */
export type CancelTaskRequest = Message<"retrybroker.v1.CancelTaskRequest"> & {
    /**
     * task_id names the task. Required.
     *
     * @generated from field: string task_id = 1;
     */
    taskId: string;
};
/**
 * Describes the message retrybroker.v1.CancelTaskRequest.
 * Use `create(CancelTaskRequestSchema)` to create a new message.
 */
export declare const CancelTaskRequestSchema: GenMessage<CancelTaskRequest>;
/**
 * WatchTaskRequest names a task to watch.
 *
 * @generated from message retrybroker.v1.WatchTaskRequest
 */
export type WatchTaskRequest = Message<"retrybroker.v1.WatchTaskRequest"> & {
    /**
     * task_id names the task. Required.
     *
     * @generated from field: string task_id = 1;
     */
    taskId: string;
};
/**
 * Describes the message retrybroker.v1.WatchTaskRequest.
 * Use `create(WatchTaskRequestSchema)` to create a new message.
 */
export declare const WatchTaskRequestSchema: GenMessage<WatchTaskRequest>;
/**
 * RetryTaskRequest names a FAILED task to run again.
 *
 * @generated from message retrybroker.v1.RetryTaskRequest
 */
export type RetryTaskRequest = Message<"retrybroker.v1.RetryTaskRequest"> & {
    /**
     * task_id names the task. Required.
     *
     * @generated from field: string task_id = 1;
     */
    taskId: string;
};
/**
 * Describes the message retrybroker.v1.RetryTaskRequest.
 * Use `create(RetryTaskRequestSchema)` to create a new message.
 */
export declare const RetryTaskRequestSchema: GenMessage<RetryTaskRequest>;
/**
 * Action is what the caller should do with the request next.
 *
 * @generated from enum retrybroker.v1.Action
 */
export declare enum Action {
    /**
     * ACTION_UNSPECIFIED is never returned by the broker.
     *
     * @generated from enum value: ACTION_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * ACTION_RETRY: send the request again after Decision.delay.
     *
     * @generated from enum value: ACTION_RETRY = 1;
     */
    RETRY = 1,
    /**
     * ACTION_DO_NOT_RETRY: stop; Decision.reason says why.
     *
     * @generated from enum value: ACTION_DO_NOT_RETRY = 2;
     */
    DO_NOT_RETRY = 2
}
/**
 * Describes the enum retrybroker.v1.Action.
 */
export declare const ActionSchema: GenEnum<Action>;
/**
 * Reason explains a Decision.
 *
 * @generated from enum retrybroker.v1.Reason
 */
export declare enum Reason {
    /**
     * REASON_UNSPECIFIED is never returned by the broker.
     *
     * @generated from enum value: REASON_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * REASON_SERVER_HINT: retry; the delay was set exactly by a server hint.
     *
     * @generated from enum value: REASON_SERVER_HINT = 1;
     */
    SERVER_HINT = 1,
    /**
     * REASON_BACKOFF: retry; no valid hint, the delay is jittered backoff.
     *
     * @generated from enum value: REASON_BACKOFF = 2;
     */
    BACKOFF = 2,
    /**
     * REASON_SUCCESS: do not retry; the response succeeded (1xx, 2xx or 3xx).
     *
     * @generated from enum value: REASON_SUCCESS = 3;
     */
    SUCCESS = 3,
    /**
     * REASON_STATUS_NOT_RETRYABLE: do not retry; the status is not in the
     * policy's retryable list (or is 403 without a valid hint).
     *
     * @generated from enum value: REASON_STATUS_NOT_RETRYABLE = 4;
     */
    STATUS_NOT_RETRYABLE = 4,
    /**
     * REASON_UNSAFE_METHOD: do not retry; the method is not idempotent and the
     * request carries no idempotency key.
     *
     * @generated from enum value: REASON_UNSAFE_METHOD = 5;
     */
    UNSAFE_METHOD = 5,
    /**
     * REASON_ATTEMPTS_EXHAUSTED: do not retry; attempt > max_retries.
     *
     * @generated from enum value: REASON_ATTEMPTS_EXHAUSTED = 6;
     */
    ATTEMPTS_EXHAUSTED = 6,
    /**
     * REASON_HINT_EXCEEDS_MAX_DELAY: do not retry; the server's hint (reported
     * in Decision.hint) is longer than the policy's max_delay.
     *
     * @generated from enum value: REASON_HINT_EXCEEDS_MAX_DELAY = 7;
     */
    HINT_EXCEEDS_MAX_DELAY = 7,
    /**
     * REASON_DEADLINE_TOO_SHORT: do not retry; waiting would run past the
     * caller's deadline. Decision.hint carries the server hint, if any.
     *
     * @generated from enum value: REASON_DEADLINE_TOO_SHORT = 8;
     */
    DEADLINE_TOO_SHORT = 8,
    /**
     * REASON_TRANSPORT_ERROR_NOT_RETRYABLE: do not retry; the transport error
     * is permanent (TLS certificate, no such host, invalid URL, cancellation).
     *
     * @generated from enum value: REASON_TRANSPORT_ERROR_NOT_RETRYABLE = 9;
     */
    TRANSPORT_ERROR_NOT_RETRYABLE = 9,
    /**
     * REASON_TRANSPORT_RETRY_DISABLED: do not retry; the policy sets
     * retry_transport_errors to false.
     *
     * @generated from enum value: REASON_TRANSPORT_RETRY_DISABLED = 10;
     */
    TRANSPORT_RETRY_DISABLED = 10,
    /**
     * REASON_PROVIDER_FORBIDS_RETRY: do not retry; the provider said so
     * explicitly (for example Stripe-Should-Retry: false).
     *
     * @generated from enum value: REASON_PROVIDER_FORBIDS_RETRY = 11;
     */
    PROVIDER_FORBIDS_RETRY = 11,
    /**
     * REASON_RETRY_BUDGET_EXHAUSTED: do not retry; the tenant's retry budget
     * is spent. Decision.delay is unset; Decision.hint carries any hint.
     *
     * @generated from enum value: REASON_RETRY_BUDGET_EXHAUSTED = 12;
     */
    RETRY_BUDGET_EXHAUSTED = 12,
    /**
     * REASON_GATE_CLOSED: a cooldown gate for this tenant and destination is
     * closed; Decision.delay (retry) or Decision.hint (do not retry) says for
     * how long.
     *
     * @generated from enum value: REASON_GATE_CLOSED = 13;
     */
    GATE_CLOSED = 13,
    /**
     * REASON_CANCELED: do not retry; the caller canceled the call.
     *
     * @generated from enum value: REASON_CANCELED = 14;
     */
    CANCELED = 14,
    /**
     * REASON_BREAKER_OPEN: the failure breaker of this tenant and destination
     * is open after repeated failures without a hint; Decision.delay (retry)
     * or Decision.hint (do not retry) says when it lets a probe through.
     *
     * @generated from enum value: REASON_BREAKER_OPEN = 15;
     */
    BREAKER_OPEN = 15,
    /**
     * REASON_SHUTTING_DOWN: do not retry; the broker is shutting down.
     * Decision.hint, when set, says when the retry was due.
     *
     * @generated from enum value: REASON_SHUTTING_DOWN = 16;
     */
    SHUTTING_DOWN = 16,
    /**
     * REASON_CREDENTIALS_UNAVAILABLE: do not retry; the policy's broker-held
     * credential could not be had (token endpoint down or refusing, secret
     * file unreadable, no AWS credentials), so the attempt was not sent: its
     * Attempt has no status and no transport error, and error_message names
     * the credential and the cause (never a secret).
     *
     * @generated from enum value: REASON_CREDENTIALS_UNAVAILABLE = 17;
     */
    CREDENTIALS_UNAVAILABLE = 17,
    /**
     * REASON_CREDENTIAL_REJECTED: retry at once; the upstream answered 401
     * to an attempt that carried the policy's broker-held credential, which
     * was renewed (an OAuth2 token). Done at most once per call; the repeat
     * is an attempt but not a retry (max_retries does not count it).
     *
     * @generated from enum value: REASON_CREDENTIAL_REJECTED = 18;
     */
    CREDENTIAL_REJECTED = 18
}
/**
 * Describes the enum retrybroker.v1.Reason.
 */
export declare const ReasonSchema: GenEnum<Reason>;
/**
 * TransportError is the kind of a failure that produced no HTTP response.
 *
 * @generated from enum retrybroker.v1.TransportError
 */
export declare enum TransportError {
    /**
     * TRANSPORT_ERROR_UNSPECIFIED means "no transport error": a status is set.
     *
     * @generated from enum value: TRANSPORT_ERROR_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * TRANSPORT_ERROR_CONNECTION_REFUSED: the peer refused the connection. Retryable.
     *
     * @generated from enum value: TRANSPORT_ERROR_CONNECTION_REFUSED = 1;
     */
    CONNECTION_REFUSED = 1,
    /**
     * TRANSPORT_ERROR_CONNECTION_RESET: the peer reset the connection. Retryable.
     *
     * @generated from enum value: TRANSPORT_ERROR_CONNECTION_RESET = 2;
     */
    CONNECTION_RESET = 2,
    /**
     * TRANSPORT_ERROR_EOF: the connection closed before a full response. Retryable.
     *
     * @generated from enum value: TRANSPORT_ERROR_EOF = 3;
     */
    EOF = 3,
    /**
     * TRANSPORT_ERROR_TIMEOUT: a connect, TLS or response-header timeout. Retryable.
     *
     * @generated from enum value: TRANSPORT_ERROR_TIMEOUT = 4;
     */
    TIMEOUT = 4,
    /**
     * TRANSPORT_ERROR_DNS_TEMPORARY: a temporary DNS failure. Retryable.
     *
     * @generated from enum value: TRANSPORT_ERROR_DNS_TEMPORARY = 5;
     */
    DNS_TEMPORARY = 5,
    /**
     * TRANSPORT_ERROR_DNS_NOT_FOUND: no such host. Not retryable.
     *
     * @generated from enum value: TRANSPORT_ERROR_DNS_NOT_FOUND = 6;
     */
    DNS_NOT_FOUND = 6,
    /**
     * TRANSPORT_ERROR_TLS_CERTIFICATE: the server's certificate was rejected. Not retryable.
     *
     * @generated from enum value: TRANSPORT_ERROR_TLS_CERTIFICATE = 7;
     */
    TLS_CERTIFICATE = 7,
    /**
     * TRANSPORT_ERROR_CANCELED: the caller canceled. Not retryable.
     *
     * @generated from enum value: TRANSPORT_ERROR_CANCELED = 8;
     */
    CANCELED = 8,
    /**
     * TRANSPORT_ERROR_INVALID_URL: the URL cannot be sent. Not retryable.
     *
     * @generated from enum value: TRANSPORT_ERROR_INVALID_URL = 9;
     */
    INVALID_URL = 9,
    /**
     * TRANSPORT_ERROR_DESTINATION_REFUSED: the destination guard refused the
     * dialled address (Execute only; the call answers PERMISSION_DENIED).
     *
     * @generated from enum value: TRANSPORT_ERROR_DESTINATION_REFUSED = 10;
     */
    DESTINATION_REFUSED = 10,
    /**
     * TRANSPORT_ERROR_OTHER: any other failure. Not retryable.
     *
     * @generated from enum value: TRANSPORT_ERROR_OTHER = 11;
     */
    OTHER = 11,
    /**
     * TRANSPORT_ERROR_BODY_INCOMPLETE: the response headers arrived but the
     * body ended early (connection reset, fewer bytes than Content-Length, a
     * timeout while reading it). Retryable. The attempt keeps its status_code.
     *
     * @generated from enum value: TRANSPORT_ERROR_BODY_INCOMPLETE = 12;
     */
    BODY_INCOMPLETE = 12,
    /**
     * TRANSPORT_ERROR_RESPONSE_HEADERS_TOO_LARGE: the response headers went
     * past the broker's cap (1 MiB, or 1,000 header lines); no status is
     * kept. Retryable.
     *
     * @generated from enum value: TRANSPORT_ERROR_RESPONSE_HEADERS_TOO_LARGE = 13;
     */
    RESPONSE_HEADERS_TOO_LARGE = 13
}
/**
 * Describes the enum retrybroker.v1.TransportError.
 */
export declare const TransportErrorSchema: GenEnum<TransportError>;
/**
 * Outcome says how an Execute call ended.
 *
 * @generated from enum retrybroker.v1.Outcome
 */
export declare enum Outcome {
    /**
     * OUTCOME_UNSPECIFIED is never returned.
     *
     * @generated from enum value: OUTCOME_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * OUTCOME_SUCCESS: the final response succeeded (1xx, 2xx or 3xx).
     *
     * @generated from enum value: OUTCOME_SUCCESS = 1;
     */
    SUCCESS = 1,
    /**
     * OUTCOME_NOT_RETRYABLE: the final response or error may not be retried
     * (status, method or transport error kind).
     *
     * @generated from enum value: OUTCOME_NOT_RETRYABLE = 2;
     */
    NOT_RETRYABLE = 2,
    /**
     * OUTCOME_ATTEMPTS_EXHAUSTED: every allowed attempt failed.
     *
     * @generated from enum value: OUTCOME_ATTEMPTS_EXHAUSTED = 3;
     */
    ATTEMPTS_EXHAUSTED = 3,
    /**
     * OUTCOME_HINT_EXCEEDS_MAX_DELAY: the server asked for a wait longer than
     * max_delay; retry_after carries it.
     *
     * @generated from enum value: OUTCOME_HINT_EXCEEDS_MAX_DELAY = 4;
     */
    HINT_EXCEEDS_MAX_DELAY = 4,
    /**
     * OUTCOME_DEADLINE_TOO_SHORT: the next wait would run past the deadline;
     * retry_after carries it.
     *
     * @generated from enum value: OUTCOME_DEADLINE_TOO_SHORT = 5;
     */
    DEADLINE_TOO_SHORT = 5,
    /**
     * OUTCOME_RETRY_BUDGET_EXHAUSTED: a retry was due but the tenant's retry
     * budget was spent.
     *
     * @generated from enum value: OUTCOME_RETRY_BUDGET_EXHAUSTED = 6;
     */
    RETRY_BUDGET_EXHAUSTED = 6,
    /**
     * OUTCOME_GATE_CLOSED: a cooldown gate was closed for longer than the call
     * could wait; no request was sent for the blocked attempt. retry_after
     * says when it reopens.
     *
     * @generated from enum value: OUTCOME_GATE_CLOSED = 7;
     */
    GATE_CLOSED = 7,
    /**
     * OUTCOME_CANCELED: the caller canceled during the call.
     *
     * @generated from enum value: OUTCOME_CANCELED = 8;
     */
    CANCELED = 8,
    /**
     * OUTCOME_BREAKER_OPEN: the failure breaker for the destination was open
     * for longer than the call could wait; no request was sent for the
     * blocked attempt. retry_after says when it lets a probe through.
     *
     * @generated from enum value: OUTCOME_BREAKER_OPEN = 9;
     */
    BREAKER_OPEN = 9,
    /**
     * OUTCOME_SHUTTING_DOWN: the broker stopped while the call was waiting;
     * attempts lists what was sent and retry_after, when set, says when the
     * next attempt was due, so the caller can reschedule.
     *
     * @generated from enum value: OUTCOME_SHUTTING_DOWN = 10;
     */
    SHUTTING_DOWN = 10,
    /**
     * OUTCOME_CREDENTIALS_UNAVAILABLE: the policy's broker-held credential
     * could not be had, so the last attempt was not sent; its Attempt's
     * error_message names the credential and the cause (never a secret).
     *
     * @generated from enum value: OUTCOME_CREDENTIALS_UNAVAILABLE = 11;
     */
    CREDENTIALS_UNAVAILABLE = 11
}
/**
 * Describes the enum retrybroker.v1.Outcome.
 */
export declare const OutcomeSchema: GenEnum<Outcome>;
/**
 * BodyEnd says how a streamed body ended.
 *
 * @generated from enum retrybroker.v1.BodyEnd
 */
export declare enum BodyEnd {
    /**
     * BODY_END_UNSPECIFIED is never returned.
     *
     * @generated from enum value: BODY_END_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * BODY_END_COMPLETE: the upstream sent the whole body.
     *
     * @generated from enum value: BODY_END_COMPLETE = 1;
     */
    COMPLETE = 1,
    /**
     * BODY_END_NO_RESPONSE: the call ended without a final response (only
     * end was sent).
     *
     * @generated from enum value: BODY_END_NO_RESPONSE = 2;
     */
    NO_RESPONSE = 2,
    /**
     * BODY_END_UPSTREAM_ERROR: the upstream body broke off (reset, short
     * Content-Length, protocol error).
     *
     * @generated from enum value: BODY_END_UPSTREAM_ERROR = 3;
     */
    UPSTREAM_ERROR = 3,
    /**
     * BODY_END_IDLE_TIMEOUT: no body bytes arrived for the policy's
     * stream idle timeout.
     *
     * @generated from enum value: BODY_END_IDLE_TIMEOUT = 4;
     */
    IDLE_TIMEOUT = 4,
    /**
     * BODY_END_SIZE_LIMIT: the body reached the policy's stream byte cap.
     *
     * @generated from enum value: BODY_END_SIZE_LIMIT = 5;
     */
    SIZE_LIMIT = 5,
    /**
     * BODY_END_TIMEOUT: the policy's stream duration limit ended the body.
     *
     * @generated from enum value: BODY_END_TIMEOUT = 6;
     */
    TIMEOUT = 6,
    /**
     * BODY_END_CANCELED: the caller canceled the call.
     *
     * @generated from enum value: BODY_END_CANCELED = 7;
     */
    CANCELED = 7,
    /**
     * BODY_END_SHUTTING_DOWN: the broker stopped while streaming.
     *
     * @generated from enum value: BODY_END_SHUTTING_DOWN = 8;
     */
    SHUTTING_DOWN = 8
}
/**
 * Describes the enum retrybroker.v1.BodyEnd.
 */
export declare const BodyEndSchema: GenEnum<BodyEnd>;
/**
 * TaskState is where a task is in its life; see docs/tasks.md.
 *
 * @generated from enum retrybroker.v1.TaskState
 */
export declare enum TaskState {
    /**
     * TASK_STATE_UNSPECIFIED is never returned; as a ListTasks filter it
     * means every state.
     *
     * @generated from enum value: TASK_STATE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * TASK_STATE_SCHEDULED: stored, waiting for next_run_time.
     *
     * @generated from enum value: TASK_STATE_SCHEDULED = 1;
     */
    SCHEDULED = 1,
    /**
     * TASK_STATE_WAITING: its last dispatch met a closed gate, an open
     * breaker, a hint beyond max_delay or pacing; it runs again at
     * next_run_time (wait_reason says why), with none of its attempts used up.
     *
     * @generated from enum value: TASK_STATE_WAITING = 2;
     */
    WAITING = 2,
    /**
     * TASK_STATE_RUNNING: a broker is running it now.
     *
     * @generated from enum value: TASK_STATE_RUNNING = 3;
     */
    RUNNING = 3,
    /**
     * TASK_STATE_SUCCEEDED: final; outcome is OUTCOME_SUCCESS.
     *
     * @generated from enum value: TASK_STATE_SUCCEEDED = 4;
     */
    SUCCEEDED = 4,
    /**
     * TASK_STATE_FAILED: final; outcome says why (or give_up_after passed).
     *
     * @generated from enum value: TASK_STATE_FAILED = 5;
     */
    FAILED = 5,
    /**
     * TASK_STATE_CANCELLED: final; CancelTask was called.
     *
     * @generated from enum value: TASK_STATE_CANCELLED = 6;
     */
    CANCELLED = 6
}
/**
 * Describes the enum retrybroker.v1.TaskState.
 */
export declare const TaskStateSchema: GenEnum<TaskState>;
/**
 * TaskCallbackState is where the delivery of a task's callback is.
 *
 * @generated from enum retrybroker.v1.TaskCallbackState
 */
export declare enum TaskCallbackState {
    /**
     * TASK_CALLBACK_STATE_UNSPECIFIED: the task has no callback.
     *
     * @generated from enum value: TASK_CALLBACK_STATE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * TASK_CALLBACK_STATE_AWAITING_TASK: the task has a callback and is not final yet.
     *
     * @generated from enum value: TASK_CALLBACK_STATE_AWAITING_TASK = 1;
     */
    AWAITING_TASK = 1,
    /**
     * TASK_CALLBACK_STATE_PENDING: the task is final and its callback is
     * being delivered (callback_attempts so far, callback_last_error the
     * last failure).
     *
     * @generated from enum value: TASK_CALLBACK_STATE_PENDING = 2;
     */
    PENDING = 2,
    /**
     * TASK_CALLBACK_STATE_DELIVERED: the receiver answered 2xx.
     *
     * @generated from enum value: TASK_CALLBACK_STATE_DELIVERED = 3;
     */
    DELIVERED = 3,
    /**
     * TASK_CALLBACK_STATE_FAILED: the broker gave up (the destination guard
     * refused the URL, or every try failed); callback_last_error says why.
     *
     * @generated from enum value: TASK_CALLBACK_STATE_FAILED = 4;
     */
    FAILED = 4
}
/**
 * Describes the enum retrybroker.v1.TaskCallbackState.
 */
export declare const TaskCallbackStateSchema: GenEnum<TaskCallbackState>;
/**
 * BrokerService performs outbound HTTP calls on a caller's behalf, retrying
 * them by the caller's tenant policy and the provider's rate-limit hints, and
 * classifies responses that callers obtained themselves with the same rules.
 *
 * Errors are gRPC statuses:
 *   - INVALID_ARGUMENT: a malformed request; the status details carry a
 *     google.rpc.BadRequest with one field violation per problem.
 *   - UNAUTHENTICATED: a missing or unknown API key.
 *   - PERMISSION_DENIED: a policy of another tenant, or a refused destination.
 *   - FAILED_PRECONDITION: an unknown policy name.
 *   - RESOURCE_EXHAUSTED: pacing cannot admit the call within its deadline
 *     (the details carry a google.rpc.RetryInfo with the delay), a message
 *     is larger than the RPC may carry, or the tenant already has as many
 *     ExecuteStream calls open as its policy allows.
 *   - UNAVAILABLE: shared state is unreachable and the policy fails closed,
 *     or the broker is shutting down before the call started.
 *
 * Upstream failures are not gRPC errors: Execute reports them in its response.
 *
 * @generated from service retrybroker.v1.BrokerService
 */
export declare const BrokerService: GenService<{
    /**
     * Execute sends an HTTP request, retrying by policy, and returns the final
     * response together with a record of every attempt.
     *
     * ExecuteStream takes the same request message by design (a caller moves
     * between the two without rebuilding its request), so the uniqueness rule
     * is waived for it.
     * buf:lint:ignore RPC_REQUEST_RESPONSE_UNIQUE
     *
     * @generated from rpc retrybroker.v1.BrokerService.Execute
     */
    execute: {
        methodKind: "unary";
        input: typeof ExecuteRequestSchema;
        output: typeof ExecuteResponseSchema;
    };
    /**
     * ClassifyResponse applies the retry rules to a response (or transport
     * failure) that the caller got itself and returns the decision.
     *
     * @generated from rpc retrybroker.v1.BrokerService.ClassifyResponse
     */
    classifyResponse: {
        methodKind: "unary";
        input: typeof ClassifyResponseRequestSchema;
        output: typeof ClassifyResponseResponseSchema;
    };
    /**
     * ExecuteStream sends an HTTP request exactly as Execute does, retrying
     * until a response is final by the rules, then streams that response: one
     * head, the body as chunks in order as the upstream delivers them, and
     * always one end last. Nothing is retried once a body byte has been sent.
     * A call that ends without a final response sends only end. Canceling the
     * RPC cancels the upstream request.
     *
     * It takes ExecuteRequest itself (not an ExecuteStreamRequest), as the
     * contract requires, so two request rules are waived for it.
     * buf:lint:ignore RPC_REQUEST_RESPONSE_UNIQUE
     * buf:lint:ignore RPC_REQUEST_STANDARD_NAME
     *
     * @generated from rpc retrybroker.v1.BrokerService.ExecuteStream
     */
    executeStream: {
        methodKind: "server_streaming";
        input: typeof ExecuteRequestSchema;
        output: typeof ExecuteStreamResponseSchema;
    };
    /**
     * CreateTask stores a deferred call (a task) durably and runs it through
     * the same engine as Execute when it is due and its gate allows; see
     * docs/tasks.md. A second CreateTask with the same task_id returns the
     * first task. UNIMPLEMENTED when the broker runs without task storage.
     *
     * It returns the resource itself, as Google Cloud Tasks (and AIP-133) do
     * and as the contract names it, so two response rules are waived for it.
     * buf:lint:ignore RPC_REQUEST_RESPONSE_UNIQUE
     * buf:lint:ignore RPC_RESPONSE_STANDARD_NAME
     *
     * @generated from rpc retrybroker.v1.BrokerService.CreateTask
     */
    createTask: {
        methodKind: "unary";
        input: typeof CreateTaskRequestSchema;
        output: typeof TaskSchema;
    };
    /**
     * GetTask returns one of the caller's tasks; NOT_FOUND for an unknown
     * task or another tenant's.
     *
     * It returns the resource itself, as Google Cloud Tasks (and AIP-133) do
     * and as the contract names it, so two response rules are waived for it.
     * buf:lint:ignore RPC_REQUEST_RESPONSE_UNIQUE
     * buf:lint:ignore RPC_RESPONSE_STANDARD_NAME
     *
     * @generated from rpc retrybroker.v1.BrokerService.GetTask
     */
    getTask: {
        methodKind: "unary";
        input: typeof GetTaskRequestSchema;
        output: typeof TaskSchema;
    };
    /**
     * ListTasks pages through the caller's tasks, optionally by state.
     *
     * @generated from rpc retrybroker.v1.BrokerService.ListTasks
     */
    listTasks: {
        methodKind: "unary";
        input: typeof ListTasksRequestSchema;
        output: typeof ListTasksResponseSchema;
    };
    /**
     * CancelTask cancels a task that is not final and returns it; a final
     * task is returned unchanged.
     *
     * It returns the resource itself, as Google Cloud Tasks (and AIP-133) do
     * and as the contract names it, so two response rules are waived for it.
     * buf:lint:ignore RPC_REQUEST_RESPONSE_UNIQUE
     * buf:lint:ignore RPC_RESPONSE_STANDARD_NAME
     *
     * @generated from rpc retrybroker.v1.BrokerService.CancelTask
     */
    cancelTask: {
        methodKind: "unary";
        input: typeof CancelTaskRequestSchema;
        output: typeof TaskSchema;
    };
    /**
     * WatchTask streams the task on every state change, ending after a final
     * state.
     *
     * It returns the resource itself, as Google Cloud Tasks (and AIP-133) do
     * and as the contract names it, so two response rules are waived for it.
     * buf:lint:ignore RPC_REQUEST_RESPONSE_UNIQUE
     * buf:lint:ignore RPC_RESPONSE_STANDARD_NAME
     *
     * @generated from rpc retrybroker.v1.BrokerService.WatchTask
     */
    watchTask: {
        methodKind: "server_streaming";
        input: typeof WatchTaskRequestSchema;
        output: typeof TaskSchema;
    };
    /**
     * RetryTask schedules a FAILED task again and returns it.
     *
     * It returns the resource itself, as Google Cloud Tasks (and AIP-133) do
     * and as the contract names it, so two response rules are waived for it.
     * buf:lint:ignore RPC_REQUEST_RESPONSE_UNIQUE
     * buf:lint:ignore RPC_RESPONSE_STANDARD_NAME
     *
     * @generated from rpc retrybroker.v1.BrokerService.RetryTask
     */
    retryTask: {
        methodKind: "unary";
        input: typeof RetryTaskRequestSchema;
        output: typeof TaskSchema;
    };
}>;
//# sourceMappingURL=broker_pb.d.ts.map