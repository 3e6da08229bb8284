// An in-process stand-in for ax servers, for the SDK's unit tests: the
// worker protocol and a few API routes over one shared state (a "region"),
// served by as many HTTP servers as a test starts, with hooks to inject
// failures. The real server is tested in dev.test.ts and internal/e2e.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { ClaimedTask, Outcome, Progress, Report } from "../src/protocol.js";

export interface Call {
  method: string;
  path: string;
  server: number;
  body: any;
}

/** A hook answers a request itself: a status with a body and headers, or "destroy" to drop the connection. */
export type Hook = (c: Call) => { status: number; body?: unknown; headers?: Record<string, string> } | "destroy" | undefined;

export class FakeRegion {
  calls: Call[] = [];
  hooks: Hook[] = [];
  workers = new Map<string, { pool: string; types: string[]; slots: number }>();
  registrations = 0;
  deleted: string[] = [];
  ready: ClaimedTask[] = [];
  leased = new Map<string, ClaimedTask>();
  leasedBy = new Map<string, string>();
  outcomes: Outcome[] = [];
  progress: Progress[] = [];
  reports: Report[] = [];
  stops: { id: string; reason: "canceled" | "preempted" | "lease_lost" }[] = [];
  /** Tasks handed out by each route: the claim route, or a report's claim. */
  routes = { claim: 0, report: 0 };
  #reportClaims = new Map<string, ClaimedTask[]>();
  tasks = new Map<string, any>();
  heartbeatMs = 200;
  maxResultBytes = 1024;
  #servers: Server[] = [];
  #seq = 0;
  #wakers: (() => void)[] = [];

