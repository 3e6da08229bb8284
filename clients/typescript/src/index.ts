// ax's TypeScript SDK: Client calls the HTTP API, Worker runs handlers for
// tasks claimed through the worker protocol.
export { Client, dagTerminalStates, maxResultWaitMs, terminalStates } from "./client.js";
export type {
  Answer,
  Backfill,
  BackfillRequest,
  ClientOptions,
  DAGFilter,
  DAGRequest,
  DAGStatus,
  DeadLetterFilter,
  Query,
  RequestOptions,
  ScheduleRequest,
  ScheduleStatus,
  SubmitResponse,
  Task as TaskRecord,
  TaskFilter,
  TaskList,
  TaskResult,
  TaskSpec,
  TaskState,
  Trail,
} from "./client.js";
export { AxError, FinalError, RetryAfter, TaskStoppedError, WaitTimeout } from "./errors.js";
export type { StopReason } from "./errors.js";
export { backoff } from "./http.js";
export type { ConnectOptions } from "./http.js";
export { Worker } from "./worker.js";
export type { Handler, Task, WorkerOptions } from "./worker.js";
export type { components, operations, paths } from "./openapi.js";
