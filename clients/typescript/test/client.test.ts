import assert from "node:assert/strict";
import { createServer } from "node:net";
import { after, before, describe, it } from "node:test";
import { AxError, Client, WaitTimeout, backoff } from "../src/index.js";
import { FakeRegion, apiError } from "./fake.js";

// A port nothing listens on: connections to it are refused.
async function deadURL(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return `http://127.0.0.1:${port}`;
}

describe("Client", () => {
  let fake: FakeRegion;
  let url: string;
  before(async () => {
    fake = new FakeRegion();
    url = await fake.listen();
  });
  after(() => fake.close());

  function fresh(): void {
    fake.calls = [];
    fake.hooks = [];
  }

  it("submits, gets and waits for the result with one long poll", async () => {
    fresh();
    const ax = new Client({ urls: url, token: "tok" });
    const sub = await ax.submit({ type: "resize", payload: { w: 10 } });
    assert.equal(sub.state, "READY");
    assert.equal((await ax.get(sub.id)).state, "READY");
    setTimeout(() => Object.assign(fake.tasks.get(sub.id), { state: "SUCCESS", result: { w: 5 } }), 300);
    const start = Date.now();
    const r = await ax.wait(sub.id, 5_000);
    assert.deepEqual([r.state, r.done, r.result], ["SUCCESS", true, { w: 5 }]);
    assert.ok(Date.now() - start < 1_500, `took ${Date.now() - start} ms`);
    const waits = fake.calls.filter((c) => c.path.includes("/result"));
    assert.equal(waits.length, 1, JSON.stringify(waits));
    assert.match(waits[0]!.path, new RegExp(`^/v1/tasks/${sub.id}/result\\?wait=\\d+ms$`));
    assert.equal(fake.calls.filter((c) => c.method === "GET").length, 2, "GET /v1/tasks/{id} is read once, by the test");
    assert.deepEqual(fake.calls[0]!.body, { type: "resize", payload: { w: 10 } });
  });

  it("wait asks again after a saturated answer and answers a failed task's error", async () => {
    fresh();
    const ax = new Client(url);
    const sub = await ax.submit({ type: "boom" });
    Object.assign(fake.tasks.get(sub.id), { state: "FAILED", last_error: "boom" });
    let n = 0;
    fake.hooks.push((c) => (c.path.includes("/result") && n++ === 0 ? apiError(429, "saturated", "too many long-polls", undefined, 0) : undefined));
    const r = await ax.wait(sub.id, 5_000);
    assert.deepEqual([r.state, r.error], ["FAILED", "boom"]);
    assert.equal(fake.calls.filter((c) => c.path.includes("/result")).length, 2);
    const e = await ax.wait("no-such-task", 1_000).catch((e: unknown) => e);
    assert.ok(e instanceof AxError && e.status === 404, String(e));
  });

  it("sends a cut-off submit again only when a second send creates nothing new", async () => {
    fresh();
    const ax = new Client(url);
    const cutNext = () => {
      let cut = 0;
      fake.hooks = [(c) => (c.method === "POST" && cut++ === 0 ? "destroy" : undefined)];
    };
    for (const spec of [
      { type: "u", unique_key: "u1", unique_for: "1h" },
      { type: "d", debounce_key: "d1", debounce: "2s", debounce_max_wait: "30s" },
    ] as const) {
      cutNext();
      fake.calls = [];
      await ax.submit(spec);
      assert.equal(fake.calls.length, 2, spec.type);
      assert.deepEqual(fake.calls[1]!.body, spec);
    }
    cutNext();
    fake.calls = [];
    const e = await ax.submit({ type: "r", unique_key: "u2", unique_conflict: "reject" }).catch((e: unknown) => e);
    assert.ok(e instanceof AxError && e.code === "unavailable", String(e));
    assert.equal(fake.calls.length, 1);
  });

  it("throws AxError with status, code, message and field, without retrying a 400", async () => {
    fresh();
    const ax = new Client(url);
    const e = await ax.submit({ type: "x", priority: 9 }).catch((e: unknown) => e);
    assert.ok(e instanceof AxError);
    assert.equal(e.status, 400);
    assert.equal(e.code, "invalid_argument");
    assert.equal(e.message, "priority must be 0..4");
    assert.equal(e.field, "priority");
    assert.equal(String(e), "AxError: 400 invalid_argument: priority must be 0..4 (field priority)");
    assert.equal(fake.calls.length, 1);
  });

  it("retries a 503 after its Retry-After", async () => {
    fresh();
    let n = 0;
    fake.hooks.push(() => (n++ === 0 ? apiError(503, "unavailable", "Redis is down", undefined, 1) : undefined));
    const ax = new Client(url);
    const start = Date.now();
    await ax.listTasks();
    const took = Date.now() - start;
    assert.equal(fake.calls.length, 2);
    assert.ok(took >= 1_000 && took < 2_500, `took ${took} ms, Retry-After said 1 s`);
  });

  it("gives up after its retries with the last 429", async () => {
    fresh();
    fake.hooks.push(() => ({ ...apiError(429, "rate_limited", "slow down"), body: { error: { code: "rate_limited", message: "slow down", retry_after_seconds: 0 } } }));
    const ax = new Client({ urls: url, retries: 2 });
    const e = await ax.get("x").catch((e: unknown) => e);
    assert.ok(e instanceof AxError && e.status === 429 && e.code === "rate_limited", String(e));
    assert.equal(fake.calls.length, 3);
  });

  it("moves to the next URL when a server refuses connections", async () => {
    fresh();
    const ax = new Client({ urls: [await deadURL(), url] });
    const page = await ax.listTasks();
    assert.ok(Array.isArray(page.tasks));
    assert.equal(fake.calls.length, 1);
  });

  it("throws code unavailable when no server answers", async () => {
    const ax = new Client({ urls: [await deadURL()], retries: 1 });
    const e = await ax.get("x").catch((e: unknown) => e);
    assert.ok(e instanceof AxError && e.status === 0 && e.code === "unavailable", String(e));
  });

  it("repeats a submit cut off after sending only when it has an idempotency key", async () => {
    fresh();
    let cut = 0;
    fake.hooks.push((c) => (c.method === "POST" && cut++ === 0 ? "destroy" : undefined));
    const ax = new Client(url);
    const e = await ax.submit({ type: "once" }).catch((e: unknown) => e);
    assert.ok(e instanceof AxError && e.code === "unavailable", String(e));
    assert.equal(fake.calls.length, 1, "a submit without idempotency_key must not be sent twice");
    cut = 0;
    fake.calls = [];
    const ok = await ax.submit({ type: "once", idempotency_key: "k1" });
    assert.ok(ok.id);
    assert.equal(fake.calls.length, 2);
  });

  it("iterates every page of tasks", async () => {
    const ax = new Client(url);
    for (let i = 0; i < 5; i++) await ax.submit({ type: "page" });
    fresh();
    const want = fake.tasks.size;
    const ids: string[] = [];
    for await (const t of ax.iterTasks({ limit: 2 })) ids.push(t.id);
    assert.equal(ids.length, want);
    assert.equal(new Set(ids).size, want);
    assert.equal(fake.calls.length, Math.ceil(want / 2));
  });

  it("wait throws WaitTimeout when the task stays running", async () => {
    fresh();
    const ax = new Client(url);
    const sub = await ax.submit({ type: "slow" });
    const e = await ax.wait(sub.id, 200).catch((e: unknown) => e);
    assert.ok(e instanceof WaitTimeout && e instanceof AxError && e.code === "timeout" && e.status === 0, String(e));
    assert.match(e.message, /state READY/);
    assert.equal((e.task as { state: string }).state, "READY");
  });
});

describe("backoff", () => {
  it("grows to 5 s, jittered over its upper half, and honours Retry-After", () => {
    assert.equal(backoff(0, undefined, () => 0), 50);
    assert.equal(backoff(0, undefined, () => 1), 100);
    assert.equal(backoff(3, undefined, () => 1), 800);
    assert.equal(backoff(30, undefined, () => 1), 5_000);
    assert.equal(backoff(30, undefined, () => 0), 2_500);
    assert.equal(backoff(0, 2_000, () => 0), 2_000);
    assert.equal(backoff(0, 2_000, () => 1), 2_200);
    assert.equal(backoff(0, 60_000, () => 1), 61_000);
  });
});
