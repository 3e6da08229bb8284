// The SDK against a real `ax dev` (AX_BIN: the ax binary; make test sets it
// through internal/e2e's TestTypeScriptSDK). Skipped without AX_BIN.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { AxError, Client, FinalError, TaskStoppedError, Worker } from "../src/index.js";
import { type AxDev, startAxDev } from "./axdev.js";

const bin = process.env.AX_BIN;

describe("against ax dev", { skip: bin ? false : "AX_BIN is not set (the ax binary to run ax dev with)" }, () => {
  let dev: AxDev;
  let ax: Client;
  before(async () => {
    dev = await startAxDev(bin!);
    ax = new Client({ urls: dev.url });
  });
  after(() => dev?.stop());

  it("submits a task and waits until it succeeded", async () => {
    const sub = await ax.submit({ type: "sleep", payload: { ms: 20 }, tags: { class: "spot" } });
    assert.ok(sub.id);
    const t = await ax.wait(sub.id, 30_000);
    assert.equal(t.state, "SUCCESS");
    assert.equal(t.result, "slept 20ms");
    const trail = await ax.trail(sub.id);
    assert.deepEqual(trail.transitions.at(-1)?.to, "SUCCESS");
    const seen: string[] = [];
    for await (const x of ax.iterTasks({ type: "sleep", limit: 1 })) seen.push(x.id);
    assert.ok(seen.includes(sub.id), `${sub.id} not among ${seen}`);
  });

  it("throws AxError naming the field of a bad spec", async () => {
    const e = await ax.submit({ type: "noop", priority: 9 }).catch((e: unknown) => e);
    assert.ok(e instanceof AxError, String(e));
    assert.equal(e.status, 400);
    assert.equal(e.field, "priority");
    const missing = await ax.get("no-such-task").catch((e: unknown) => e);
    assert.ok(missing instanceof AxError && missing.status === 404, String(missing));
  });

  it("cancels a task that waits for its time", async () => {
    const sub = await ax.submit({ type: "noop", delay: "1h" });
    await ax.cancel(sub.id);
    const t = await ax.wait(sub.id, 10_000);
    assert.equal(t.state, "CANCELED");
  });

  it("replays a dead letter", async () => {
    const sub = await ax.submit({ type: "sleep", max_retries: 0 }); // no payload: fails for good
    assert.equal((await ax.wait(sub.id, 30_000)).state, "FAILED");
    const dead = await ax.dlq({ type: "sleep" });
    assert.ok(dead.tasks.some((t) => t.id === sub.id));
    await ax.replay(sub.id);
    let failed = 0;
    for (let i = 0; i < 300 && failed < 2; i++) {
      await new Promise((r) => setTimeout(r, 100));
      failed = (await ax.trail(sub.id)).transitions.filter((t) => t.to === "FAILED").length;
    }
    assert.equal(failed, 2, "the replayed task did not run and fail again");
  });

  it("runs a DAG", async () => {
    const d = await ax.createDAG({ name: "ts-dag", nodes: [{ id: "a", task: { type: "noop" } }, { id: "b", task: { type: "noop" }, depends_on: ["a"] }] });
    let st = await ax.getDAG(d.id);
    for (let i = 0; i < 200 && st.state === "RUNNING"; i++) {
      await new Promise((r) => setTimeout(r, 100));
      st = await ax.getDAG(d.id);
    }
    assert.equal(st.state, "SUCCESS");
    const list = await ax.listDAGs({ name: "ts-dag" });
    assert.ok(JSON.stringify(list).includes(d.id));
  });

  it("creates, pauses, resumes and deletes a schedule", async () => {
    await ax.createSchedule({ name: "ts-nightly", cron: "0 3 * * *", task: { type: "noop" } });
    assert.equal((await ax.pauseSchedule("ts-nightly")).paused, true);
    assert.equal((await ax.resumeSchedule("ts-nightly")).paused, false);
    assert.equal((await ax.getSchedule("ts-nightly")).name, "ts-nightly");
    assert.ok(JSON.stringify(await ax.listSchedules()).includes("ts-nightly"));
    await ax.deleteSchedule("ts-nightly");
    const gone = await ax.getSchedule("ts-nightly").catch((e: unknown) => e);
    assert.ok(gone instanceof AxError && gone.status === 404, String(gone));
  });

  it("backfills and reruns a schedule's periods", async () => {
    await ax.createSchedule({ name: "ts-backfill", cron: "0 3 * * *", timezone: "UTC", paused: true, task: { type: "noop" } });
    const b = await ax.backfillSchedule("ts-backfill", { from: "2026-01-01", to: "2026-01-03", max_active: 2 });
    assert.deepEqual([b.schedule, b.periods, b.max_active, b.rerun ?? false], ["ts-backfill", 2, 2, false]);
    const r = await ax.rerunSchedule("ts-backfill", "2026-01-01T03:00:00Z");
    assert.deepEqual([r.periods, r.rerun], [1, true]);
    const list = await ax.listScheduleBackfills("ts-backfill");
    assert.deepEqual(new Set(list.backfills.map((x) => x.id)), new Set([b.id, r.id]));
    const bad = await ax.backfillSchedule("ts-backfill", { from: "2026-01-03", to: "2026-01-01" }).catch((e: unknown) => e);
    assert.ok(bad instanceof AxError && bad.status === 400 && bad.field === "from", String(bad));
    const off = await ax.rerunSchedule("ts-backfill", "2026-01-01T04:00:00Z").catch((e: unknown) => e);
    assert.ok(off instanceof AxError && off.status === 400 && off.field === "period", String(off));
    await ax.createSchedule({ name: "ts-after", cron: "0 3 * * *", timezone: "UTC", paused: true, task: { type: "noop" },
      depends_on_schedules: [{ schedule: "ts-backfill", rule: "same_period" }] });
    const d = await ax.rerunSchedule("ts-backfill", "2026-01-02T03:00:00Z", undefined, { downstream: true });
    assert.deepEqual(d.downstream?.map((x) => x.schedule), ["ts-after"]);
    const after = (await ax.listScheduleBackfills("ts-after")).backfills[0];
    assert.deepEqual([after?.id, after?.waits_for?.[0]?.schedule, after?.waits_for?.[0]?.rerun], [d.downstream?.[0]?.id, "ts-backfill", d.id]);
    await ax.deleteSchedule("ts-after");
    await ax.deleteSchedule("ts-backfill");
  });

  it("runs a worker: progress in GET, result, cancel aborts the handler, FinalError dead-letters", async () => {
    const w = new Worker({ urls: dev.url, pool: "cpu-spot", concurrency: 2, signals: false, waitMs: 1_000 });
    let aborted: unknown;
    w.handle("ts.dev", async (task) => {
      const p = task.payload as { mode: string };
      if (p.mode === "final") throw new FinalError("no such image");
      task.progress(30, "a third");
      if (p.mode === "quick") return { mode: p.mode, attempt: task.attempt };
      await new Promise<void>((resolve) =>
        task.signal.addEventListener("abort", () => {
          aborted = task.signal.reason;
          resolve();
        }),
      );
      return "ignored";
    });
    const running = w.run();
    try {
      const quick = await ax.submit({ type: "ts.dev", payload: { mode: "quick" } });
      const q = await ax.wait(quick.id, 30_000);
      assert.equal(q.state, "SUCCESS");
      assert.deepEqual(q.result, { mode: "quick", attempt: 1 });

      const hang = await ax.submit({ type: "ts.dev", payload: { mode: "hang" } });
      for (let i = 0; ; i++) {
        const t = await ax.get(hang.id);
        if (t.progress?.percent === 30) {
          assert.equal(t.progress.message, "a third");
          break;
        }
        assert.ok(i < 300, `no progress in GET after 30 s: ${JSON.stringify(t)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      await ax.cancel(hang.id);
      assert.equal((await ax.wait(hang.id, 10_000)).state, "CANCELED");
      for (let i = 0; i < 200 && aborted === undefined; i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok(aborted instanceof TaskStoppedError && aborted.reason === "canceled", String(aborted));

      const bad = await ax.submit({ type: "ts.dev", payload: { mode: "final" }, max_retries: 3 });
      const b = await ax.wait(bad.id, 30_000);
      assert.equal(b.state, "FAILED");
      assert.equal(b.attempts, 1);
      assert.match(b.error ?? "", /no such image/);
    } finally {
      await w.stop();
      await running;
    }
  });

  it("runs the README's TypeScript worker as written", async () => {
    const pkg = fileURLToPath(new URL("../../", import.meta.url));
    const readme = readFileSync(new URL("../../../../README.md", import.meta.url), "utf8");
    const m = /### A TypeScript worker against `ax dev`[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme);
    assert.ok(m, "README.md has no TypeScript worker example");
    assert.ok(m[1]!.includes("http://127.0.0.1:8080"), "the example no longer names ax dev's default URL");
    // Saved inside the package, whose name it imports (a package may import itself by name).
    const file = pkg + "dist/readme-worker.mjs";
    writeFileSync(file, m[1]!.replaceAll("http://127.0.0.1:8080", dev.url));
    const child = spawn(process.execPath, [file], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    try {
      const sub = await ax.submit({ type: "resize", payload: { width: 640 } });
      const t = await ax.wait(sub.id, 30_000).catch((e) => assert.fail(`${e}\nthe README worker said:\n${out}`));
      assert.equal(t.state, "SUCCESS", out);
      assert.deepEqual(t.result, { width: 320 });
    } finally {
      child.kill("SIGINT");
    }
    assert.equal(await exited, 0, `the README worker did not exit cleanly on SIGINT:\n${out}`);
  });
});
