// The SDK against a real `ax dev` (AX_BIN: the ax binary; make test sets it
// through internal/e2e's TestTypeScriptSDK). Skipped without AX_BIN.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { AxError, Client } from "../src/index.js";
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
});
