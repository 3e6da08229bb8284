// A worker process for worker.test.ts's SIGTERM case: one "slow" handler
// (300 ms) against AX_URL, signals on.
import { Worker } from "../src/index.js";

const w = new Worker({ urls: process.env.AX_URL!, pool: "p", waitMs: 200 });
w.handle("slow", async () => {
  console.log("slow started");
  await new Promise((r) => setTimeout(r, 300));
  return "slept";
});
await w.run();
