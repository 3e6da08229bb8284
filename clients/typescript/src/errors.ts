import type { StopReason as WireStopReason } from "./protocol.js";

/**
 * An error answer of the API ({"error": {"code", "message", "field"}}; `message`
 * is the server's, toString adds status, code and field) with its
 * HTTP status, or a server that could not be reached (status 0, code
 * "unavailable", the fetch error as `cause`), or a wait that ran out of time
 * (status 0, code "timeout").
 */
export class AxError extends Error {
  override readonly name: string = "AxError";
  /** The HTTP status; 0 when no answer came. */
  readonly status: number;
  /** The API's error code: invalid_argument, not_found, forbidden, unavailable, … */
  readonly code: string;
  /** The request field or parameter at fault ("" when none). */
  readonly field: string;
  /** On 429 and 503: how long the server asked to wait (Retry-After), in milliseconds. */
  readonly retryAfterMs: number | undefined;

  constructor(o: { status: number; code: string; message: string; field?: string; retryAfterMs?: number; cause?: unknown }) {
    super(o.message, o.cause === undefined ? undefined : { cause: o.cause });
    this.status = o.status;
    this.code = o.code;
    this.field = o.field ?? "";
    this.retryAfterMs = o.retryAfterMs;
  }

  /** "AxError: 400 invalid_argument: priority must be 0..4 (field priority)". */
  override toString(): string {
    return `AxError: ${this.status ? this.status + " " : ""}${this.code}: ${this.message}${this.field ? ` (field ${this.field})` : ""}`;
  }
}

/**
 * Thrown by a handler: the task fails for good (dead letter, no retry).
 * Any other exception is a failure the task is retried after.
 */
export class FinalError extends Error {
  override readonly name = "FinalError";
}

/**
 * Thrown by a handler: this attempt failed; the task runs again no sooner
 * than ms from now (the server pauses its key instead of spending a retry).
 */
export class RetryAfter extends Error {
  override readonly name = "RetryAfter";
  readonly retryAfterMs: number;

  constructor(ms: number, message?: string) {
    super(message ?? `retry after ${ms} ms`);
    this.retryAfterMs = ms;
  }
}

/**
 * Client.wait or waitDAG ran out of time (an AxError with status 0 and code
 * "timeout"); task is the last state read.
 */
export class WaitTimeout extends AxError {
  override readonly name = "WaitTimeout";
  readonly taskId: string;
  readonly task: unknown;

  constructor(id: string, timeoutMs: number, last: { state?: string } | undefined) {
    super({ status: 0, code: "timeout", message: `${id} not finished after ${timeoutMs} ms (state ${last?.state})` });
    this.taskId = id;
    this.task = last;
  }
}

/** Why a task's handler was told to stop (its signal's reason): the server's stop reasons and the worker's own. */
export type StopReason = WireStopReason | "shutdown";

/** The reason of an aborted task signal: the task was stopped from outside the handler. */
export class TaskStoppedError extends Error {
  override readonly name = "TaskStoppedError";
  readonly reason: StopReason;

  constructor(id: string, reason: StopReason) {
    super(`task ${id} stopped: ${reason}`);
    this.reason = reason;
  }
}
