import { randomBytes } from "node:crypto";
import { AxError, FinalError, TaskStoppedError } from "./errors.js";
import { type ConnectOptions, Transport, backoff, seg, sleep } from "./http.js";
import type { ClaimAnswer, ClaimedTask, Outcome, Registration, Report, ReportAnswer, Verdict } from "./protocol.js";

/** A claimed task as its handler sees it. */
export interface Task<P = unknown> {
  readonly id: string;
  readonly type: string;
  /** The task's payload (any JSON; undefined when it has none). */
  readonly payload: P;
  /** 1 on the first run, counting every run the task was given. */
  readonly attempt: number;
  readonly maxRetries: number;
  readonly priority: number;
  readonly tags: Readonly<Record<string, string>>;
  readonly tenant: string;
  readonly traceId: string;
  /** When this attempt's timeout ends (undefined: no timeout). */
  readonly deadline: Date | undefined;
  /**
   * Aborted when the task must stop: canceled, preempted, its lease lost, its
   * deadline passed, or the worker's shutdown grace over. The reason is a
   * TaskStoppedError; whatever the handler returns afterwards is dropped.
   */
  readonly signal: AbortSignal;
  /** Reports how far the task is (0..100), visible in GET /v1/tasks/{id} within about a second. */
  progress(percent: number, message?: string): void;
  /**
   * A DAG node's parents' results by parent node id (those that succeeded and
   * still kept one): JSON as that value, other text as a string.
   */
  readonly parents: Readonly<Record<string, unknown>>;
  /** The result of parent node `node` (undefined: none, see parents). */
  parentResult<R = unknown>(node: string): R | undefined;
  /**
   * The share of a worker slot the task holds while it runs: 1, or less for
   * a fractional task (docs/tasks.md "Fractional slots").
   */
  readonly slots: number;
}

/**
 * Runs one task. Its return value is the task's result (any JSON, or
 * undefined for none); a thrown FinalError fails the task for good; a thrown
 * RetryAfter (or any exception with a numeric `retryAfterMs`) fails this
 * attempt and the task runs again no sooner than that; any other exception
 * fails this attempt and the task is retried by its policy.
 */
export type Handler<P = any> = (task: Task<P>) => unknown;

/** Options of a Worker. */
export interface WorkerOptions extends ConnectOptions {
  /** The pool it serves (the worker token must allow it). */
  pool: string;
  /**
   * The worker's slots; default 4. Whole tasks run that many at once, and
   * fractional ones as many as fit (four tasks of slots 0.25 a slot).
   */
  concurrency?: number;
  labels?: Record<string, string>;
  /** A name shown next to its worker_id. */
  name?: string;
  /** How long running handlers may take to finish after stop (or SIGTERM); default 30 000 ms. */
  graceMs?: number;
  /**
   * How long a handler stopped at the end of the grace may take to return
   * before its task is handed back; default 1 000 ms. Handing it back first
   * would let another worker start it while this one still runs it.
   */
  settleMs?: number;
  /** Stop on SIGTERM and SIGINT (a second signal stops at once); default true. */
  signals?: boolean;
  /** The long-poll's wait in milliseconds (at most the server's max_wait_ms); default 20 000. */
  waitMs?: number;
  /** Where the worker says what went wrong; default console.error. */
  log?: (message: string) => void;
}

interface Running {
  claim: ClaimedTask;
  // The room it holds in the worker's slots, in milli-slots.
  milli: number;
  ctrl: AbortController;
  progress?: { percent: number; message?: string };
  progressDirty: boolean;
  // stopped: the server no longer counts it ours (stop, shutdown return): its outcome is dropped.
  stopped: boolean;
  timer?: ReturnType<typeof setTimeout>;
  // Settles when the handler returned or threw.
  ended?: Promise<void>;
}

const maxErrorChars = 4096;
// The protocol's bound on a progress message.
const maxProgressBytes = 512;
const progressEveryMs = 1_000;
// A slot in milli-slots, the unit the server counts a worker's room in.
const milliSlots = 1_000;

// milliOf is the room a claimed task holds: a whole slot unless the server
// said less.
function milliOf(c: ClaimedTask): number {
  const m = Math.round((c.slots ?? 1) * milliSlots);
  return m > 0 && m < milliSlots ? m : milliSlots;
}

