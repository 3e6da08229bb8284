"""An in-process fake of ax's worker protocol and task routes, for the edge
cases a real server does not produce on demand (faults, dead servers,
forgotten registrations). Several FakeServers may share one FakeAX: the
servers of one region sharing its state.
"""

import collections
import http.server
import json
import re
import socket
import threading
import time
import uuid


class FakeAX:
    """The shared state of a region: tasks, registrations, faults, a request log."""

    def __init__(self, heartbeat_ms=400, lease_ms=3000, max_wait_ms=1000, max_result_bytes=1000):
        self.mu = threading.Condition()
        self.tasks = {}
        self.ready = collections.deque()
        self.workers = {}
        self.faults = []
        self.requests = []  # (server name, method, path, body, authorization)
        self.params = {"lease_ms": lease_ms, "heartbeat_ms": heartbeat_ms, "max_wait_ms": max_wait_ms,
                       "max_claim": 256, "max_result_bytes": max_result_bytes}
        self.runs = collections.Counter()  # task id -> claims
        self.routes = collections.Counter()  # "claim" / "report" -> tasks handed out that way
        self.report_claims = {}  # claim_id -> the tasks a report's claim took

    # Setup.

    def submit(self, type_, payload=None, max_retries=2, tenant="acme", slots=None):
        with self.mu:
            tid = "t-" + uuid.uuid4().hex[:12]
            self.tasks[tid] = {"id": tid, "type": type_, "payload": payload, "state": "READY", "attempts": 0,
                               "slots": slots,
                               "max_retries": max_retries, "tenant": tenant, "result": "", "last_error": "",
                               "progress": None, "lease": "", "worker": "", "cancel": False, "retry_after_ms": None}
            self.ready.append(tid)
            self.mu.notify_all()
            return tid

    def fault(self, path_re, status=503, retry_after=None, times=1, drop=False, method=None, body=None, has=None):
        """The next `times` requests matching path_re (and method, and with key `has`
        in their body) get status (or no answer with drop)."""
        with self.mu:
            self.faults.append({"re": re.compile(path_re), "status": status, "retry_after": retry_after,
                                "times": times, "drop": drop, "method": method, "body": body, "has": has})

    def cancel(self, tid):
        with self.mu:
            self.tasks[tid]["cancel"] = True

    def forget_workers(self):
        with self.mu:
            self.workers.clear()

    def task(self, tid):
        with self.mu:
            return dict(self.tasks[tid])

    def wait(self, cond, within=10.0):
        end = time.monotonic() + within
        with self.mu:
            while not cond():
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError("condition not met within %gs" % within)
                self.mu.wait(min(left, 0.05))

    def seen(self, method, path_re):
        with self.mu:
            return [r for r in self.requests if r[1] == method and re.search(path_re, r[2])]

    # The protocol.

    def take_fault(self, method, path, body):
        with self.mu:
            for f in self.faults:
                if f["has"] is not None and not (isinstance(body, dict) and f["has"] in body):
                    continue
                if f["times"] > 0 and f["re"].search(path) and f["method"] in (None, method):
                    f["times"] -= 1
                    return f
        return None

    def handle(self, method, path, body, alive=lambda: True):
        """(status, answer) of a request (the caller holds no lock)."""
        path, _, query = path.partition("?")
        m = re.match(r"^/v1/workers(?:/([^/]+)(?:/(claim|report))?)?$", path)
        if m:
            wid, verb = m.group(1), m.group(2)
            if wid is None and method == "POST":
                return self.register(body)
            if wid not in self.workers:
                return 404, {"error": {"code": "not_found", "message": "unknown worker", "field": "worker_id"}}
            if verb == "claim":
                return self.claim(wid, body, alive)
            if verb == "report":
                return self.report(wid, body)
            if method == "DELETE":
                return self.leave(wid)
        m = re.match(r"^/v1/tasks/([^/]+)/result$", path)
        if m and method == "GET":
            return self.result(m.group(1), query, alive)
        m = re.match(r"^/v1/tasks/([^/]+)$", path)
        if m and method == "GET":
            with self.mu:
                t = self.tasks.get(m.group(1))
                if t is None:
                    return 404, {"error": {"code": "not_found", "message": "no such task", "field": "id"}}
                return 200, {k: t[k] for k in ("id", "type", "payload", "state", "attempts", "result",
                                               "last_error", "progress", "tenant")}
        if path == "/v1/tasks" and method == "POST":
            if not isinstance(body, dict) or not body.get("type"):
                return 400, {"error": {"code": "invalid_argument", "message": "type is required", "field": "type"}}
            tid = self.submit(body["type"], body.get("payload"))
            return 201, {"id": tid, "state": "READY", "region": "fake-1", "pool": "p"}
        return 404, {"error": {"code": "not_found", "message": "no route %s %s" % (method, path)}}

    def result(self, tid, query, alive):
        """GET /v1/tasks/{id}/result: waits up to ?wait=<n>ms for the task to be terminal."""
        m = re.search(r"(?:^|&)wait=(\d+)ms(?:&|$)", query)
        end = time.monotonic() + (int(m.group(1)) / 1000 if m else 0)
        with self.mu:
            while True:
                t = self.tasks.get(tid)
                if t is None:
                    return 404, {"error": {"code": "not_found", "message": "no such task", "field": "id"}}
                done = t["state"] in ("SUCCESS", "FAILED", "CANCELED")
                left = end - time.monotonic()
                if done or left <= 0 or not alive():
                    break
                self.mu.wait(min(left, 0.05))
            out = {"id": tid, "state": t["state"], "done": done, "attempts": t["attempts"]}
            if t["state"] == "SUCCESS" and t["result"]:
                out["result"] = json.loads(t["result"])
            if t["last_error"]:
                out["error"] = t["last_error"]
            return (200 if done else 202), out

    def register(self, body):
        if not body.get("pool") or not 1 <= body.get("slots", 0) <= 1024:
            return 400, {"error": {"code": "invalid_argument", "message": "bad registration", "field": "slots"}}
        with self.mu:
            wid = "rw-" + uuid.uuid4().hex[:8]
            self.workers[wid] = dict(body)
            return 201, dict(self.params, worker_id=wid, region="fake-1")

    def claim(self, wid, body, alive):
        n, wait_ms = body.get("max", 1), body.get("wait_ms", 0)
        if not 0 <= wait_ms <= self.params["max_wait_ms"]:
            return 400, {"error": {"code": "invalid_argument", "message": "wait_ms", "field": "wait_ms"}}
        end = time.monotonic() + wait_ms / 1000
        out = []
        with self.mu:
            while True:
                if alive() and wid in self.workers:
                    out = self.take(wid, n, "claim", self.room(wid))
                left = end - time.monotonic()
                if out or left <= 0:
                    return 200, {"tasks": out}
                self.mu.wait(min(left, 0.05))

    def room(self, wid):
        """wid's free room in milli-slots, as the server counts it: its slots
        less the tasks it holds, a task of slots s holding s (the caller holds mu)."""
        held = sum(int(round((t["slots"] or 1) * 1000)) for t in self.tasks.values()
                   if t["state"] == "RUNNING" and t["worker"] == wid)
        return self.workers[wid]["slots"] * 1000 - held

    def take(self, wid, n, route, room):
        """Leases up to n READY tasks of wid's types that fit room (milli-slots)
        together to it, in order: one that does not fit ends the take (the
        caller holds mu)."""
        types = set(self.workers[wid].get("types") or [])
        out = []
        for tid in list(self.ready):
            if len(out) >= n:
                break
            t = self.tasks[tid]
            if types and t["type"] not in types:
                continue
            need = int(round((t["slots"] or 1) * 1000))
            if need > room:
                break
            room -= need
            self.ready.remove(tid)
            t.update(state="RUNNING", lease=uuid.uuid4().hex, worker=wid, attempts=t["attempts"] + 1)
            self.runs[tid] += 1
            self.routes[route] += 1
            out.append({"id": tid, "type": t["type"], "payload": t["payload"], "attempt": t["attempts"],
                        "max_retries": t["max_retries"], "priority": 0, "tags": {}, "tenant": t["tenant"],
                        "trace_id": "", "lease": t["lease"], "deadline": "2099-01-01T00:00:00.123456789Z"})
            if t["slots"] is not None:
                out[-1]["slots"] = t["slots"]
        return out

    def report(self, wid, body):
        limit = self.params["max_result_bytes"]
        for i, o in enumerate(body.get("outcomes") or []):
            if "result" in o and len(json.dumps(o["result"], separators=(",", ":"))) > limit:
                return 413, {"error": {"code": "result_too_large", "message": "over %d bytes" % limit,
                                       "field": "outcomes[%d].result" % i}}
        claim = body.get("claim")
        if claim is not None and not 1 <= claim.get("max", 0) <= 256:
            return 400, {"error": {"code": "invalid_argument", "message": "must be 1..256", "field": "claim.max"}}
        stop, answers = [], []
        with self.mu:
            for p in body.get("progress") or []:
                t = self.tasks.get(p["id"])
                if t and t["lease"] == p["lease"]:
                    t["progress"] = {"percent": p["percent"], "message": p.get("message", "")}
            for o in body.get("outcomes") or []:
                t = self.tasks.get(o["id"])
                if not t or t["lease"] != o["lease"] or t["state"] != "RUNNING":
                    answers.append({"id": o["id"], "ok": False, "code": "lease_lost", "message": "not held"})
                    continue
                answers.append({"id": o["id"], "ok": True})
                t["lease"] = ""
                if o["status"] == "success":
                    t.update(state="SUCCESS", result=json.dumps(o.get("result")))
                elif o["status"] == "return":
                    t.update(state="READY", attempts=t["attempts"] - 1)
                    self.ready.append(t["id"])
                else:
                    t["last_error"] = o.get("error", "")
                    t["retry_after_ms"] = o.get("retry_after_ms")
                    if o.get("retry", True) and t["attempts"] <= t["max_retries"]:
                        t["state"] = "READY"
                        self.ready.append(t["id"])
                    else:
                        t["state"] = "FAILED"
            for h in body.get("held") or []:
                t = self.tasks.get(h["id"])
                if t and t["cancel"] and t["state"] == "RUNNING":
                    t.update(state="CANCELED", lease="")
                    stop.append({"id": h["id"], "reason": "canceled"})
            answer = {"stop": stop, "outcomes": answers}
            if claim is not None:
                # Like the server: cut to the slots free once the report is
                # applied; the same claim_id again answers what it took.
                cid = claim.get("claim_id") or ""
                took = [x for x in self.report_claims.get(cid, [])
                        if self.tasks[x["id"]]["lease"] == x["lease"] and self.tasks[x["id"]]["state"] == "RUNNING"]
                if not took:
                    took = self.take(wid, claim["max"], "report", self.room(wid))
                    if cid:
                        self.report_claims[cid] = took
                if took:
                    answer["tasks"] = took
            self.mu.notify_all()
        return 200, answer

    def leave(self, wid):
        with self.mu:
            del self.workers[wid]
            for t in self.tasks.values():
                if t["state"] == "RUNNING" and t["worker"] == wid:
                    t.update(state="READY", lease="")
                    self.ready.append(t["id"])
            self.mu.notify_all()
        return 204, None


