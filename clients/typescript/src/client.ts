import { WaitTimeout } from "./errors.js";
import { type CallOptions, type ConnectOptions, Transport, seg, sleep } from "./http.js";
import type { components, operations } from "./openapi.js";

type Schemas = components["schemas"];
type Json<R> = R extends { content: { "application/json": infer B } } ? B : never;
/** The JSON of an operation's 200 or 201 answer, as httpapi/openapi.json declares it. */
export type Answer<K extends keyof operations> = Json<
  operations[K]["responses"] extends { 200: infer R } ? R : operations[K]["responses"] extends { 201: infer R } ? R : never
>;
/** An operation's query parameters. */
export type Query<K extends keyof operations> = NonNullable<operations[K]["parameters"]["query"]>;

export type Task = Schemas["Task"];
export type TaskSpec = Schemas["TaskSpec"];
export type TaskState = Schemas["State"];
export type SubmitResponse = Schemas["SubmitResponse"];
export type TaskList = Schemas["TaskList"];
export type Trail = Schemas["Trail"];
export type DAGRequest = Schemas["DAGRequest"];
export type DAGStatus = Schemas["DAGStatus"];
export type ScheduleRequest = Schemas["ScheduleRequest"];
export type ScheduleStatus = Schemas["ScheduleStatus"];
export type TaskFilter = Query<"listTasks">;
export type DeadLetterFilter = Query<"listDeadLetters">;
export type DAGFilter = Query<"listDAGs">;

/** The states a task never leaves on its own. */
export const terminalStates: readonly TaskState[] = ["SUCCESS", "FAILED", "CANCELED"];
/** The states a DAG run never leaves. */
export const dagTerminalStates: readonly Schemas["DAGState"][] = ["SUCCESS", "FAILED", "CANCELED"];

/** Options of a Client: where the API is, the token, retries and timeouts. */
export interface ClientOptions extends ConnectOptions {}

/** Options of one call. */
export interface RequestOptions {
  signal?: AbortSignal;
}

/**
 * Client calls ax's HTTP API (httpapi/openapi.json). Tasks of every region are
 * reachable through any server. 429, 503 and connection errors are retried
 * with backoff and jitter (honouring Retry-After); every error is an AxError.
 */
export class Client {
  readonly #t: Transport;

  constructor(o: ClientOptions | string) {
    this.#t = new Transport(typeof o === "string" ? { urls: o } : o);
  }