  /** Starts one more server of the region; resolves to its URL. */
  async listen(): Promise<string> {
    const n = this.#servers.length;
    const s = createServer((req, res) => void this.#serve(n, req, res));
    this.#servers.push(s);
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
  }

  /** Stops server n at once, dropping its connections (a killed process). */
  kill(n: number): void {
    const s = this.#servers[n]!;
    s.close();
    s.closeAllConnections();
  }

  close(): void {
    this.#wakers.splice(0).forEach((w) => w());
    for (const s of this.#servers) {
      s.close();
      s.closeAllConnections();
    }
  }

  /** Makes a task claimable. */
  add(t: Partial<ClaimedTask> & { type: string }): ClaimedTask {
    const id = t.id ?? `t-${++this.#seq}`;
    const c: ClaimedTask = {
      id,
      attempt: 1,
      max_retries: 3,
      priority: 2,
      tags: {},
      tenant: "acme",
      trace_id: "",
      lease: `l-${id}-${this.#seq}`,
      deadline: new Date(Date.now() + 60_000).toISOString(),
      ...t,
    };
    this.ready.push(c);
    this.#wakers.splice(0).forEach((w) => w());
    return c;
  }

  outcome(id: string): Outcome | undefined {
    return this.outcomes.find((o) => o.id === id);
  }

  /** Resolves once cond holds (checked every 5 ms), rejects after ms. */
  async until(cond: () => boolean, ms = 5_000, what = "condition"): Promise<void> {
    const end = Date.now() + ms;
    while (!cond()) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  async #serve(server: number, req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    const url = new URL(req.url!, "http://x");
    const call: Call = { method: req.method!, path: url.pathname + url.search, server, body: raw ? JSON.parse(raw) : undefined };
    this.calls.push(call);
    for (const h of this.hooks) {
      const a = h(call);
      if (a === "destroy") return void req.socket.destroy();
      if (a) return send(res, a.status, a.body, a.headers);
    }
    let gone = false;
    res.on("close", () => {
      gone = true;
      this.#wakers.splice(0).forEach((w) => w());
    });
    const a = await this.#route(req.method!, url, call.body, () => gone);
    send(res, a.status, a.body, a.headers);
  }

  async #route(method: string, url: URL, body: any, gone: () => boolean): Promise<{ status: number; body?: unknown; headers?: Record<string, string> }> {
    const p = url.pathname.split("/").slice(1).map(decodeURIComponent);
    if (method === "POST" && url.pathname === "/v1/workers") {
      const id = `rw-${++this.#seq}`;
      this.registrations++;
      this.workers.set(id, body);
      return { status: 201, body: { worker_id: id, region: "fake-1", lease_ms: 3000, heartbeat_ms: this.heartbeatMs, max_wait_ms: 1000, max_claim: 256, max_result_bytes: this.maxResultBytes } };
    }
    if (p[0] === "v1" && p[1] === "workers" && p[2]) {
      if (!this.workers.has(p[2])) return apiError(404, "not_found", "no such worker", "worker_id");
      if (method === "DELETE" && p.length === 3) {
        this.workers.delete(p[2]);
        this.deleted.push(p[2]);
        // A leaving worker's tasks go back to READY at once.
        for (const [id, w] of this.leasedBy) {
          if (w !== p[2] || !this.leased.has(id)) continue;
          this.ready.push(this.leased.get(id)!);
          this.leased.delete(id);
        }
        return { status: 204 };
      }
      if (p[3] === "claim") return { status: 200, body: { tasks: await this.#claim(p[2], body, gone) } };
      if (p[3] === "report") return this.#report(p[2], body);
    }
    if (p[0] === "v1" && p[1] === "tasks") {
      if (method === "POST" && p.length === 2) {
        if (body?.priority > 4) return apiError(400, "invalid_argument", "priority must be 0..4", "priority");
        const id = `task-${++this.#seq}`;
        this.tasks.set(id, { id, state: "READY", type: body.type, attempts: 0, created_at: new Date().toISOString() });
        return { status: 201, body: { id, state: "READY", region: "fake-1", pool: "cpu" } };
      }
      if (method === "GET" && p.length === 2) return { status: 200, body: this.#page(url) };
      const t = this.tasks.get(p[2] ?? "");
      if (!t) return apiError(404, "not_found", "no such task", "id");
      if (method === "GET" && p[3] === "result") return this.#result(p[2]!, url, gone);
      if (method === "GET") return { status: 200, body: t };
      if (p[3] === "cancel") return { status: 200, body: { id: t.id, state: "CANCELED", requested: true } };
    }
    return apiError(404, "not_found", `no route ${method} ${url.pathname}`);
  }

  // #claim claims nothing for a worker that hung up (a real server's
  // request context ends with the connection).
  // Like the server, it claims tasks that fit the worker's free room: its
  // slots less the tasks it holds (outcome not reported yet), in
  // milli-slots, and with none free waits out the poll.
  async #claim(worker: string, body: { max: number; wait_ms: number }, gone: () => boolean): Promise<ClaimedTask[]> {
    const end = Date.now() + body.wait_ms;
    const n = this.#room(worker) > 0 ? body.max : 0;
    if (n <= 0) {
      await new Promise((r) => setTimeout(r, body.wait_ms));
      return [];
    }
    while (this.ready.length === 0 && Date.now() < end && !gone()) {
      await new Promise<void>((r) => {
        const t = setTimeout(r, end - Date.now());
        this.#wakers.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    if (!this.workers.has(worker) || gone()) return [];
    return this.#take(worker, n, "claim");
  }

  // #room is the worker's free room in milli-slots: its slots less what the
  // tasks it holds take (a task of slots s takes s).
  #room(worker: string): number {
    let room = (this.workers.get(worker)?.slots ?? 0) * 1000;
    for (const [id, w] of this.leasedBy) {
      const t = this.leased.get(id);
      if (w === worker && t) room -= Math.round((t.slots ?? 1) * 1000);
    }
    return room;
  }

  // #take leases up to n ready tasks that fit the worker's room together, in
  // order: one that does not fit ends the take.
  #take(worker: string, n: number, route: "claim" | "report"): ClaimedTask[] {
    let room = this.#room(worker);
    let k = 0;
    while (k < Math.min(n, this.ready.length)) {
      const need = Math.round((this.ready[k]!.slots ?? 1) * 1000);
      if (need > room) break;
      room -= need;
      k++;
    }
    const out = this.ready.splice(0, k);
    out.forEach((t) => {
      this.leased.set(t.id, t);
      this.leasedBy.set(t.id, worker);
    });
    this.routes[route] += out.length;
    return out;
  }

  #report(worker: string, body: Report): { status: number; body?: unknown } {
    const claim = body.claim;
    if (claim && !(claim.max >= 1 && claim.max <= 256)) return apiError(400, "invalid_argument", "must be 1..256", "claim.max");
    this.reports.push(body);
    this.progress.push(...(body.progress ?? []));
    const answers = (body.outcomes ?? []).map((o) => {
      const ok = this.leased.get(o.id)?.lease === o.lease;
      if (ok) {
        this.outcomes.push(o as Outcome);
        this.leased.delete(o.id);
      }
      return ok ? { id: o.id, ok } : { id: o.id, ok, code: "lease_lost", message: "not held" };
    });
    const out: { stop: unknown[]; outcomes: unknown[]; tasks?: ClaimedTask[] } = { stop: this.stops.splice(0), outcomes: answers };
    if (claim) {
      // Like the server: cut to the slots free once the report is applied;
      // the same claim_id again answers the tasks it took.
      let took = (this.#reportClaims.get(claim.claim_id ?? "") ?? []).filter((t) => this.leased.get(t.id) === t);
      if (took.length === 0) {
        took = this.#take(worker, claim.max, "report");
        if (claim.claim_id) this.#reportClaims.set(claim.claim_id, took);
      }
      if (took.length) out.tasks = took;
    }
    return { status: 200, body: out };
  }

  // #result answers GET /v1/tasks/{id}/result, waiting up to ?wait=<n>ms
  // for the task (fake.tasks, which tests change) to be terminal.
  async #result(id: string, url: URL, gone: () => boolean): Promise<{ status: number; body: unknown }> {
    const m = /^(\d+)ms$/.exec(url.searchParams.get("wait") ?? "");
    const end = Date.now() + (m ? Number(m[1]) : 0);
    for (;;) {
      const t = this.tasks.get(id);
      const done = ["SUCCESS", "FAILED", "CANCELED"].includes(t.state);
      if (done || Date.now() >= end || gone()) {
        const body: Record<string, unknown> = { id, state: t.state, done, attempts: t.attempts };
        if (t.result !== undefined) body.result = t.result;
        if (t.last_error) body.error = t.last_error;
        return { status: done ? 200 : 202, body };
      }
      await new Promise((r) => setTimeout(r, Math.min(20, end - Date.now())));
    }
  }

  #page(url: URL): unknown {
    const all = [...this.tasks.values()];
    const from = Number(url.searchParams.get("cursor") ?? 0);
    const limit = Number(url.searchParams.get("limit") ?? 2);
    const next = from + limit < all.length ? String(from + limit) : undefined;
    return { tasks: all.slice(from, from + limit), next_cursor: next, unavailable: [] };
  }
}

export function apiError(status: number, code: string, message: string, field?: string, retryAfter?: number) {
  return {
    status,
    body: { error: { code, message, field } },
    headers: retryAfter === undefined ? undefined : { "retry-after": String(retryAfter) },
  };
}

function send(res: ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}): void {
  const text = body === undefined ? "" : JSON.stringify(body);
  res.writeHead(status, { ...headers, ...(text ? { "content-type": "application/json" } : {}) });
  res.end(text);
}
