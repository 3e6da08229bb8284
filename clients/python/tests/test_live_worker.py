"""A Worker against a real `ax dev` (auth off, --no-demo-workers): AX_URL
is its first region's API (internal/e2e's TestPythonSDK sets it).
Skipped without AX_URL.
"""

import asyncio
import threading
import time
import unittest

from axsched import Client, FinalError, Worker

from test_live import REGION, SPOT, URL, unique


@unittest.skipUnless(URL, "needs a running ax dev (AX_URL)")
class WorkerLiveTest(unittest.TestCase):
    """A Worker of pool cpu-spot in us-east-1 runs the tasks of its types."""

    @classmethod
    def setUpClass(cls):
        cls.ax = Client(URL)
        cls.kind = unique("py")
        cls.gates = {}
        cls.seen = {}
        w = Worker(URL, pool="cpu-spot", concurrency=4, grace=5, labels={"suite": "test_live"})
        cls.worker = w

        @w.handler(cls.kind + ".echo")
        def echo(task):
            task.progress(50, "half way")
            gate = cls.gates.get(task.payload.get("gate"))
            if gate is not None:
                gate.wait(20)
            return {"echo": task.payload, "attempt": task.attempt, "tenant": task.tenant}

        @w.handler(cls.kind + ".async")
        async def slow(task):
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cls.seen[task.id] = task.stop_reason
                raise

        @w.handler(cls.kind + ".flaky")
        def flaky(task):
            if task.attempt == 1:
                raise RuntimeError("first attempt fails")
            return task.attempt

        @w.handler(cls.kind + ".final")
        def final(task):
            raise FinalError("never")

        cls.thread = threading.Thread(target=w.run, daemon=True)
        cls.thread.start()

    @classmethod
    def tearDownClass(cls):
        cls.worker.stop()
        cls.thread.join(20)
        assert not cls.thread.is_alive(), "the worker did not stop"

    def submit(self, suffix, payload=None, **spec):
        spec.update(type=self.kind + "." + suffix, payload=payload or {}, regions=[REGION], tags=SPOT)
        return self.ax.submit(spec)["id"]

    def test_results_and_progress_through_get(self):
        gate = threading.Event()
        self.gates["g1"] = gate
        held = self.submit("echo", {"gate": "g1"})
        ids = [self.submit("echo", {"n": i}) for i in range(6)]
        for i, tid in enumerate(ids):
            r = self.ax.wait(tid, timeout=30)
            self.assertEqual((r["state"], r["done"]), ("SUCCESS", True), r)
            tenant = self.ax.get(tid)["tenant"]
            self.assertEqual(r["result"], {"echo": {"n": i}, "attempt": 1, "tenant": tenant})
        end = time.monotonic() + 15
        while (self.ax.get(held).get("progress") or {}).get("percent") != 50 and time.monotonic() < end:
            time.sleep(0.05)
        t = self.ax.get(held)
        self.assertEqual((t["state"], t["progress"]["percent"], t["progress"]["message"]), ("RUNNING", 50, "half way"))
        gate.set()
        self.assertEqual(self.ax.wait(held, timeout=30)["state"], "SUCCESS")

    def test_failures_retry_and_final_errors_dead_letter(self):
        flaky = self.submit("flaky", max_retries=2, retry_base="100ms")
        final = self.submit("final", max_retries=3)
        t = self.ax.wait(flaky, timeout=30)
        self.assertEqual((t["state"], t["attempts"], t["result"]), ("SUCCESS", 2, 2))
        t = self.ax.wait(final, timeout=30)
        self.assertEqual((t["state"], t["attempts"]), ("FAILED", 1))
        self.assertIn("never", t["error"])
        self.assertIn(final, [d["id"] for d in self.ax.iter_dlq(type=self.kind + ".final")])

    def test_cancel_reaches_a_running_async_handler(self):
        tid = self.submit("async")
        end = time.monotonic() + 15
        while self.ax.get(tid)["state"] != "RUNNING" and time.monotonic() < end:
            time.sleep(0.05)
        self.ax.cancel(tid)
        self.assertEqual(self.ax.wait(tid, timeout=15)["state"], "CANCELED")
        end = time.monotonic() + 15
        while tid not in self.seen and time.monotonic() < end:
            time.sleep(0.05)
        self.assertEqual(self.seen.get(tid), "canceled")


if __name__ == "__main__":
    unittest.main()
