import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import { type Decision as PbDecision, type ExecuteResponse as PbExecuteResponse, type ExecuteOverrides as PbExecuteOverrides, TransportError as PbTransportError } from "./gen/retrybroker/v1/broker_pb.js";
import { type Decision, type ExecuteOverrides, ExecuteResult, type HeadersLike, type TransportErrorKind } from "./types.js";
/** A time as a caller may pass it: a Date or Unix milliseconds. */
export type TimeLike = Date | number;
export declare function headersToProto(h: HeadersLike | undefined): {
    name: string;
    value: string;
}[];
export declare function bodyBytes(body: Uint8Array | ArrayBuffer | string | undefined | null): Uint8Array;
export declare function durationFromMs(ms: number, what: string): Duration;
export declare function timestampOf(t: TimeLike, what: string): Timestamp;
export declare function msOf(d: Duration | undefined): number | undefined;
export declare function transportErrorToProto(kind: TransportErrorKind | string): PbTransportError;
export declare function decisionOf(d: PbDecision | undefined): Decision;
export declare function executeResultOf(r: PbExecuteResponse): ExecuteResult;
export declare function overridesToProto(o: ExecuteOverrides): PbExecuteOverrides;
//# sourceMappingURL=convert.d.ts.map