  #call<T>(method: string, path: string, o: CallOptions = {}): Promise<T> {
    return this.#t.call<T>(method, path, { idempotent: method === "GET" || method === "DELETE", ...o });
  }

  /**
   * POST /v1/tasks. A connection error after the request may have reached the
   * server is retried only when the spec has an idempotency_key.
   */
  submit(spec: TaskSpec, o: RequestOptions = {}): Promise<Answer<"submitTask">> {
    return this.#call("POST", "/v1/tasks", { body: spec, signal: o.signal, idempotent: !!spec.idempotency_key });
  }

  /** POST /v1/tasks/batch: up to 1000 specs, each answered on its own. */
  submitBatch(specs: TaskSpec[], o: RequestOptions = {}): Promise<Answer<"submitTasks">> {
    return this.#call("POST", "/v1/tasks/batch", { body: { tasks: specs }, signal: o.signal, idempotent: specs.every((s) => !!s.idempotency_key) });
  }

  /** GET /v1/tasks/{id}: the task, wherever it is held. */
  get(id: string, o: RequestOptions = {}): Promise<Task> {
    return this.#call("GET", `/v1/tasks/${seg(id)}`, o);
  }

  /** GET /v1/tasks/{id}/trail: its transitions, across regions. */
  trail(id: string, o: RequestOptions = {}): Promise<Answer<"getTaskTrail">> {
    return this.#call("GET", `/v1/tasks/${seg(id)}/trail`, o);
  }

  /**
   * Polls GET /v1/tasks/{id} until the task is SUCCESS, FAILED or CANCELED
   * (50 ms apart at first, 1 s at most) and returns it; after timeoutMs it
   * throws WaitTimeout (an AxError, code "timeout", holding the last read).
   */
  wait(id: string, timeoutMs = 60_000, o: RequestOptions = {}): Promise<Task> {
    return poll(() => this.get(id, o), terminalStates, id, timeoutMs, 50, o.signal);
  }

  /** GET /v1/tasks: one page of tasks of every region. */
  listTasks(filter: TaskFilter = {}, o: RequestOptions = {}): Promise<TaskList> {
    return this.#call("GET", "/v1/tasks", { query: filter, signal: o.signal });
  }

  /** Every task matching filter, page after page. */
  iterTasks(filter: TaskFilter = {}, o: RequestOptions = {}): AsyncGenerator<Task> {
    return pages((f) => this.listTasks(f, o), (p) => p.tasks, filter);
  }

  /** POST /v1/tasks/{id}/cancel (operator token). */
  cancel(id: string, o: RequestOptions = {}): Promise<Answer<"cancelTask">> {
    return this.#call("POST", `/v1/tasks/${seg(id)}/cancel`, { body: {}, signal: o.signal, idempotent: true });
  }

  /** POST /v1/tasks/cancel: cancels every task matching the filter (operator token). */
  cancelMany(filter: Schemas["BulkCancelRequest"], o: RequestOptions = {}): Promise<Answer<"cancelTasks">> {
    return this.#call("POST", "/v1/tasks/cancel", { body: filter, signal: o.signal, idempotent: true });
  }

  /** POST /v1/tasks/{id}/replay (operator token): a dead letter runs again. */
  replay(id: string, o: RequestOptions = {}): Promise<Answer<"replayTask">> {
    return this.#call("POST", `/v1/tasks/${seg(id)}/replay`, { body: {}, signal: o.signal });
  }

  /** POST /v1/tasks/{id}/priority. */
  setPriority(id: string, priority: number, o: RequestOptions = {}): Promise<Answer<"setTaskPriority">> {
    return this.#call("POST", `/v1/tasks/${seg(id)}/priority`, { body: { priority }, signal: o.signal, idempotent: true });
  }

  /** GET /v1/dlq: one page of dead letters. */
  dlq(filter: DeadLetterFilter = {}, o: RequestOptions = {}): Promise<TaskList> {
    return this.#call("GET", "/v1/dlq", { query: filter, signal: o.signal });
  }

  /** Every dead letter matching filter, page after page. */
  iterDLQ(filter: DeadLetterFilter = {}, o: RequestOptions = {}): AsyncGenerator<Task> {
    return pages((f) => this.dlq(f, o), (p) => p.tasks, filter);
  }

  /** POST /v1/dags: submits a DAG of tasks. */
  createDAG(dag: DAGRequest, o: RequestOptions = {}): Promise<Answer<"createDAG">> {
    return this.#call("POST", "/v1/dags", { body: dag, signal: o.signal });
  }

  /** GET /v1/dags/{id}. */
  getDAG(id: string, o: RequestOptions = {}): Promise<Answer<"getDAG">> {
    return this.#call("GET", `/v1/dags/${seg(id)}`, o);
  }

  /** GET /v1/dags: one page of DAGs. */
  listDAGs(filter: DAGFilter = {}, o: RequestOptions = {}): Promise<Answer<"listDAGs">> {
    return this.#call("GET", "/v1/dags", { query: filter, signal: o.signal });
  }

  /** Every DAG run matching filter, page after page. */
  iterDAGs(filter: DAGFilter = {}, o: RequestOptions = {}): AsyncGenerator<Schemas["DAGSummary"]> {
    return pages((f) => this.listDAGs(f, o), (p) => p.runs, filter);
  }

  /** Polls GET /v1/dags/{id} until the run is SUCCESS, FAILED or CANCELED; WaitTimeout after timeoutMs. */
  waitDAG(id: string, timeoutMs = 60_000, o: RequestOptions = {}): Promise<DAGStatus> {
    return poll(() => this.getDAG(id, o), dagTerminalStates, id, timeoutMs, 100, o.signal);
  }

  /** POST /v1/dags/{id}/cancel. */
  cancelDAG(id: string, o: RequestOptions = {}): Promise<Answer<"cancelDAG">> {
    return this.#call("POST", `/v1/dags/${seg(id)}/cancel`, { body: {}, signal: o.signal, idempotent: true });
  }

  /** POST /v1/schedules. */
  createSchedule(s: ScheduleRequest, o: RequestOptions = {}): Promise<Answer<"createSchedule">> {
    return this.#call("POST", "/v1/schedules", { body: s, signal: o.signal });
  }

  /** GET /v1/schedules: the schedules of the token's tenant (or of tenant, for an operator). */
  listSchedules(tenant?: string, o: RequestOptions = {}): Promise<Answer<"listSchedules">> {
    return this.#call("GET", "/v1/schedules", { query: { tenant }, signal: o.signal });
  }

  /** GET /v1/schedules/{name}. */
  getSchedule(name: string, tenant?: string, o: RequestOptions = {}): Promise<Answer<"getSchedule">> {
    return this.#call("GET", `/v1/schedules/${seg(name)}`, { query: { tenant }, signal: o.signal });
  }

  /** DELETE /v1/schedules/{name}. */
  deleteSchedule(name: string, tenant?: string, o: RequestOptions = {}): Promise<Answer<"deleteSchedule">> {
    return this.#call("DELETE", `/v1/schedules/${seg(name)}`, { query: { tenant }, signal: o.signal });
  }

  /** POST /v1/schedules/{name}/pause. */
  pauseSchedule(name: string, tenant?: string, o: RequestOptions = {}): Promise<Answer<"pauseSchedule">> {
    return this.#call("POST", `/v1/schedules/${seg(name)}/pause`, { query: { tenant }, body: {}, signal: o.signal, idempotent: true });
  }

  /** POST /v1/schedules/{name}/resume. */
  resumeSchedule(name: string, tenant?: string, o: RequestOptions = {}): Promise<Answer<"resumeSchedule">> {
    return this.#call("POST", `/v1/schedules/${seg(name)}/resume`, { query: { tenant }, body: {}, signal: o.signal, idempotent: true });
  }

  /** GET /v1/regions: every region's health, pools and prices. */
  regions(o: RequestOptions = {}): Promise<Answer<"listRegions">> {
    return this.#call("GET", "/v1/regions", o);
  }

  /** POST /v1/placement/explain: where spec would go and why (nothing is submitted). */
  explain(spec: TaskSpec, o: RequestOptions = {}): Promise<Answer<"explainPlacement">> {
    return this.#call("POST", "/v1/placement/explain", { body: spec, signal: o.signal, idempotent: true });
  }
}

async function* pages<F extends { cursor?: string }, P extends { next_cursor?: string }, T>(
  page: (f: F) => Promise<P>,
  items: (p: P) => T[],
  filter: F,
): AsyncGenerator<T> {
  let f = { ...filter };
  for (;;) {
    const p = await page(f);
    yield* items(p);
    if (!p.next_cursor) return;
    f = { ...f, cursor: p.next_cursor };
  }
}

async function poll<T extends { state: string }>(
  read: () => Promise<T>,
  done: readonly string[],
  id: string,
  timeoutMs: number,
  first: number,
  signal?: AbortSignal,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (let pause = first; ; pause = Math.min(1_000, pause * 2)) {
    const t = await read();
    if (done.includes(t.state)) return t;
    const left = end - Date.now();
    if (left <= 0) throw new WaitTimeout(id, timeoutMs, t);
    await sleep(Math.min(pause, left), signal);
  }
}