/**
 * Worker runs handlers for tasks claimed through the API's worker protocol
 * (docs/worker-protocol.md) with only an API URL and a worker token: a
 * long-poll claim loop and one report loop that batches heartbeats, progress
 * and outcomes. While every slot is busy, a report of outcomes also claims:
 * the tasks they make room for come in its answer, without a claim after it.
 * Slots are counted in milli-slots as the server counts them (a task of
 * slots 0.25 holds a quarter of one): a claim asks for as many tasks as the
 * free room holds of the smallest it was handed so far (a whole slot until
 * a fraction), and the server hands out tasks that fit that room together.
 * On a connection error or a 503 it moves to the next URL and keeps its
 * tasks; when the server forgot it (404 worker_id) it registers again.
 *
 *     const w = new Worker({ urls: "http://127.0.0.1:8080", token, pool: "cpu-spot" });
 *     w.handle("resize", async (task) => ({ size: task.payload }));
 *     await w.run(); // until stop() or SIGTERM/SIGINT
 */
export class Worker {
  readonly #t: Transport;
  readonly #o: Required<Pick<WorkerOptions, "pool" | "concurrency" | "graceMs" | "settleMs" | "signals" | "waitMs" | "log">> & WorkerOptions;
  readonly #handlers = new Map<string, Handler>();
  readonly #running = new Map<string, Running>();
  #reg: Registration | undefined;
  #registering: Promise<void> | undefined;
  #outcomes: Outcome[] = [];
  // The room (milli-slots) each queued outcome's task held: the server counts it held until a report carried it.
  readonly #outcomeMilli = new WeakMap<Outcome, number>();
  // The room of the outcomes in the report on its way: the server counts their tasks held until it answers.
  #reporting = 0;
  // The least room a task handed out took (milli-slots).
  #smallest = milliSlots;
  #started = false;
  #fatal: unknown;
  #stopping = false;
  #closing = false;
  readonly #stopCtrl = new AbortController();
  readonly #graceCtrl = new AbortController();
  #done: Promise<void> | undefined;
  // The report loop sleeps until #due or until #poke is called.
  #due = 0;
  #lastReport = 0;
  #wakeNow = false;
  #poke: (() => void) | undefined;
  // The claim loop waits for a free slot on #slotFreed.
  #slotFreed: (() => void) | undefined;
  // A report claim's id until a report carrying it is answered (a report
  // sent again claims under it); #reportClaims false once a server refused one.
  #reportClaimId = "";
  #reportClaims = true;
  #claimWaiting = false;

  constructor(o: WorkerOptions) {
    this.#o = { concurrency: 4, graceMs: 30_000, settleMs: 1_000, signals: true, waitMs: 20_000, log: (m) => console.error(`ax worker: ${m}`), ...o };
    if (!o.pool) throw new TypeError("ax: Worker needs a pool");
    const c = this.#o.concurrency;
    if (!Number.isInteger(c) || c < 1 || c > 1024) throw new TypeError(`ax: concurrency must be 1..1024, got ${c}`);
    this.#t = new Transport({ ...o, retries: o.retries ?? 2, log: this.#o.log });
  }

