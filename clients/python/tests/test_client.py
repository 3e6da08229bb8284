"""Client against the in-process fake: retries, rotation, errors, wait, the spec."""

import json
import os
import time
import unittest
from unittest import mock

from axsched import ROUTES, APIError, Client, WaitTimeout
from axsched.worker import WORKER_ROUTES

from fakeax import FakeAX, FakeServer, free_url

SPEC = os.environ.get("AX_OPENAPI") or os.path.join(os.path.dirname(__file__), "..", "..", "..", "httpapi",
                                                    "openapi.json")


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.ax = FakeAX()
        self.s1, self.s2 = FakeServer(self.ax, "s1"), FakeServer(self.ax, "s2")
        self.addCleanup(self.s1.kill)
        self.addCleanup(self.s2.kill)

    def client(self, *urls, **kw):
        kw.setdefault("token", "tok")
        c = Client(list(urls) or [self.s1.url], **kw)
        c._t.backoff, c._t.max_backoff = 0.01, 0.05
        return c

    def test_submit_get_and_the_token(self):
        c = self.client()
        r = c.submit({"type": "resize", "payload": {"w": 1}})
        self.assertEqual(c.get(r["id"])["payload"], {"w": 1})
        self.assertEqual({x[4] for x in self.ax.requests}, {"Bearer tok"})
        with mock.patch.dict(os.environ, {"AX_TOKEN": "from-env"}):
            Client(self.s1.url).get(r["id"])
        self.assertEqual(self.ax.requests[-1][4], "Bearer from-env")

    def test_error_fields_and_no_retry_of_a_4xx(self):
        c = self.client()
        with self.assertRaises(APIError) as e:
            c.submit({"payload": 1})
        err = e.exception
        self.assertEqual((err.status, err.code, err.field, err.message), (400, "invalid_argument", "type",
                                                                          "type is required"))
        self.assertEqual(len(self.ax.seen("POST", "^/v1/tasks$")), 1)

    def test_retry_after_is_honoured_on_429_on_the_same_server(self):
        c = self.client(self.s1.url, self.s2.url)
        tid = self.ax.submit("x")
        self.ax.fault("/v1/tasks/", status=429, retry_after="0.3", times=1)
        t0 = time.monotonic()
        self.assertEqual(c.get(tid)["id"], tid)
        self.assertGreaterEqual(time.monotonic() - t0, 0.3)
        self.assertEqual([r[0] for r in self.ax.seen("GET", "/v1/tasks/")], ["s1", "s1"])

    def test_503_moves_to_the_next_server(self):
        c = self.client(self.s1.url, self.s2.url)
        tid = self.ax.submit("x")
        self.ax.fault("/v1/tasks/", status=503, retry_after=0, times=1)
        c.get(tid)
        self.assertEqual([r[0] for r in self.ax.seen("GET", "/v1/tasks/")], ["s1", "s2"])
        self.assertEqual(c.url, self.s2.url)

    def test_a_dead_server_is_skipped(self):
        c = self.client(free_url(), self.s2.url)
        c.submit({"type": "x"})  # refused at connect: never sent, so retried even without a key
        self.assertEqual([r[0] for r in self.ax.seen("POST", "^/v1/tasks$")], ["s2"])

    def test_retries_end_with_the_last_error(self):
        c = self.client(retries=2)
        tid = self.ax.submit("x")
        self.ax.fault("/v1/tasks/", status=503, retry_after=0, times=5)
        with self.assertRaises(APIError) as e:
            c.get(tid)
        self.assertEqual((e.exception.status, e.exception.retry_after), (503, 0))
        self.assertEqual(len(self.ax.seen("GET", "/v1/tasks/")), 3)

    def test_a_submit_without_answer_is_resent_only_with_an_idempotency_key(self):
        c = self.client()
        self.ax.fault("^/v1/tasks$", drop=True, times=1)
        with self.assertRaises(OSError):
            c.submit({"type": "x"})
        self.assertEqual(len(self.ax.seen("POST", "^/v1/tasks$")), 1)
        self.ax.fault("^/v1/tasks$", drop=True, times=1)
        c.submit({"type": "x", "idempotency_key": "k1"})
        self.assertEqual(len(self.ax.seen("POST", "^/v1/tasks$")), 3)

    def test_wait_long_polls_the_result_until_terminal_and_times_out(self):
        c = self.client()
        tid = self.ax.submit("x")
        with self.assertRaises(WaitTimeout) as e:
            c.wait(tid, timeout=0.2)
        self.assertEqual((e.exception.task["state"], e.exception.task["done"]), ("READY", False))
        self.assertIsInstance(e.exception, TimeoutError)
        asked = len(self.ax.seen("GET", "/result"))
        self.assertTrue(1 <= asked <= 2, asked)

        def finish():
            time.sleep(0.3)
            with self.ax.mu:
                self.ax.tasks[tid].update(state="SUCCESS", result='{"w":2}')
                self.ax.mu.notify_all()

        import threading
        threading.Thread(target=finish).start()
        t0 = time.monotonic()
        r = c.wait(tid, timeout=5)
        self.assertEqual((r["state"], r["done"], r["result"]), ("SUCCESS", True, {"w": 2}))
        self.assertLess(time.monotonic() - t0, 1.5)
        waits = [x[2] for x in self.ax.seen("GET", "/result")][asked:]
        self.assertEqual(len(waits), 1, waits)  # one long poll, no polling of GET /v1/tasks/{id}
        self.assertRegex(waits[0], r"^/v1/tasks/%s/result\?wait=\d+ms$" % tid)
        self.assertEqual(self.ax.seen("GET", "^/v1/tasks/[^/]+$"), [])

    def test_wait_asks_again_after_a_saturated_answer(self):
        c = self.client()
        tid = self.ax.submit("x")
        with self.ax.mu:
            self.ax.tasks[tid]["state"] = "FAILED"
            self.ax.tasks[tid]["last_error"] = "boom"
        self.ax.fault("/result", status=429, retry_after="0.1", times=1)
        r = c.wait(tid, timeout=5)
        self.assertEqual((r["state"], r["error"]), ("FAILED", "boom"))
        self.assertEqual(len(self.ax.seen("GET", "/result")), 2)
        with self.assertRaises(APIError) as e:
            c.wait("t-none", timeout=1)
        self.assertEqual(e.exception.status, 404)

    def test_submit_fields_and_when_a_submit_is_sent_again(self):
        c = self.client()
        self.ax.fault("^/v1/tasks$", drop=True, times=1)
        c.submit({"type": "x"}, unique_key="u1", unique_for="1h")
        sent = self.ax.seen("POST", "^/v1/tasks$")
        self.assertEqual(len(sent), 2)  # a unique key makes the resend create nothing new
        self.assertEqual(sent[-1][3], {"type": "x", "unique_key": "u1", "unique_for": "1h"})
        self.ax.fault("^/v1/tasks$", drop=True, times=1)
        c.submit({"type": "x"}, debounce_key="d1", debounce="2s", debounce_max_wait="30s")
        sent = self.ax.seen("POST", "^/v1/tasks$")
        self.assertEqual(sent[-1][3], {"type": "x", "debounce_key": "d1", "debounce": "2s", "debounce_max_wait": "30s"})
        self.assertEqual(len(sent), 4)
        self.ax.fault("^/v1/tasks$", drop=True, times=1)
        with self.assertRaises(OSError):
            c.submit({"type": "x", "unique_key": "u2"}, unique_conflict="reject")
        self.assertEqual(len(self.ax.seen("POST", "^/v1/tasks$")), 5)

    def test_urls_are_checked(self):
        for bad in ("", "ftp://x", "localhost:8080", ","):
            with self.assertRaises(ValueError, msg=bad):
                Client(bad)
        self.assertEqual(Client("http://a:1/, http://b:2").url, "http://a:1")


class SpecTest(unittest.TestCase):
    def test_every_route_is_in_the_openapi_spec(self):
        if not os.path.exists(SPEC):
            self.skipTest("no httpapi/openapi.json next to this package (set AX_OPENAPI)")
        with open(SPEC) as f:
            spec = json.load(f)
        ops = {}
        for path, item in spec["paths"].items():
            for method, op in item.items():
                if isinstance(op, dict) and "operationId" in op:
                    ops[op["operationId"]] = (method.upper(), path)
        for op, route in list(ROUTES.items()) + list(WORKER_ROUTES.items()):
            self.assertEqual(ops.get(op), route, op)


if __name__ == "__main__":
    unittest.main()
