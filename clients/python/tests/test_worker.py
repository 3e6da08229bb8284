"""Worker against the in-process fake: handlers, outcomes, stops, faults,
rotation between servers, registration lost, graceful shutdown, SIGTERM."""

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import unittest

from axsched import FinalError, RetryAfter, Worker

from fakeax import FakeAX, FakeServer, free_url


class WorkerTest(unittest.TestCase):
    def setUp(self):
        self.ax = FakeAX()
        self.s1 = FakeServer(self.ax, "s1")
        self.addCleanup(self.s1.kill)

    def worker(self, urls=None, **kw):
        kw.setdefault("pool", "acme-gpu")
        kw.setdefault("concurrency", 2)
        kw.setdefault("grace", 5)
        w = Worker(urls or [self.s1.url], "wtok", **kw)
        w._t.backoff, w._t.max_backoff = 0.01, 0.1
        return w

    def start(self, w):
        th = threading.Thread(target=w.run, daemon=True)
        th.start()

        def stop():
            w.stop()
            th.join(15)
            self.assertFalse(th.is_alive(), "worker did not stop")

        self.addCleanup(stop)
        return stop

    def state(self, tid, want, within=10):
        self.ax.wait(lambda: self.ax.tasks[tid]["state"] == want, within)
        return self.ax.task(tid)

    def test_sync_and_async_handlers_results_progress_and_concurrency(self):
        w = self.worker(concurrency=2)
        live, peak, mu = [0], [0], threading.Lock()

        @w.handler("resize")
        def resize(task):
            with mu:
                live[0] += 1
                peak[0] = max(peak[0], live[0])
            task.progress(50, "half")
            time.sleep(0.3)
            with mu:
                live[0] -= 1
            return {"w": task.payload["w"] * 2, "tenant": task.tenant, "attempt": task.attempt}

        @w.handler("embed")
        async def embed(task):
            await asyncio.sleep(0.05)
            return [task.id, task.deadline.year]

        ids = [self.ax.submit("resize", {"w": i}) for i in range(5)]
        aid = self.ax.submit("embed")
        self.start(w)
        for i, tid in enumerate(ids):
            t = self.state(tid, "SUCCESS")
            self.assertEqual(t["result"], '{"w": %d, "tenant": "acme", "attempt": 1}' % (i * 2))
            self.assertEqual(t["progress"], {"percent": 50, "message": "half"})
        self.assertEqual(self.state(aid, "SUCCESS")["result"], '["%s", 2099]' % aid)
        self.assertEqual(peak[0], 2)
        self.assertTrue(all(self.ax.runs[t] == 1 for t in ids))
        reg = self.ax.seen("POST", "^/v1/workers$")[0][3]
        self.assertEqual((reg["pool"], reg["types"], reg["slots"]), ("acme-gpu", ["embed", "resize"], 2))
        self.assertEqual({r[4] for r in self.ax.requests}, {"Bearer wtok"})

    def test_failures_final_errors_retry_after_and_bad_results(self):
        w = self.worker()

        @w.handler("flaky")
        def flaky(task):
            if task.attempt < 2:
                raise ValueError("boom")
            return "ok"

        @w.handler("final")
        def final(task):
            raise FinalError("bad input")

        @w.handler("later")
        def later(task):
            raise RetryAfter(7.5)

        @w.handler("big")
        def big(task):
            return "x" * 5000

        @w.handler("notjson")
        def notjson(task):
            return object()

        flaky_id, final_id = self.ax.submit("flaky"), self.ax.submit("final")
        later_id = self.ax.submit("later", max_retries=0)
        big_id, nj_id = self.ax.submit("big"), self.ax.submit("notjson")
        self.start(w)
        self.assertEqual(self.state(flaky_id, "SUCCESS")["attempts"], 2)
        self.assertEqual(self.ax.runs[flaky_id], 2)
        t = self.state(final_id, "FAILED")
        self.assertEqual((t["attempts"], t["last_error"]), (1, "FinalError: bad input"))
        self.assertEqual(self.state(later_id, "FAILED")["retry_after_ms"], 7500)
        self.assertIn("over max_result_bytes 1000", self.state(big_id, "FAILED")["last_error"])
        self.assertEqual(self.ax.runs[big_id], 1)  # refused locally: final
        self.assertIn("result is not JSON", self.state(nj_id, "FAILED")["last_error"])

    def test_a_result_the_server_refuses_fails_the_task_and_the_rest_is_reported(self):
        self.ax.params["max_result_bytes"] = 1 << 20  # the worker is told more than the server accepts
        w = self.worker()

        @w.handler("x")
        def x(task):
            return task.payload

        self.start(w)
        self.ax.wait(lambda: self.ax.seen("POST", "/claim"))
        self.ax.params["max_result_bytes"] = 1000
        small, big = self.ax.submit("x", "s"), self.ax.submit("x", "y" * 2000)
        self.assertEqual(self.state(small, "SUCCESS")["result"], '"s"')
        self.assertIn("result refused: over 1000 bytes", self.state(big, "FAILED")["last_error"])
        self.assertEqual(self.ax.runs[big], 1)

    def test_a_cancelled_task_stops_its_handler_and_reports_nothing(self):
        w = self.worker()
        seen = {}

        @w.handler("long")
        def long(task):
            seen["canceled"] = task.cancel_event.wait(10)
            seen["reason"] = task.stop_reason
            return "too late"

        @w.handler("along")
        async def along(task):
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                seen["async"] = task.stop_reason
                raise

        tid, aid = self.ax.submit("long"), self.ax.submit("along")
        self.start(w)
        self.ax.wait(lambda: self.ax.tasks[tid]["state"] == "RUNNING" and self.ax.tasks[aid]["state"] == "RUNNING")
        self.ax.cancel(tid)
        self.ax.cancel(aid)
        self.state(tid, "CANCELED")
        self.state(aid, "CANCELED")
        self.ax.wait(lambda: "reason" in seen and "async" in seen)
        self.assertEqual((seen["canceled"], seen["reason"], seen["async"]), (True, "canceled", "canceled"))
        time.sleep(0.2)
        outcomes = [o for r in self.ax.seen("POST", "/report") for o in r[3].get("outcomes", [])]
        self.assertEqual(outcomes, [])

    def test_a_cancelled_async_handler_holds_its_slot_until_it_returned(self):
        w = self.worker(concurrency=1)
        live, peak, mu = [0], [0], threading.Lock()
        cleaned = threading.Event()

        def enter():
            with mu:
                live[0] += 1
                peak[0] = max(peak[0], live[0])

        def leave():
            with mu:
                live[0] -= 1

        @w.handler("stubborn")
        async def stubborn(task):
            enter()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                await asyncio.sleep(0.5)  # cleaning up after the cancel
                cleaned.set()
                raise
            finally:
                leave()

        @w.handler("quick")
        async def quick(task):
            enter()
            try:
                await asyncio.sleep(0.05)
            finally:
                leave()

        sid = self.ax.submit("stubborn")
        self.start(w)
        self.state(sid, "RUNNING")
        qid = self.ax.submit("quick")
        self.ax.cancel(sid)
        self.state(sid, "CANCELED")
        self.state(qid, "SUCCESS")
        self.assertTrue(cleaned.is_set())
        self.assertEqual(peak[0], 1, "a cancelled handler still cleaning up and another ran at once in 1 slot")

    def test_faults_on_claim_and_report_lose_nothing(self):
        w = self.worker()

        @w.handler("x")
        def x(task):
            return task.payload

        self.ax.fault("/claim", status=503, retry_after=0, times=2)
        self.ax.fault("/report", status=503, retry_after=0, times=2)
        self.ax.fault("/report", drop=True, times=1)
        ids = [self.ax.submit("x", i) for i in range(4)]
        self.start(w)
        for i, tid in enumerate(ids):
            self.assertEqual(self.state(tid, "SUCCESS")["result"], str(i))
        self.assertEqual(sum(self.ax.runs.values()), 4)

    def test_a_report_refused_without_naming_an_item_is_dropped_after_three_tries(self):
        w = self.worker()
        w.handler("x")(lambda task: task.payload)
        self.ax.fault("/report", status=400, times=3, body={"error": {"code": "invalid_argument",
                                                                      "message": "bad", "field": ""}}, has="outcomes")
        tid = self.ax.submit("x", 1)
        self.start(w)
        self.ax.wait(lambda: len([r for r in self.ax.seen("POST", "/report") if "outcomes" in r[3]]) == 3)
        time.sleep(0.3)
        self.assertEqual(len([r for r in self.ax.seen("POST", "/report") if "outcomes" in r[3]]), 3)
        self.assertEqual(self.ax.task(tid)["state"], "RUNNING")  # its outcome was dropped: the lease runs out
        self.assertEqual(self.ax.runs[tid], 1)

    def test_a_forgotten_registration_is_made_again_and_keeps_its_leases(self):
        w = self.worker()
        gate = threading.Event()

        @w.handler("x")
        def x(task):
            gate.wait(10)
            return "done"

        tid = self.ax.submit("x")
        self.start(w)
        self.state(tid, "RUNNING")
        first = w.worker_id
        self.ax.forget_workers()
        self.ax.wait(lambda: len(self.ax.seen("POST", "^/v1/workers$")) == 2)
        gate.set()
        self.assertEqual(self.state(tid, "SUCCESS")["result"], '"done"')
        self.assertNotEqual(w.worker_id, first)
        self.assertEqual(self.ax.runs[tid], 1)

    def test_a_dead_server_moves_the_worker_to_the_next_keeping_its_task(self):
        s2 = FakeServer(self.ax, "s2")
        self.addCleanup(s2.kill)
        w = self.worker([free_url(), self.s1.url, s2.url])
        gate = threading.Event()

        @w.handler("x")
        def x(task):
            task.progress(10)
            gate.wait(10)
            return task.payload

        tid = self.ax.submit("x", "a")
        self.start(w)
        self.ax.wait(lambda: self.ax.tasks[tid]["progress"] == {"percent": 10, "message": ""})
        self.s1.kill()
        gate.set()
        self.assertEqual(self.state(tid, "SUCCESS")["result"], '"a"')
        self.assertEqual(self.ax.runs[tid], 1)
        self.assertTrue(self.ax.seen("POST", "/report.*") and self.ax.seen("POST", "/report")[-1][0] == "s2")
        nid = self.ax.submit("x", "b")
        self.assertEqual(self.state(nid, "SUCCESS")["result"], '"b"')

    def test_graceful_stop_finishes_within_the_grace_and_hands_back_the_rest(self):
        w = self.worker(concurrency=2, grace=1)
        started = threading.Semaphore(0)

        @w.handler("quick")
        def quick(task):
            started.release()
            time.sleep(0.3)
            return "finished"

        @w.handler("stuck")
        def stuck(task):
            started.release()
            task.cancel_event.wait(30)
            return "never reported"

        q, s = self.ax.submit("quick"), self.ax.submit("stuck")
        stop = self.start(w)
        self.assertTrue(started.acquire(timeout=5) and started.acquire(timeout=5))
        wid = w.worker_id
        t0 = time.monotonic()
        stop()
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(self.ax.task(q)["state"], "SUCCESS")
        st = self.ax.task(s)
        self.assertEqual((st["state"], st["attempts"]), ("READY", 0))  # returned: no attempt spent
        self.assertEqual(len(self.ax.seen("DELETE", "/v1/workers/" + wid)), 1)
        claims_after = [r for r in self.ax.seen("POST", "/claim")]
        self.assertTrue(claims_after)

    def test_a_busy_worker_claims_its_next_tasks_in_the_report_of_its_outcomes(self):
        w = self.worker(concurrency=1)

        @w.handler("x")
        def x(task):
            time.sleep(0.1)
            return task.payload

        ids = [self.ax.submit("x", i) for i in range(3)]
        self.start(w)
        for i, tid in enumerate(ids):
            self.assertEqual(self.state(tid, "SUCCESS")["result"], str(i))
        self.assertEqual(dict(self.ax.runs), {tid: 1 for tid in ids})
        # The first through the claim route; each next one in the answer to
        # the report of the outcome that freed the slot.
        self.assertEqual((self.ax.routes["claim"], self.ax.routes["report"]), (1, 2))
        claims = [r[3]["claim"] for r in self.ax.seen("POST", "/report") if "claim" in r[3]]
        self.assertGreaterEqual(len(claims), 3)
        self.assertTrue(all(c["max"] == 1 and c["claim_id"].startswith("c-") for c in claims), claims)
        self.assertEqual(len({c["claim_id"] for c in claims}), len(claims))  # a new id once answered
        self.assertTrue(all("outcomes" in r[3] for r in self.ax.seen("POST", "/report") if "claim" in r[3]))

    def test_one_slot_runs_four_quarter_tasks_at_once_and_never_more(self):
        w = self.worker(concurrency=1)
        mu, now, most, gate = threading.Lock(), [0], [0], threading.Event()

        @w.handler("q")
        def q(task):
            self.assertEqual(task.slots, 0.25)
            with mu:
                now[0] += 1
                most[0] = max(most[0], now[0])
            gate.wait(10)
            time.sleep(0.05)
            with mu:
                now[0] -= 1
            return task.payload

        ids = [self.ax.submit("q", i, slots=0.25) for i in range(9)]
        self.start(w)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with mu:
                if now[0] == 4:
                    break
            time.sleep(0.01)
        time.sleep(0.3)  # a fifth would have started by now
        with mu:
            self.assertEqual(now[0], 4)
        gate.set()
        for i, tid in enumerate(ids):
            self.assertEqual(self.state(tid, "SUCCESS")["result"], str(i))
        self.assertEqual(most[0], 4)
        self.assertEqual(dict(self.ax.runs), {tid: 1 for tid in ids})

    def test_a_report_claim_lost_with_its_report_is_resent_under_the_same_claim_id(self):
        w = self.worker(concurrency=1)
        w.handler("x")(lambda task: task.payload)
        self.ax.fault("/report", drop=True, times=1, has="claim")
        ids = [self.ax.submit("x", i) for i in range(2)]
        self.start(w)
        for tid in ids:
            self.state(tid, "SUCCESS")
        self.assertEqual(dict(self.ax.runs), {tid: 1 for tid in ids})
        claims = [r[3]["claim"]["claim_id"] for r in self.ax.seen("POST", "/report") if "claim" in r[3]]
        self.assertGreaterEqual(len(claims), 2)
        self.assertEqual(claims[0], claims[1])

    def test_a_refused_report_claim_stops_report_claims_and_loses_nothing(self):
        w = self.worker(concurrency=1)
        w.handler("x")(lambda task: task.payload)
        self.ax.fault("/report", status=400, times=1, has="claim",
                      body={"error": {"code": "invalid_argument", "message": "must be 1..256", "field": "claim.max"}})
        ids = [self.ax.submit("x", i) for i in range(3)]
        self.start(w)
        for i, tid in enumerate(ids):
            self.assertEqual(self.state(tid, "SUCCESS")["result"], str(i))
        self.assertEqual(dict(self.ax.runs), {tid: 1 for tid in ids})
        self.assertEqual((self.ax.routes["claim"], self.ax.routes["report"]), (3, 0))
        self.assertEqual(len([r for r in self.ax.seen("POST", "/report") if "claim" in r[3]]), 1)

    def test_at_the_end_of_the_grace_a_task_goes_back_once_its_handler_returned(self):
        w = self.worker(concurrency=2, grace=0.2, settle=5)
        started, seen = threading.Event(), {}

        @w.handler("slow_to_stop")
        def slow_to_stop(task):
            started.set()
            task.cancel_event.wait(30)
            time.sleep(0.3)  # cleaning up after the stop
            seen["state_at_return"] = self.ax.task(task.id)["state"]
            return None

        @w.handler("async_slow_to_stop")
        async def async_slow_to_stop(task):
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                await asyncio.sleep(0.3)  # cleaning up after the stop
                seen["async_state_at_return"] = self.ax.task(task.id)["state"]
                raise

        tid, aid = self.ax.submit("slow_to_stop"), self.ax.submit("async_slow_to_stop")
        stop = self.start(w)
        self.assertTrue(started.wait(5))
        self.state(aid, "RUNNING")
        stop()
        # Neither was handed back while it ran.
        self.assertEqual((seen["state_at_return"], seen["async_state_at_return"]), ("RUNNING", "RUNNING"))
        self.assertEqual(sorted(self.returned()), sorted([tid, aid]))

    def returned(self):
        """The ids of the tasks the worker's reports handed back."""
        return [o["id"] for r in self.ax.seen("POST", "/report") for o in r[3].get("outcomes", [])
                if o["status"] == "return"]

    def test_a_handler_that_ignores_its_stop_is_waited_for_settle_seconds_only(self):
        w = self.worker(concurrency=1, grace=0.1, settle=0.2)
        started, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)

        @w.handler("deaf")
        def deaf(task):
            started.set()
            release.wait(30)

        tid = self.ax.submit("deaf")
        stop = self.start(w)
        self.assertTrue(started.wait(5))
        stop()  # returns although the handler still runs
        self.assertFalse(release.is_set())
        self.assertEqual(self.returned(), [tid])

    def test_a_revoked_token_stops_the_worker(self):
        w = self.worker()
        w.handler("x")(lambda t: None)
        self.ax.fault("/claim", status=401, times=1, body={"error": {"code": "unauthenticated", "message": "no"}})
        with self.assertRaises(Exception) as e:
            w.run()
        self.assertEqual(e.exception.status, 401)
        self.assertEqual(len(self.ax.seen("DELETE", "^/v1/workers/")), 1)

    def test_an_unknown_pool_registration_error_is_raised(self):
        w = self.worker()
        w.handler("x")(lambda t: None)
        self.ax.fault("^/v1/workers$", status=403, body={"error": {"code": "permission_denied",
                                                                   "message": "pool", "field": "pool"}})
        with self.assertRaises(Exception) as e:
            w.run()
        self.assertEqual((e.exception.status, e.exception.field), (403, "pool"))


class SignalTest(unittest.TestCase):
    def test_sigterm_finishes_the_running_task_and_leaves(self):
        ax = FakeAX()
        s = FakeServer(ax)
        self.addCleanup(s.kill)
        tid = ax.submit("slow")
        prog = textwrap.dedent("""
            import sys, time
            from axsched import Worker
            w = Worker(sys.argv[1], "wtok", pool="p", grace=10)
            @w.handler("slow")
            def slow(task):
                print("started", flush=True)
                time.sleep(1)
                return "slept"
            w.run()
            print("exited", flush=True)
        """)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        p = subprocess.Popen([sys.executable, "-c", prog, s.url], stdout=subprocess.PIPE, env=env, text=True)
        self.addCleanup(p.kill)
        self.assertEqual(p.stdout.readline().strip(), "started")
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=20)
        self.assertEqual((p.returncode, out.strip()), (0, "exited"))
        self.assertEqual(ax.task(tid)["state"], "SUCCESS")
        self.assertEqual(len(ax.seen("DELETE", "^/v1/workers/")), 1)


if __name__ == "__main__":
    unittest.main()