  /** Registers the handler of one task type; the worker serves the types it has handlers for. */
  handle<P = any>(type: string, handler: Handler<P>): this {
    if (this.#started) throw new Error("ax: handle() after run()");
    this.#handlers.set(type, handler as Handler);
    return this;
  }

  /** The worker_id the server gave (undefined before registration). */
  get id(): string | undefined {
    return this.#reg?.worker_id;
  }

  /**
   * Registers and runs tasks until stop() or SIGTERM/SIGINT, then lets running
   * handlers finish within the grace, reports their outcomes, puts back what
   * did not finish and leaves. Rejects when the server refuses the
   * registration (a 4xx: a bad token, pool or type), or, after that
   * shutdown, when it refused a claim with 401 or 403 (the token revoked).
   */
  run(): Promise<void> {
    if (this.#started) throw new Error("ax: run() called twice");
    if (this.#handlers.size === 0) throw new Error("ax: no handlers: call handle() before run()");
    this.#started = true;
    this.#done = this.#run();
    return this.#done;
  }

  /** Stops claiming, gives running handlers graceMs to finish, reports and leaves; resolves when run() does. */
  stop(graceMs?: number): Promise<void> {
    if (!this.#stopping) {
      this.#stopping = true;
      if (graceMs !== undefined) this.#o.graceMs = graceMs;
      this.#stopCtrl.abort(new Error("worker stopping"));
      this.#slotFreed?.();
    }
    return this.#done ?? Promise.resolve();
  }

  async #run(): Promise<void> {
    const unlisten = this.#o.signals ? this.#listen() : () => {};
    try {
      try {
        await this.#register();
      } catch (e) {
        if (this.#stopping) return;
        throw e;
      }
      const reports = this.#reportLoop();
      await this.#claimLoop();
      await this.#drain();
      this.#closing = true;
      this.#wake();
      await reports;
      await this.#leave();
    } finally {
      unlisten();
    }
    if (this.#fatal !== undefined) throw this.#fatal;
  }

  #listen(): () => void {
    const on = (sig: NodeJS.Signals) => {
      if (!this.#stopping) {
        this.#o.log(`${sig}: stopping (running handlers get ${this.#o.graceMs} ms)`);
        void this.stop();
      } else {
        this.#o.log(`${sig} again: stopping now`);
        this.#graceCtrl.abort();
      }
    };
    process.on("SIGTERM", on);
    process.on("SIGINT", on);
    return () => {
      process.off("SIGTERM", on);
      process.off("SIGINT", on);
    };
  }

  // #register registers (again); concurrent callers share one registration.
  #register(): Promise<void> {
    this.#registering ??= (async () => {
      const o = this.#o;
      const body = { pool: o.pool, types: [...this.#handlers.keys()], slots: o.concurrency, labels: o.labels, name: o.name };
      try {
        this.#reg = await this.#t.call<Registration>("POST", "/v1/workers", { body, retries: Infinity, idempotent: true, signal: this.#stopCtrl.signal });
      } finally {
        this.#registering = undefined;
      }
    })();
    return this.#registering;
  }

  // #reregister registers again unless another loop already replaced the
  // registration that the server forgot.
  async #reregister(forgotten: string): Promise<void> {
    if (this.#reg?.worker_id !== forgotten) return;
    this.#o.log(`the server forgot worker ${forgotten}: registering again`);
    await this.#register().catch((err) => this.#o.log(`register again: ${err}`));
  }

  // #forgotten: the server no longer knows this worker_id (its registration expired).
  #forgotten(e: unknown): boolean {
    return e instanceof AxError && e.status === 404 && e.field === "worker_id";
  }

  async #claimLoop(): Promise<void> {
    // One id per claim, kept by its retries: a retry after a lost answer
    // (a server died, a connection broke) gets the tasks that answer held.
    let claimId = "";
    for (let failures = 0; !this.#stopping; ) {
      // Free as the server counts: a task is held until its outcome is reported.
      const free = this.#fits(0);
      if (free <= 0) {
        // Meanwhile a report of outcomes claims for it (#reportClaim).
        this.#claimWaiting = true;
        await new Promise<void>((r) => (this.#slotFreed = r));
        this.#slotFreed = undefined;
        this.#claimWaiting = false;
        continue;
      }
      const reg = this.#reg!;
      const wait = Math.max(0, Math.min(this.#o.waitMs, reg.max_wait_ms));
      let tasks: ClaimedTask[];
      claimId ||= `c-${randomBytes(12).toString("hex")}`;
      try {
        const ans = await this.#t.call<ClaimAnswer>("POST", `/v1/workers/${seg(reg.worker_id)}/claim`, {
          body: { max: Math.min(free, reg.max_claim), wait_ms: wait, claim_id: claimId },
          timeoutMs: wait + 15_000,
          retries: Infinity,
          idempotent: true,
          signal: this.#stopCtrl.signal,
        });
        tasks = ans?.tasks ?? [];
        failures = 0;
        claimId = "";
      } catch (e) {
        if (this.#stopping) return;
        if (this.#forgotten(e)) {
          await this.#reregister(reg.worker_id);
          continue;
        }
        if (e instanceof AxError && (e.status === 401 || e.status === 403)) {
          // The token no longer lets it claim: nothing to wait for.
          this.#o.log(`claim: ${e}; stopping`);
          this.#fatal = e;
          void this.stop();
          return;
        }
        this.#o.log(`claim: ${e}`);
        await sleep(backoff(failures++), this.#stopCtrl.signal).catch(() => {});
        continue;
      }
      for (const c of tasks) this.#start(c);
    }
  }

  // #fits is how many tasks a claim asks for at most, with freed milli-slots
  // about to be freed (a report's outcomes): as many of the smallest task
  // handed out so far as the free room holds, the room as the server counts
  // it (running tasks, and those whose outcome it has not been told).
  #fits(freed: number): number {
    let room = this.#o.concurrency * milliSlots - this.#reporting + freed;
    for (const r of this.#running.values()) room -= r.milli;
    for (const o of this.#outcomes) room -= this.#milliOfOutcome(o);
    return room > 0 ? Math.floor(room / this.#smallest) : 0;
  }

  #milliOfOutcome(o: Outcome): number {
    return this.#outcomeMilli.get(o) ?? milliSlots;
  }

  // #queue queues the outcome of a task holding milli milli-slots for the next report.
  #queue(o: Outcome, milli: number): void {
    this.#outcomeMilli.set(o, milli);
    this.#outcomes.push(o);
  }

  #start(c: ClaimedTask): void {
    // A retried claim's answer may name a task already running here.
    if (this.#running.get(c.id)?.claim.lease === c.lease) return;
    const handler = this.#handlers.get(c.type);
    const milli = milliOf(c);
    if (!handler || this.#stopping) {
      // Not ours to run now: back to READY without spending an attempt.
      this.#queue({ id: c.id, lease: c.lease, status: "return", retry_after_ms: handler ? 0 : 1_000 }, milli);
      this.#wake();
      return;
    }
    this.#smallest = Math.min(this.#smallest, milli);
    const r: Running = { claim: c, milli, ctrl: new AbortController(), progressDirty: false, stopped: false };
    this.#running.set(c.id, r);
    let deadline: Date | undefined = c.deadline ? new Date(c.deadline) : undefined;
    if (deadline && !(deadline.getTime() > 0)) deadline = undefined; // absent, unparsable or Go's zero time: no timeout
    if (deadline) {
      r.timer = setTimeout(() => r.ctrl.abort(new TaskStoppedError(c.id, "deadline")), Math.max(0, deadline.getTime() - Date.now()));
    }
    const task: Task = {
      id: c.id,
      type: c.type,
      payload: c.payload,
      attempt: c.attempt,
      maxRetries: c.max_retries,
      priority: c.priority,
      tags: c.tags ?? {},
      tenant: c.tenant,
      traceId: c.trace_id ?? "",
      deadline,
      signal: r.ctrl.signal,
      progress: (percent, message) => this.#progress(r, percent, message),
      parents: c.parents ?? {},
      parentResult: <R>(node: string) => (c.parents ?? {})[node] as R | undefined,
      slots: milli / milliSlots,
    };
    r.ended = Promise.resolve()
      .then(() => handler(task))
      .then(
        (result) => this.#finish(r, this.#success(result)),
        (err) => this.#finish(r, failure(err)),
      );
  }

  #progress(r: Running, percent: number, message?: string): void {
    if (r.stopped || !this.#running.has(r.claim.id)) return;
    const p = Number.isFinite(percent) ? Math.min(100, Math.max(0, percent)) : 0;
    r.progress = message === undefined ? { percent: p } : { percent: p, message: truncateBytes(String(message), maxProgressBytes) };
    r.progressDirty = true;
    this.#wakeBy(this.#lastReport + progressEveryMs);
  }

  #success(result: unknown): Verdict {
    if (result === undefined) return { status: "success" };
    let s: string | undefined;
    try {
      s = JSON.stringify(result);
    } catch (e) {
      return { status: "failure", error: `the handler's result is not JSON: ${e}`, retry: false };
    }
    if (s === undefined) return { status: "success" };
    const max = this.#reg?.max_result_bytes ?? Infinity;
    const n = Buffer.byteLength(s);
    if (n > max) return { status: "failure", error: `the handler's result is ${n} bytes, over the server's max_result_bytes ${max}`, retry: false };
    return { status: "success", result: JSON.parse(s) };
  }

  #finish(r: Running, o: Verdict): void {
    clearTimeout(r.timer);
    this.#running.delete(r.claim.id);
    this.#slotFreed?.();
    if (r.stopped) return;
    this.#queue({ ...o, id: r.claim.id, lease: r.claim.lease } as Outcome, r.milli);
    this.#wake();
  }

  // #drain waits for running handlers until the grace ends, then stops the
  // rest and puts each task back once its handler returned, or settleMs on.
  async #drain(): Promise<void> {
    const grace = sleep(this.#o.graceMs, this.#graceCtrl.signal).catch(() => {});
    let over = false;
    void grace.then(() => {
      over = true;
      this.#slotFreed?.();
    });
    while (this.#running.size > 0 && !over) {
      await new Promise<void>((r) => (this.#slotFreed = r));
      this.#slotFreed = undefined;
    }
    this.#graceCtrl.abort();
    const stopped = [...this.#running.values()].filter((r) => !r.stopped);
    for (const r of stopped) {
      r.stopped = true;
      clearTimeout(r.timer);
      r.ctrl.abort(new TaskStoppedError(r.claim.id, "shutdown"));
    }
    if (stopped.length === 0) return;
    const settle = new AbortController();
    await Promise.race([Promise.all(stopped.map((r) => r.ended)), sleep(this.#o.settleMs, settle.signal).catch(() => {})]);
    settle.abort();
    for (const r of stopped) this.#queue({ id: r.claim.id, lease: r.claim.lease, status: "return" }, r.milli);
    this.#wake();
  }

  #wake(): void {
    this.#wakeNow = true;
    this.#poke?.();
  }

  #wakeBy(at: number): void {
    if (at < this.#due) {
      this.#due = at;
      this.#poke?.();
    }
  }

  async #nextReport(): Promise<void> {
    while (!this.#wakeNow && Date.now() < this.#due) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, this.#due - Date.now());
        this.#poke = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.#poke = undefined;
    }
    // Outcomes of handlers that end in the same turn go in one report.
    await new Promise((r) => setImmediate(r));
    this.#wakeNow = false;
  }

  async #reportLoop(): Promise<void> {
    for (let failures = 0; ; ) {
      const every = (this.#reg?.heartbeat_ms ?? 10_000) / 2;
      this.#due = this.#lastReport + (failures ? Math.min(every, backoff(failures - 1)) : every);
      await this.#nextReport();
      const last = this.#closing;
      failures = (await this.#report(last)) ? 0 : failures + 1;
      if (last) return;
    }
  }

  // #report sends one report; false when it could not be delivered (its
  // outcomes and progress are kept for the next one).
  async #report(last: boolean): Promise<boolean> {
    const reg = this.#reg!;
    const body: Report = {};
    const held = [...this.#running.values()].filter((r) => !r.stopped);
    if (held.length) body.held = held.map((r) => ({ id: r.claim.id, lease: r.claim.lease }));
    const moved = held.filter((r) => r.progressDirty);
    if (moved.length) body.progress = moved.map((r) => ({ id: r.claim.id, lease: r.claim.lease, ...r.progress! }));
    moved.forEach((r) => (r.progressDirty = false));
    const outcomes = this.#outcomes;
    this.#outcomes = [];
    if (outcomes.length) body.outcomes = outcomes;
    let freed = 0;
    for (const o of outcomes) freed += this.#milliOfOutcome(o);
    const claim = this.#reportClaim(outcomes.length, last);
    if (claim) body.claim = claim;
    this.#lastReport = Date.now();
    let ans: ReportAnswer | undefined;
    this.#reporting = freed;
    try {
      ans = await this.#t.call<ReportAnswer>("POST", `/v1/workers/${seg(reg.worker_id)}/report`, { body, idempotent: true, retries: last ? 4 : undefined });
    } catch (e) {
      this.#reporting = 0;
      if (this.#forgotten(e) && !last) {
        this.#requeue(outcomes, moved);
        await this.#reregister(reg.worker_id);
        this.#wake();
        return true;
      }
      if (e instanceof AxError && e.status >= 400 && e.status < 500 && e.status !== 429) {
        this.#rejected(e, outcomes, moved);
        return true;
      }
      this.#o.log(`report: ${e}`);
      this.#requeue(outcomes, moved);
      return false;
    }
    this.#reporting = 0;
    if (claim && this.#reportClaimId === claim.claim_id) this.#reportClaimId = "";
    // Before the outcomes free their slots: the claim loop they wake counts these.
    for (const c of ans?.tasks ?? []) this.#start(c);
    if (outcomes.length) this.#slotFreed?.();
    for (const s of ans?.stop ?? []) {
      const r = this.#running.get(s.id);
      if (!r || r.stopped) continue;
      r.stopped = true;
      r.ctrl.abort(new TaskStoppedError(s.id, s.reason));
    }
    for (const o of ans?.outcomes ?? []) {
      if (!o.ok) this.#o.log(`outcome of task ${o.id} not applied: ${o.code}: ${o.message}`);
    }
    return true;
  }

  // #reportClaim is the claim of a report of n outcomes: while the claim
  // loop waits for room, the tasks the room they free holds; undefined when
  // it does not wait or none would fit.
  #reportClaim(n: number, last: boolean): Report["claim"] {
    if (n === 0 || last || this.#stopping || !this.#reportClaims || !this.#claimWaiting) return undefined;
    // Free once the report is applied: #running and the outcomes queued after it are held
    // (#outcomes no longer lists the report's own, #reporting is not set yet).
    const max = Math.min(this.#fits(0), this.#reg!.max_claim);
    if (max <= 0) return undefined;
    this.#reportClaimId ||= `c-${randomBytes(12).toString("hex")}`;
    return { max, claim_id: this.#reportClaimId };
  }

  #requeue(outcomes: Outcome[], moved: Running[]): void {
    this.#outcomes = outcomes.concat(this.#outcomes);
    moved.forEach((r) => (r.progressDirty = true));
  }

  // #rejected handles a report the server refused whole (4xx naming a
  // field): the item at fault is answered or dropped, the rest sent again.
  #rejected(e: AxError, outcomes: Outcome[], moved: Running[]): void {
    this.#o.log(`report refused: ${e}`);
    if (e.field.startsWith("claim")) {
      // A server that refuses the report's claim: claim through the claim route only.
      this.#reportClaims = false;
      this.#requeue(outcomes, moved);
      this.#wake();
      return;
    }
    const m = /^(outcomes|progress|held)\[(\d+)\]/.exec(e.field);
    if (!m) return; // nothing says which item: dropping the batch is the only way out of a loop
    const i = Number(m[2]);
    if (m[1] === "outcomes") {
      const o = outcomes[i];
      if (o && o.status === "success") {
        outcomes[i] = { id: o.id, lease: o.lease, status: "failure", error: `the server refused the result: ${e.message}`, retry: false };
        this.#outcomeMilli.set(outcomes[i]!, this.#milliOfOutcome(o));
      } else outcomes.splice(i, 1);
    } else if (m[1] === "progress") {
      moved.splice(i, 1);
    } else {
      const r = this.#running.get([...this.#running.values()].filter((x) => !x.stopped)[i]?.claim.id ?? "");
      if (r) {
        r.stopped = true;
        r.ctrl.abort(new TaskStoppedError(r.claim.id, "lease_lost"));
      }
    }
    this.#requeue(outcomes, moved);
    this.#wake();
  }

  async #leave(): Promise<void> {
    const reg = this.#reg!;
    try {
      await this.#t.call("DELETE", `/v1/workers/${seg(reg.worker_id)}`, { idempotent: true });
    } catch (e) {
      if (!this.#forgotten(e)) this.#o.log(`leave: ${e}`);
    }
  }
}

function failure(err: unknown): Verdict {
  let text = err instanceof Error ? err.message || err.name : String(err);
  if (text.length > maxErrorChars) text = text.slice(0, maxErrorChars) + "…";
  const ra = (err as { retryAfterMs?: unknown } | null)?.retryAfterMs;
  const o: Verdict = { status: "failure", error: text, retry: !(err instanceof FinalError) };
  if (typeof ra === "number" && ra > 0) o.retry_after_ms = Math.round(ra);
  return o;
}

// truncateBytes cuts s to at most max bytes of UTF-8, on a character boundary.
function truncateBytes(s: string, max: number): string {
  if (Buffer.byteLength(s) <= max) return s;
  let out = "";
  for (const ch of s) {
    if (Buffer.byteLength(out + ch) > max) break;
    out += ch;
  }
  return out;
}
