import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterEach, describe, it } from "node:test";
import { AxError, FinalError, RetryAfter, TaskStoppedError, Worker, type Task } from "../src/index.js";
import { FakeRegion, apiError } from "./fake.js";

const quiet = () => {};

describe("Worker", () => {
  let fake: FakeRegion;
  // The test's worker: stopped after it even when an assertion failed first.
  let current: Worker | undefined;
  afterEach(async () => {
    await current?.stop(0).catch(() => {});
    current = undefined;
    fake.close();
  });

  async function start(handlers: Record<string, (t: Task<any>) => unknown>, o: { concurrency?: number; graceMs?: number; settleMs?: number; servers?: number } = {}) {
    fake = new FakeRegion();
    const urls: string[] = [];
    for (let i = 0; i < (o.servers ?? 1); i++) urls.push(await fake.listen());
    const w = new Worker({ urls, token: "wt", pool: "acme-gpu", concurrency: o.concurrency ?? 2, graceMs: o.graceMs ?? 2_000, settleMs: o.settleMs, signals: false, waitMs: 300, log: quiet });
    for (const [type, h] of Object.entries(handlers)) w.handle(type, h);
    current = w;
    const done = w.run();
    return { w, done };
  }

  it("runs a task: payload in, progress and result out, then leaves", async () => {
    let seen: Task<any> | undefined;
    const { w, done } = await start({
      resize: async (t) => {
        seen = t;
        t.progress(40, "4 of 10");
        await fake.until(() => fake.progress.length > 0, 3_000, "progress reported");
        return { w: t.payload.w * 2 };
      },
    });
    const c = fake.add({ type: "resize", payload: { w: 21 }, attempt: 2, deadline: new Date(Date.now() + 60_000).toISOString() });
    await fake.until(() => !!fake.outcome(c.id), 3_000, "outcome");
    assert.deepEqual(fake.outcome(c.id), { id: c.id, lease: c.lease, status: "success", result: { w: 42 } });
    assert.deepEqual(fake.progress[0], { id: c.id, lease: c.lease, percent: 40, message: "4 of 10" });
    assert.equal(seen!.attempt, 2);
    assert.equal(seen!.tenant, "acme");
    assert.ok(seen!.deadline instanceof Date);
    assert.deepEqual(fake.workers.get(w.id!), { pool: "acme-gpu", types: ["resize"], slots: 2 });
    await w.stop();
    await done;
    assert.deepEqual(fake.deleted, [w.id]);
    assert.ok(fake.reports.some((r) => r.held?.some((h) => h.id === c.id)), "a heartbeat listed the running task");
  });

  it("reports an exception as a retried failure and FinalError as final", async () => {
    const { w, done } = await start({
      flaky: () => {
        throw new RetryAfter(1500, "disk full");
      },
      doomed: async () => {
        throw new FinalError("bad input");
      },
    });
    const a = fake.add({ type: "flaky" });
    const b = fake.add({ type: "doomed" });
    await fake.until(() => !!fake.outcome(a.id) && !!fake.outcome(b.id), 3_000, "outcomes");
    assert.deepEqual(fake.outcome(a.id), { id: a.id, lease: a.lease, status: "failure", error: "disk full", retry: true, retry_after_ms: 1500 });
    assert.deepEqual(fake.outcome(b.id), { id: b.id, lease: b.lease, status: "failure", error: "bad input", retry: false });
    await w.stop();
    await done;
  });

  it("fails a result over max_result_bytes for good instead of sending it", async () => {
    const { w, done } = await start({ big: () => "x".repeat(2_000) });
    const a = fake.add({ type: "big" });
    await fake.until(() => !!fake.outcome(a.id), 3_000, "outcome");
    const o = fake.outcome(a.id)!;
    assert.equal(o.status, "failure");
    assert.ok(o.status === "failure" && !o.retry && /2002 bytes, over the server's max_result_bytes 1024/.test(o.error), JSON.stringify(o));
    await w.stop();
    await done;
  });

  it("aborts a handler the server says to stop and drops its outcome", async () => {
    let reason: unknown;
    const { w, done } = await start({
      long: (t) =>
        new Promise((_, reject) => {
          t.signal.addEventListener("abort", () => {
            reason = t.signal.reason;
            reject(t.signal.reason);
          });
        }),
    });
    const a = fake.add({ type: "long" });
    await fake.until(() => fake.reports.some((r) => r.held?.length), 3_000, "a heartbeat");
    fake.stops.push({ id: a.id, reason: "canceled" });
    await fake.until(() => reason !== undefined, 3_000, "abort");
    assert.ok(reason instanceof TaskStoppedError && reason.reason === "canceled", String(reason));
    const before = fake.reports.length;
    await fake.until(() => fake.reports.length >= before + 2, 3_000, "two more reports");
    assert.ok(!fake.reports.some((r) => r.outcomes?.some((o) => o.id === a.id)), "a stopped task's outcome was sent");
    assert.ok(!fake.reports.slice(before + 1).some((r) => r.held?.some((h) => h.id === a.id)), "a stopped task is still reported held");
    await w.stop();
    await done;
  });

  it("never runs more handlers than its concurrency", async () => {
    let now = 0;
    let most = 0;
    const { w, done } = await start(
      {
        job: async () => {
          most = Math.max(most, ++now);
          await new Promise((r) => setTimeout(r, 30));
          now--;
        },
      },
      { concurrency: 3 },
    );
    const ids = Array.from({ length: 12 }, () => fake.add({ type: "job" }).id);
    await fake.until(() => ids.every((id) => fake.outcome(id)), 5_000, "12 outcomes");
    assert.equal(most, 3);
    const claims = fake.calls.filter((c) => c.path.endsWith("/claim"));
    assert.ok(claims.every((c) => c.body.max >= 1 && c.body.max <= 3), JSON.stringify(claims.map((c) => c.body)));
    await w.stop();
    await done;
  });

  it("runs four tasks of slots 0.25 at once on one slot, and never a fifth", async () => {
    let now = 0;
    let most = 0;
    let open = false;
    const seen: number[] = [];
    const { w, done } = await start(
      {
        q: async (t) => {
          seen.push(t.slots);
          most = Math.max(most, ++now);
          while (!open) await new Promise((r) => setTimeout(r, 5));
          await new Promise((r) => setTimeout(r, 20));
          now--;
          return t.payload;
        },
      },
      { concurrency: 1 },
    );
    const ids = Array.from({ length: 9 }, (_, i) => fake.add({ type: "q", payload: i, slots: 0.25 }).id);
    await fake.until(() => now === 4, 3_000, "four quarter tasks running");
    await new Promise((r) => setTimeout(r, 300)); // a fifth would have started by now
    assert.equal(now, 4);
    open = true;
    await fake.until(() => ids.every((id) => fake.outcome(id)), 5_000, "9 outcomes");
    assert.equal(most, 4);
    assert.ok(seen.every((s) => s === 0.25), JSON.stringify(seen));
    ids.forEach((id, i) => assert.deepEqual(fake.outcome(id), { id, lease: fake.outcome(id)!.lease, status: "success", result: i }));
    await w.stop();
    await done;
  });

  it("asks for slots only once their outcomes are reported, so a busy worker never waits out a poll", async () => {
    fake = new FakeRegion();
    const w = new Worker({ urls: await fake.listen(), pool: "p", concurrency: 1, signals: false, waitMs: 5_000, log: quiet });
    w.handle("job", () => "ok");
    current = w;
    const done = w.run();
    const ids = Array.from({ length: 6 }, () => fake.add({ type: "job" }).id);
    const t0 = Date.now();
    await fake.until(() => ids.every((id) => fake.outcome(id)), 4_000, "6 outcomes without a 5 s stall");
    assert.ok(Date.now() - t0 < 4_000);
    await w.stop();
    await done;
  });

  it("registers again when the server forgot it (404 worker_id), keeping its task", async () => {
    let release!: () => void;
    const { w, done } = await start({ job: () => new Promise<string>((r) => (release = () => r("ok"))) });
    const a = fake.add({ type: "job" });
    await fake.until(() => release !== undefined, 3_000, "handler started");
    const first = w.id!;
    fake.workers.delete(first); // expired
    await fake.until(() => w.id !== first, 3_000, "a second registration");
    assert.equal(fake.registrations, 2);
    release();
    await fake.until(() => !!fake.outcome(a.id), 3_000, "outcome");
    assert.equal(fake.outcome(a.id)!.status, "success");
    await w.stop();
    await done;
  });

  it("moves to the region's other server when its server dies mid-task, keeping the lease", async () => {
    let release!: () => void;
    const { w, done } = await start({ job: () => new Promise<string>((r) => (release = () => r("ok"))) }, { servers: 2 });
    const a = fake.add({ type: "job" });
    await fake.until(() => release !== undefined, 3_000, "handler started");
    assert.ok(fake.calls.every((c) => c.server === 0));
    fake.kill(0);
    release();
    await fake.until(() => !!fake.outcome(a.id), 5_000, "outcome through server 1");
    assert.deepEqual(fake.outcome(a.id), { id: a.id, lease: a.lease, status: "success", result: "ok" });
    assert.equal(fake.calls.find((c) => c.path.endsWith("/report") && c.body.outcomes)!.server, 1);
    assert.equal(fake.registrations, 1);
    await w.stop();
    await done;
  });

  it("keeps outcomes through 503s and sends them once the server is back", async () => {
    const { w, done } = await start({ job: () => "ok" });
    let down = true;
    fake.hooks.push((c) => (down && c.path.endsWith("/report") ? apiError(503, "unavailable", "Redis is down", undefined, 0) : undefined));
    const a = fake.add({ type: "job" });
    await fake.until(() => fake.calls.filter((c) => c.path.endsWith("/report") && c.body.outcomes).length >= 3, 5_000, "three tries");
    assert.equal(fake.outcomes.length, 0);
    down = false;
    await fake.until(() => !!fake.outcome(a.id), 5_000, "outcome");
    await w.stop();
    await done;
  });

  it("answers a refused result as a final failure and sends the rest of the batch", async () => {
    const { w, done } = await start({ job: (t) => t.payload });
    fake.hooks.push((c) => {
      const i = c.body?.outcomes?.findIndex((o: any) => o.result === "poison") ?? -1;
      return i >= 0 ? apiError(413, "too_large", "result too large", `outcomes[${i}].result`) : undefined;
    });
    const a = fake.add({ type: "job", payload: "fine" });
    const b = fake.add({ type: "job", payload: "poison" });
    await fake.until(() => !!fake.outcome(a.id) && !!fake.outcome(b.id), 3_000, "outcomes");
    assert.equal(fake.outcome(a.id)!.status, "success");
    const o = fake.outcome(b.id)!;
    assert.ok(o.status === "failure" && !o.retry && /result too large/.test(o.error), JSON.stringify(o));
    await w.stop();
    await done;
  });

  it("on stop, lets handlers finish within the grace, returns the rest, reports, then leaves", async () => {
    let reason: unknown;
    let started = 0;
    const { w, done } = await start(
      {
        quick: async () => {
          started++;
          await new Promise((r) => setTimeout(r, 100));
          return "quick";
        },
        stuck: (t) => {
          started++;
          return new Promise(() => t.signal.addEventListener("abort", () => (reason = t.signal.reason)));
        },
      },
      { graceMs: 400, settleMs: 100 },
    );
    const q = fake.add({ type: "quick" });
    const s = fake.add({ type: "stuck" });
    await fake.until(() => started === 2, 3_000, "both started");
    const t0 = Date.now();
    await w.stop();
    await done;
    const took = Date.now() - t0;
    assert.ok(took >= 400 && took < 1_500, `stop took ${took} ms with a 400 ms grace and a 100 ms settle`);
    assert.deepEqual(fake.outcome(q.id), { id: q.id, lease: q.lease, status: "success", result: "quick" });
    assert.deepEqual(fake.outcome(s.id), { id: s.id, lease: s.lease, status: "return" });
    assert.ok(reason instanceof TaskStoppedError && reason.reason === "shutdown");
    const last = fake.calls.at(-1)!;
    assert.equal(last.method, "DELETE");
    assert.equal(fake.calls.filter((c) => c.path.endsWith("/claim")).at(-1)!.body.max >= 1, true);
  });

  it("at the end of the grace hands a task back only once its stopped handler returned", async () => {
    let handedBackWhileRunning: boolean | undefined;
    const { w, done } = await start(
      {
        tidy: (t) =>
          new Promise((_, reject) =>
            t.signal.addEventListener("abort", () =>
              setTimeout(() => {
                handedBackWhileRunning = !!fake.outcome(t.id);
                reject(t.signal.reason);
              }, 200),
            ),
          ),
      },
      { graceMs: 100, settleMs: 5_000 },
    );
    const a = fake.add({ type: "tidy" });
    await fake.until(() => fake.reports.some((r) => r.held?.some((h) => h.id === a.id)), 3_000, "the task running");
    await w.stop();
    await done;
    assert.equal(handedBackWhileRunning, false);
    assert.deepEqual(fake.outcome(a.id), { id: a.id, lease: a.lease, status: "return" });
  });

  it("hands back the task of a handler that ignores its stop after settleMs", async () => {
    let started = false;
    const { w, done } = await start(
      {
        deaf: () => {
          started = true;
          return new Promise(() => {});
        },
      },
      { graceMs: 100, settleMs: 200 },
    );
    const a = fake.add({ type: "deaf" });
    await fake.until(() => started, 3_000, "handler started");
    await w.stop();
    await done;
    assert.deepEqual(fake.outcome(a.id), { id: a.id, lease: a.lease, status: "return" });
  });

  it("claims its next tasks in the answer to the report of its outcomes while every slot is busy", async () => {
    const { w, done } = await start(
      {
        job: async (t) => {
          await new Promise((r) => setTimeout(r, 50));
          return t.payload;
        },
      },
      { concurrency: 1 },
    );
    const ids = [0, 1, 2].map((i) => fake.add({ type: "job", payload: i }).id);
    await fake.until(() => ids.every((id) => fake.outcome(id)), 5_000, "3 outcomes");
    ids.forEach((id, i) => assert.deepEqual({ ...fake.outcome(id), lease: undefined }, { id, lease: undefined, status: "success", result: i }));
    // The first through the claim route; each next one in the answer to the
    // report of the outcome that freed the slot.
    assert.deepEqual(fake.routes, { claim: 1, report: 2 });
    const claims = fake.reports.filter((r) => r.claim);
    assert.ok(claims.length >= 3 && claims.every((r) => r.claim!.max === 1 && r.outcomes?.length), JSON.stringify(claims));
    assert.equal(new Set(claims.map((r) => r.claim!.claim_id)).size, claims.length, "a new claim_id once answered");
    await w.stop();
    await done;
  });

  it("sends a report's claim again under the same claim_id when its answer was lost", async () => {
    const { w, done } = await start({ job: (t) => t.payload }, { concurrency: 1 });
    let drop = true;
    fake.hooks.push((c) => {
      if (drop && c.path.endsWith("/report") && c.body?.claim) {
        drop = false;
        return "destroy";
      }
      return undefined;
    });
    const ids = [0, 1].map((i) => fake.add({ type: "job", payload: i }).id);
    await fake.until(() => ids.every((id) => fake.outcome(id)), 5_000, "2 outcomes");
    const sent = fake.calls.filter((c) => c.path.endsWith("/report") && c.body?.claim).map((c) => c.body.claim.claim_id);
    assert.ok(sent.length >= 2 && sent[0] === sent[1], JSON.stringify(sent));
    await w.stop();
    await done;
  });

  it("claims through the claim route only once a server refused a report's claim", async () => {
    const { w, done } = await start({ job: (t) => t.payload }, { concurrency: 1 });
    let refuse = true;
    fake.hooks.push((c) => {
      if (refuse && c.path.endsWith("/report") && c.body?.claim) {
        refuse = false;
        return apiError(400, "invalid_argument", "must be 1..256", "claim.max");
      }
      return undefined;
    });
    const ids = [0, 1, 2].map((i) => fake.add({ type: "job", payload: i }).id);
    await fake.until(() => ids.every((id) => fake.outcome(id)), 5_000, "3 outcomes");
    ids.forEach((id, i) => assert.equal((fake.outcome(id) as { result?: unknown }).result, i));
    assert.deepEqual(fake.routes, { claim: 3, report: 0 });
    assert.equal(fake.calls.filter((c) => c.path.endsWith("/report") && c.body?.claim).length, 1);
    await w.stop();
    await done;
  });

  it("stops on SIGTERM: finishes the running task, reports it, leaves and exits 0", async () => {
    fake = new FakeRegion();
    const url = await fake.listen();
    const child = spawn(process.execPath, [fileURLToPath(new URL("./sigterm-worker.js", import.meta.url))], {
      env: { ...process.env, AX_URL: url },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    const a = fake.add({ type: "slow" });
    await fake.until(() => out.includes("slow started"), 5_000, "handler started");
    child.kill("SIGTERM");
    await fake.until(() => out.includes("SIGTERM: stopping"), 5_000, "the worker saw SIGTERM");
    const b = fake.add({ type: "slow" }); // must not be claimed any more
    assert.equal(await exited, 0, out);
    assert.deepEqual(fake.outcome(a.id), { id: a.id, lease: a.lease, status: "success", result: "slept" });
    // A claim answered as the worker hung up may have leased it: leaving put it back.
    assert.ok(fake.ready.some((t) => t.id === b.id), "a task added after SIGTERM is not back in READY");
    assert.equal(fake.outcome(b.id), undefined, "ran a task added after SIGTERM");
    assert.equal(fake.deleted.length, 1);
    assert.match(out, /SIGTERM: stopping/);
  });

  it("stops and rejects run() when its token no longer lets it claim (403)", async () => {
    const { w, done } = await start({ job: () => "ok" });
    await fake.until(() => w.id !== undefined, 3_000, "registered");
    fake.hooks.push((c) => (c.path.endsWith("/claim") ? apiError(403, "permission_denied", "token revoked", "Authorization") : undefined));
    const e = await done.catch((e: unknown) => e);
    assert.ok(e instanceof AxError && e.status === 403, String(e));
    assert.deepEqual(fake.deleted, [w.id]);
  });

  it("rejects run() when the server refuses the registration", async () => {
    fake = new FakeRegion();
    fake.hooks.push((c) => (c.path === "/v1/workers" ? apiError(403, "permission_denied", "pool outside the token", "pool") : undefined));
    const w = new Worker({ urls: await fake.listen(), pool: "other", signals: false, log: quiet }).handle("x", () => 1);
    const e = await w.run().catch((e: unknown) => e);
    assert.ok(e instanceof AxError && e.status === 403 && e.field === "pool", String(e));
  });
});
