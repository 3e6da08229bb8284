// The worker program internal/e2e runs (TestTypeScriptWorker): $AX_URL (the
// region's servers, comma-separated), $AX_TOKEN (a worker token), $AX_POOL.
// Type "ts.resize" reports progress 50, waits payload.ms, and returns
// {width: payload.width / 2}. It prints "start <id> attempt=<n>
// tenant=<t>" and "done <id>" so that the test can count what ran.
import { Worker } from "../src/index.js";

const w = new Worker({ pool: process.env.AX_POOL!, concurrency: 4, graceMs: 5_000, waitMs: 5_000 });
w.handle("ts.resize", async (task) => {
  const p = (task.payload ?? {}) as { ms?: number; width?: number };
  console.log(`start ${task.id} attempt=${task.attempt} tenant=${task.tenant}`);
  task.progress(50, "half way");
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, p.ms ?? 0);
    task.signal.addEventListener("abort", () => {
      clearTimeout(t);
      reject(task.signal.reason);
    });
  });
  console.log(`done ${task.id}`);
  return { width: (p.width ?? 0) / 2 };
});
console.log("ts worker running");
await w.run();
console.log("ts worker stopped");
