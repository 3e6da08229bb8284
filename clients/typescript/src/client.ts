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
export type BatchCreate = Schemas["BatchCreate"];
export type BatchStatus = Schemas["BatchStatus"];
export type ScheduleRequest = Schemas["ScheduleRequest"];
export type ScheduleStatus = Schemas["ScheduleStatus"];
export type TaskResult = Schemas["TaskResult"];
export type BackfillRequest = Schemas["BackfillRequest"];
export type Backfill = Schemas["Backfill"];
export type TaskFilter = Query<"listTasks">;
export type DeadLetterFilter = Query<"listDeadLetters">;
export type DAGFilter = Query<"listDAGs">;

/** The states a task never leaves on its own. */
export const terminalStates: readonly TaskState[] = ["SUCCESS", "FAILED", "CANCELED"];
/** The longest wait GET /v1/tasks/{id}/result takes, in milliseconds. */
export const maxResultWaitMs = 60_000;
// The fewest milliseconds between two result waits: a server that answers
// before the wait it was asked for (one without waits) is asked at most 5
// times a second.
const minResultAskMs = 200;

/** The states a DAG run never leaves. */
export const dagTerminalStates: readonly Schemas["DAGState"][] = ["SUCCESS", "FAILED", "CANCELED"];

/** Options of a Client: where the API is, the token, retries and timeouts. */
export interface ClientOptions extends ConnectOptions {}

/** Options of one call. */
export interface RequestOptions {
  signal?: AbortSignal;
}

/** Options of rerunSchedule. */
export interface RerunOptions extends RequestOptions {
  /**
   * Rerun, too, the schedules that depend on this one (transitively) for their
   * periods starting within a rerun one; each waits for its upstream's rerun, not for the
   * period's earlier success.
   */
  downstream?: boolean;
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
   * server is retried only when sending the spec twice creates one task: it
   * has an idempotency_key, a debounce_key, or a unique_key whose
   * unique_conflict is not "reject" (docs/tasks.md).
   */
  submit(spec: TaskSpec, o: RequestOptions = {}): Promise<Answer<"submitTask">> {
    return this.#call("POST", "/v1/tasks", { body: spec, signal: o.signal, idempotent: resendable(spec) });
  }

  /** POST /v1/tasks/batch: up to 1000 specs, each answered on its own. */
  submitBatch(specs: TaskSpec[], o: RequestOptions = {}): Promise<Answer<"submitTasks">> {
    return this.#call("POST", "/v1/tasks/batch", { body: { tasks: specs }, signal: o.signal, idempotent: specs.every(resendable) });
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
   * GET /v1/tasks/{id}/result: the task's result once it is SUCCESS (result
   * as a JSON value), its error once FAILED or CANCELED (done true); with
   * waitMs (at most 60 000) the server holds the answer until then or until
   * the wait ends (done false, the state and progress).
   */
  result(id: string, waitMs = 0, o: RequestOptions = {}): Promise<TaskResult> {
    const wait = Math.max(0, Math.min(Math.floor(waitMs), maxResultWaitMs));
    return this.#call("GET", `/v1/tasks/${seg(id)}/result`, {
      query: wait > 0 ? { wait: `${wait}ms` } : undefined,
      signal: o.signal,
      timeoutMs: wait + 15_000,
    });
  }

  /**
   * Waits until the task is SUCCESS, FAILED or CANCELED and returns its
   * result (see result): long-polls GET /v1/tasks/{id}/result, up to 60 s a
   * call, so a task handed to another region is waited for where it runs.
   * After timeoutMs it throws WaitTimeout (an AxError, code "timeout",
   * holding the last answer).
   */
  async wait(id: string, timeoutMs = 60_000, o: RequestOptions = {}): Promise<TaskResult> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const asked = Date.now();
      const r = await this.result(id, Math.max(0, end - asked), o);
      if (r.done) return r;
      const now = Date.now();
      if (now >= end) throw new WaitTimeout(id, timeoutMs, r);
      await sleep(Math.max(0, Math.min(asked + minResultAskMs, end) - now), o.signal);
    }
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

  /**
   * POST /v1/batches: submits up to 10 000 tasks as one batch; its
   * on_complete (on_success) callback task runs once every member has ended
   * (succeeded), with the batch's counts and failed ids in its payload.
   */
  createBatch(batch: BatchCreate, o: RequestOptions = {}): Promise<Answer<"createBatch">> {
    // With an idempotency key a repeat creates nothing (it answers the
    // first create's batch, duplicate: true): a cut-off request is resent.
    return this.#call("POST", "/v1/batches", { body: batch, signal: o.signal, idempotent: !!batch.idempotency_key });
  }

  /** GET /v1/batches/{id}: counts by state, failed and canceled ids, the callbacks. */
  getBatch(id: string, o: RequestOptions = {}): Promise<Answer<"getBatch">> {
    return this.#call("GET", `/v1/batches/${seg(id)}`, o);
  }

  /** GET /v1/batches: one page of the server's region's batches. */
  listBatches(filter: Query<"listBatches"> = {}, o: RequestOptions = {}): Promise<Answer<"listBatches">> {
    return this.#call("GET", "/v1/batches", { query: filter, signal: o.signal });
  }

  /** Polls GET /v1/batches/{id} until every member has ended (COMPLETED); WaitTimeout after timeoutMs. */
  waitBatch(id: string, timeoutMs = 60_000, o: RequestOptions = {}): Promise<BatchStatus> {
    return poll(() => this.getBatch(id, o), ["COMPLETED"], id, timeoutMs, 100, o.signal);
  }

  /** POST /v1/batches/{id}/cancel: cancels the members not ended yet (the callbacks still run once). */
  cancelBatch(id: string, o: RequestOptions = {}): Promise<Answer<"cancelBatch">> {
    return this.#call("POST", `/v1/batches/${seg(id)}/cancel`, { body: {}, signal: o.signal, idempotent: true });
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

  /**
   * POST /v1/schedules/{name}/backfill (operator token): runs every slot from
   * req.from to req.to (RFC 3339 times or dates), at most req.max_active at
   * once; a period that ran already is not run again.
   */
  backfillSchedule(name: string, req: BackfillRequest, tenant?: string, o: RequestOptions = {}): Promise<Answer<"backfillSchedule">> {
    return this.#call("POST", `/v1/schedules/${seg(name)}/backfill`, { query: { tenant }, body: req, signal: o.signal });
  }

  /**
   * POST /v1/schedules/{name}/rerun (operator token): a new run of the period
   * starting at period (a slot); with o.downstream, of its dependants' too
   * (the answer's downstream lists their reruns).
   */
  rerunSchedule(name: string, period: string, tenant?: string, o: RerunOptions = {}): Promise<Answer<"rerunSchedule">> {
    const body = o.downstream ? { period, downstream: true } : { period };
    return this.#call("POST", `/v1/schedules/${seg(name)}/rerun`, { query: { tenant }, body, signal: o.signal });
  }

  /** GET /v1/schedules/{name}/backfills: its backfills and reruns, newest first. */
  listScheduleBackfills(name: string, tenant?: string, o: RequestOptions = {}): Promise<Answer<"listScheduleBackfills">> {
    return this.#call("GET", `/v1/schedules/${seg(name)}/backfills`, { query: { tenant }, signal: o.signal });
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

/** Whether sending spec twice creates one task, so a retry after no answer is safe. */
function resendable(spec: TaskSpec): boolean {
  return !!spec.idempotency_key || !!spec.debounce_key || (!!spec.unique_key && spec.unique_conflict !== "reject");
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