class FakeServer:
    """One HTTP server of a FakeAX on 127.0.0.1 (a free port)."""

    def __init__(self, ax, name="s1"):
        self.ax, self.name = ax, name
        self.conns = set()
        self.dead = False
        srv = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def setup(self):
                super().setup()
                with srv.ax.mu:
                    srv.conns.add(self.connection)

            def finish(self):
                try:
                    super().finish()
                finally:
                    with srv.ax.mu:
                        srv.conns.discard(self.connection)

            def _serve(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                body = json.loads(raw) if raw else None
                with srv.ax.mu:
                    srv.ax.requests.append((srv.name, self.command, self.path, body, self.headers.get("Authorization")))
                f = srv.ax.take_fault(self.command, self.path, body)
                if f and f["drop"]:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if f:
                    status, answer = f["status"], f["body"] or {"error": {"code": "unavailable", "message": "fault"}}
                else:
                    status, answer = srv.ax.handle(self.command, self.path, body or {},
                                                   lambda: not srv.dead)
                if srv.dead:
                    return
                data = b"" if answer is None else json.dumps(answer).encode()
                self.send_response(status)
                if f and f["retry_after"] is not None:
                    self.send_header("Retry-After", str(f["retry_after"]))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _serve

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def kill(self):
        """Dies: open connections are cut, the port refuses connections from now on."""
        self.dead = True
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.ax.mu:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def free_url():
    """A URL where nothing listens."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "http://127.0.0.1:%d" % port
