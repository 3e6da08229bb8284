// A remote TypeScript worker for internal/e2e's TestSDKWorkersKilledAndStopped
// (the twin of internal/e2e/testdata/sdkgated.py): $AX_URL (the region's
// servers), $AX_TOKEN (a worker token), $AX_POOL, $AX_E2E_NAME (its name in
// the runs file), $AX_E2E_GRACE (seconds running handlers get at SIGTERM),
// $AX_E2E_SLOTS (its concurrency),
// $AX_E2E_RUNS (a file: one JSON line per handler start and end) and
// $AX_E2E_GATES (a directory: a task whose payload has "gate" waits until
// the file GATES/<task id> exists).
import { appendFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { Worker, type Task } from "../src/index.js";

const name = process.env.AX_E2E_NAME!;
const runs = process.env.AX_E2E_RUNS!;
const gates = process.env.AX_E2E_GATES!;

function note(ev: string, task: Task): void {
  appendFileSync(runs, JSON.stringify({ ev, id: task.id, attempt: task.attempt, worker: name, slots: task.slots }) + "\n");
}

const w = new Worker({ pool: process.env.AX_POOL!, concurrency: Number(process.env.AX_E2E_SLOTS ?? 4), graceMs: Number(process.env.AX_E2E_GRACE) * 1000, name });
w.handle("sdk.gated", async (task) => {
  note("start", task);
  const p = (task.payload ?? {}) as { n?: number; gate?: boolean };
  task.progress(50, "at the gate");
  while (p.gate && !existsSync(join(gates, task.id))) {
    if (task.signal.aborted) {
      note("stopped", task);
      throw task.signal.reason;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  note("done", task);
  return { n: p.n, worker: name };
});
console.log("sdkgated running");
await w.run();
console.log("sdkgated exited");
