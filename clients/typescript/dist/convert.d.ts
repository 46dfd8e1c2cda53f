import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Duration, DurationSchema, TimestampSchema } from "@bufbuild/protobuf/wkt";
import { type ClassifyResponseRequestSchema, type CreateTaskRequestSchema, type ExecuteOverridesSchema, type ExecuteRequestSchema, type ListTasksRequestSchema, type Attempt as PbAttempt, type Decision as PbDecision, type ExecuteResponse as PbExecuteResponse, type ListTasksResponse as PbListTasksResponse, Outcome as PbOutcome, type StreamEnd as PbStreamEnd, type StreamHead as PbStreamHead, type Task as PbTask, TaskState as PbTaskState, TransportError as PbTransportError } from "./gen/retrybroker/v1/broker_pb.js";
import { type Attempt, type BodyLike, type ClassifyInput, type CreateTaskInput, type Decision, type ExecuteInput, type ExecuteOverrides, ExecuteResult, type HeadersLike, type ListTasksInput, type StreamHead, type StreamResult, type Task, type TaskPage, type TaskState, type TimeLike, type TransportErrorKind } from "./types.js";
/** headersToProto returns the headers as HttpHeader init objects, in order, duplicates kept. */
export declare function headersToProto(h: HeadersLike | undefined): {
    name: string;
    value: string;
}[];
/** bodyBytes returns a body as bytes: empty for undefined or null, UTF-8 for a string. */
export declare function bodyBytes(body: BodyLike | undefined | null): Uint8Array;
/**
 * durationFromMs returns non-negative milliseconds as a Duration init
 * (nanosecond precision). Throws a RangeError for a negative or non-finite
 * value; `what` names the argument.
 */
export declare function durationFromMs(ms: number, what: string): MessageInitShape<typeof DurationSchema>;
/**
 * timestampOf returns a Date or Unix milliseconds as a Timestamp init.
 * Throws a RangeError for an invalid Date or a non-finite number.
 */
export declare function timestampOf(t: TimeLike, what: string): MessageInitShape<typeof TimestampSchema>;
/** msOf returns a Duration as milliseconds, or undefined when it is unset. */
export declare function msOf(d: Duration | undefined): number | undefined;
/**
 * transportErrorToProto returns the enum value of a kind ("timeout" or
 * "TRANSPORT_ERROR_TIMEOUT"). Throws a RangeError for a kind this client does
 * not know.
 */
export declare function transportErrorToProto(kind: TransportErrorKind | string): PbTransportError;
/** decisionOf returns a Decision message as a Decision; `delayMs` is set only when retrying. */
export declare function decisionOf(d: PbDecision | undefined): Decision;
/**
 * attemptOf returns an Attempt message as an Attempt. `status` is undefined
 * when there was no response; an attempt whose body broke off keeps its
 * status next to transportError "body_incomplete".
 */
export declare function attemptOf(a: PbAttempt): Attempt;
/** outcomeOf returns an Outcome value's proto name ("OUTCOME_<n>" when unknown). */
export declare function outcomeOf(v: PbOutcome): string;
/** executeResultOf returns an ExecuteResponse message as an ExecuteResult. */
export declare function executeResultOf(r: PbExecuteResponse): ExecuteResult;
/** streamHeadOf returns a StreamHead message as a StreamHead. */
export declare function streamHeadOf(h: PbStreamHead): StreamHead;
/** streamResultOf returns a StreamEnd message as a StreamResult. */
export declare function streamResultOf(e: PbStreamEnd): StreamResult;
/** overridesInit returns the overrides as an ExecuteOverrides init; undefined fields stay unset. */
export declare function overridesInit(o: ExecuteOverrides): MessageInitShape<typeof ExecuteOverridesSchema>;
/** executeRequest returns the request of an Execute (or ExecuteStream) call as a plain object. */
export declare function executeRequest(input: ExecuteInput, defaultPolicy: string): MessageInitShape<typeof ExecuteRequestSchema>;
/** classifyRequest returns the request of a ClassifyResponse call as a plain object. */
export declare function classifyRequest(input: ClassifyInput, defaultPolicy: string): MessageInitShape<typeof ClassifyResponseRequestSchema>;
/**
 * taskStateToProto returns the enum value of a task state
 * ("TASK_STATE_WAITING" or "waiting"); undefined is UNSPECIFIED (every
 * state). Throws a RangeError for a state this client does not know.
 */
export declare function taskStateToProto(state: TaskState | undefined): PbTaskState;
/** taskOf returns a Task message as a Task; unset times stay undefined. */
export declare function taskOf(t: PbTask): Task;
/** taskPageOf returns a ListTasksResponse message as a TaskPage. */
export declare function taskPageOf(r: PbListTasksResponse): TaskPage;
/** createTaskRequest returns the request of a CreateTask call as a plain object. */
export declare function createTaskRequest(input: CreateTaskInput, defaultPolicy: string): MessageInitShape<typeof CreateTaskRequestSchema>;
/**
 * listTasksRequest returns the request of one ListTasks page as a plain
 * object. Throws a RangeError for a pageSize outside 1 to 1000 or an
 * unknown state.
 */
export declare function listTasksRequest(input: ListTasksInput, pageToken: string): MessageInitShape<typeof ListTasksRequestSchema>;
//# sourceMappingURL=convert.d.ts.map