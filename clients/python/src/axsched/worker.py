"""A remote worker: runs handlers for tasks it claims through the API.

    from axsched import Worker
    w = Worker("http://127.0.0.1:8080", pool="cpu-spot", concurrency=8)

    @w.handler("resize")
    def resize(task):                      # in a thread of the worker's pool
        task.progress(50, "half way")
        return {"width": 640}              # any JSON: the task's result

    @w.handler("embed")
    async def embed(task):                 # on the worker's asyncio loop
        ...

    w.run()                                # until SIGTERM/SIGINT or w.stop()

It speaks the worker protocol (docs/worker-protocol.md) with a worker token
only: register, long-poll claims, one report loop that batches heartbeats,
progress and outcomes. A handler that returns succeeds; one that raises
fails and is retried (FinalError: not retried, RetryAfter: retried no
sooner); a task the server says to stop (cancelled, preempted, lease lost,
deadline) is cancelled in its handler and its outcome dropped. Connection
errors and 503 move the worker to the next server URL, keeping its leases; a
registration the server forgot (404 worker_id) is made again.

Slots are counted in milli-slots, as the server counts them: a task of
"slots": 0.25 holds a quarter of one (task.slots), any other a whole one, so
a worker of concurrency 1 runs four quarter tasks at once. A claim asks for
as many tasks as its free room holds of the smallest it was handed so far (a
whole slot until it was handed a fraction); the server hands out tasks that
fit that room together.

While every slot is busy, a report that carries outcomes also claims (a
report claim): the tasks its outcomes make room for come back in the same
round trip instead of in a claim sent after it.

Shutdown (SIGTERM, SIGINT or stop()): stop claiming, let running handlers
finish within grace seconds, stop the rest and hand each back (status
return: no attempt spent) once its handler returned or settle seconds
passed, report, leave (DELETE). A second signal ends the grace at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import logging
import os
import queue
import re
import secrets
import signal
import socket
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._transport import Canceler, Transport
from .errors import APIError, FinalError, RetryAfter
from .task import MILLI_SLOTS, Task

__all__ = ["Worker", "Handler", "WORKER_ROUTES"]

log = logging.getLogger("axsched.worker")

Handler = Callable[[Task], Any]

# How long an outcome waits for others to share its report.
OUTCOME_DELAY = 0.02
# How long a progress report waits for others to share its report.
PROGRESS_DELAY = 0.5
# The longest a claim waits for a first task (the server may allow less).
CLAIM_WAIT_MS = 20000
# Bytes of an error text sent in a failure outcome.
MAX_ERROR_BYTES = 4096

# The worker protocol's routes by the spec's operationId: (method, path).
# The package's tests check each against httpapi/openapi.json.
WORKER_ROUTES: Dict[str, Tuple[str, str]] = {
    "registerWorker": ("POST", "/v1/workers"),
    "claimWorkerTasks": ("POST", "/v1/workers/{worker_id}/claim"),
    "reportWorker": ("POST", "/v1/workers/{worker_id}/report"),
    "deleteWorker": ("DELETE", "/v1/workers/{worker_id}"),
}

# _Future: a handler's future, a sync one's (thread pool) or an async one's (asyncio Task).
_Future = Union["concurrent.futures.Future[Any]", "asyncio.Future[Any]"]

_FIELD_ITEM = re.compile(r"^(held|progress|outcomes)\[(\d+)\]")


class _Run:
    """A task being run: its handler's future and whether its outcome still counts.

    A sync handler's future is done once it returned (a running thread
    cannot be cancelled: its task's cancel_event tells it to stop). An
    async handler runs as an asyncio Task on the worker's loop, done only
    once its coroutine is over, a cancellation's cleanup included: its slot
    is freed then, not when it is asked to stop, so what runs never exceeds
    the worker's concurrency.
    """

    def __init__(self, task: Task, loop: Optional[asyncio.AbstractEventLoop] = None) -> None:
        self.task = task
        self.future: Optional[concurrent.futures.Future] = None  # a sync handler's
        self.loop = loop  # an async handler's loop (None: sync)
        self.atask: Optional[asyncio.Task] = None  # an async handler's, loop thread only
        self.cancelled = False  # loop thread only: stopped before it began
        # done: an outcome was queued (or is no longer wanted) for it.
        self.done = False
        # ended: its handler returned (or will never run).
        self.ended = threading.Event()

    def cancel(self) -> None:
        """Asks the handler to stop (any thread)."""
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._cancel_async)
        elif self.future is not None:
            self.future.cancel()

    def _cancel_async(self) -> None:
        self.cancelled = True
        if self.atask is not None:
            self.atask.cancel()


class Worker:
    """A worker of one pool, serving the task types of its handlers.

    urls: the API URLs of the region's servers (one string, comma-separated
    or a list; default $AX_URL). token: a worker token (default $AX_TOKEN).
    concurrency: the worker's slots (whole tasks at once; more of fractional
    ones, as many as fit). grace:
    seconds running handlers get to finish at shutdown. settle: seconds a
    handler stopped at the end of the grace gets to return before its task
    is handed back (so another worker does not start it while this one
    still runs it; a handler that ignores its stop past settle may). labels
    and name describe it to operators.
    """

    def __init__(self, urls: Union[str, Sequence[str], None] = None, token: Optional[str] = None, *,
                 pool: str, concurrency: int = 4, grace: float = 30.0, settle: float = 1.0,
                 labels: Optional[Mapping[str, str]] = None, name: Optional[str] = None) -> None:
        if urls is None:
            urls = os.environ.get("AX_URL", "")
        if token is None:
            token = os.environ.get("AX_TOKEN") or None
        if not pool:
            raise ValueError("pool is required")
        if not 1 <= concurrency <= 1024:
            raise ValueError("concurrency %d: want 1..1024" % concurrency)
        self.pool = pool
        self.concurrency = concurrency
        self.grace = grace
        self.settle = settle
        self.labels = dict(labels or {})
        self.name = name or socket.gethostname()
        self._t = Transport(urls, token, retries=3)
        self._handlers: Dict[str, Handler] = {}

        self.worker_id: Optional[str] = None
        self.region: Optional[str] = None
        self._params: Dict[str, int] = {}
        self._reg_mu = threading.Lock()

        self._mu = threading.Lock()
        self._slot_cv = threading.Condition(self._mu)
        self._report_cv = threading.Condition(self._mu)
        self._runs: Dict[str, _Run] = {}
        self._outcomes: List[Dict[str, Any]] = []
        self._progress: Dict[str, Dict[str, Any]] = {}
        self._wake_at: Optional[float] = None
        # The room (milli-slots) of outcomes queued or in flight: the server
        # counts their tasks as held (against the worker's slots) until a
        # report carried them. Each outcome says its own under "_milli"
        # (not sent).
        self._unacked = 0
        # The least room a task handed out took (milli-slots): a claim asks
        # for as many as the free room holds.
        self._smallest = MILLI_SLOTS
        # The claim loop waits for a slot: a report of outcomes claims for it.
        self._claim_waiting = False
        # The claim id of a report claim not yet answered (its retries and
        # the next report's claim keep it); False once the server refused one.
        self._report_claim_id = ""
        self._report_claims = True

        self._stop_requested = threading.Event()
        self._stopping = threading.Event()  # claims end
        self._closing = threading.Event()  # the report loop flushes and ends
        self._force = threading.Event()  # the grace ends now
        self._claim_cancel = Canceler()
        self._pool: Optional[_Threads] = None
        self._crash: Optional[BaseException] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._loop_thread: Optional[threading.Thread] = None

    # Handlers.

    def handler(self, task_type: str) -> Callable[[Handler], Handler]:
        """Registers the decorated function (sync or async) as the handler of task_type."""
        if not task_type:
            raise ValueError("task type is required")

        def register(fn: Handler) -> Handler:
            if task_type in self._handlers:
                raise ValueError("task type %r already has a handler" % task_type)
            self._handlers[task_type] = fn
            return fn

        return register

    # Lifecycle.

    def stop(self) -> None:
        """Starts the graceful shutdown of run (from any thread or a handler)."""
        if self._stop_requested.is_set():
            self._force.set()
        self._stop_requested.set()
        with self._mu:
            self._slot_cv.notify_all()

    def run(self) -> None:
        """Registers, runs handlers until stop() or SIGTERM/SIGINT, then shuts down gracefully.

        Call it once per Worker; it installs its SIGTERM/SIGINT handlers when
        called from the main thread. Raises APIError when the server refuses
        the registration (a 4xx: a token without this pool or these types, a
        bad argument) or a claim answers 401/403 (the token was revoked). A sync handler still running past the grace is
        abandoned (its thread is a daemon): it cannot keep the process alive.
        """
        if not self._handlers:
            raise ValueError("no handler: register one with @worker.handler(type)")
        restore = self._install_signals()
        try:
            if not self._register(None):
                return
            self._start_executors()
            claim = threading.Thread(target=self._guard, args=(self._claim_loop,), name="axsched-claim", daemon=True)
            report = threading.Thread(target=self._guard, args=(self._report_loop,), name="axsched-report",
                                      daemon=True)
            claim.start()
            report.start()
            log.info("worker %s registered in %s (pool %s, types %s, slots %d)", self.worker_id, self.region,
                     self.pool, ",".join(sorted(self._handlers)), self.concurrency)
            while not self._stop_requested.wait(0.2):
                pass
            self._shutdown(claim, report)
        finally:
            restore()
        if self._crash is not None:
            raise self._crash

    def _guard(self, loop: Callable[[], None]) -> None:
        # A loop that fails (a revoked token, a bug) stops the worker and run
        # raises its error, rather than leaving it registered and idle.
        try:
            loop()
        except BaseException as e:
            log.error("worker %s: %s failed, stopping: %r", self.worker_id, threading.current_thread().name, e)
            self._crash = e
            self.stop()

    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        old = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            old[sig] = signal.signal(sig, lambda _s, _f: self.stop())

        def restore() -> None:
            for s, h in old.items():
                signal.signal(s, h)

        return restore

    def _start_executors(self) -> None:
        self._pool = _Threads(self.concurrency)
        if any(inspect.iscoroutinefunction(h) for h in self._handlers.values()):
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._loop_thread = threading.Thread(target=loop.run_forever, name="axsched-asyncio", daemon=True)
            self._loop_thread.start()

    def _shutdown(self, claim: threading.Thread, report: threading.Thread) -> None:
        log.info("worker %s stopping: %d running, grace %gs", self.worker_id, len(self._runs), self.grace)
        # 1. No more claims (an answer in flight is cut; what it claimed goes back at DELETE).
        self._stopping.set()
        self._claim_cancel.cancel()
        with self._mu:
            self._slot_cv.notify_all()
        claim.join()
        # 2. Running handlers get the grace to finish.
        end = time.monotonic() + self.grace
        with self._mu:
            while self._runs and not self._force.is_set():
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._slot_cv.wait(min(left, 0.2))
            # 3. The rest are stopped (their outcomes are dropped) ...
            stopped = [r for r in self._runs.values() if not r.done]
            for r in stopped:
                r.done = True
        for r in stopped:
            r.task._stop("shutdown")
            r.cancel()  # outside _mu: a sync future cancelled before it began calls _finish at once
        # ... and each goes back without spending an attempt once its handler
        # returned, or settle seconds on: handing it back first would let
        # another worker start it while this one still runs it.
        end = time.monotonic() + self.settle
        for r in stopped:
            r.ended.wait(max(0.0, end - time.monotonic()))
        with self._mu:
            for r in stopped:
                self._queue_outcome({"id": r.task.id, "lease": r.task.lease, "status": "return",
                                     "retry_after_ms": 0}, r.task._milli)
            # 4. The report loop sends what is pending and ends.
            self._closing.set()
            self._report_cv.notify_all()
        report.join(timeout=30)
        # 5. Leave: tasks still leased to this worker go back to READY.
        if self.worker_id:
            try:
                self._call("deleteWorker", None, self.worker_id, retries=2, timeout=10)
            except (APIError, OSError, InterruptedError) as e:
                log.warning("worker %s: leaving: %s", self.worker_id, e)
        if self._pool is not None:
            self._pool.shutdown()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._loop_thread is not None:
                self._loop_thread.join(timeout=5)
        log.info("worker %s stopped", self.worker_id)

    # Registration.

    def _register(self, stale: Optional[str]) -> bool:
        """Registers (again, when the server forgot stale); False when stopped first."""
        halt = self._stop_requested if stale is None else self._closing
        with self._reg_mu:
            if stale is not None and self.worker_id != stale:
                return True  # another loop registered already
            body: Dict[str, Any] = {"pool": self.pool, "types": sorted(self._handlers), "slots": self.concurrency,
                                    "name": self.name}
            if self.labels:
                body["labels"] = self.labels
            attempt = 0
            while not halt.is_set():
                try:
                    r = self._call("registerWorker", body, None, stop=halt)
                except InterruptedError:
                    return False
                except (APIError, OSError) as e:
                    if isinstance(e, APIError) and not e.retryable and e.status < 500:
                        raise
                    attempt += 1
                    log.warning("worker: registering at %s: %s", self._t.url, e)
                    halt.wait(self._t.delay(attempt, e.retry_after if isinstance(e, APIError) else None))
                    continue
                self.worker_id = r["worker_id"]
                self.region = r.get("region")
                self._params = {k: int(r[k]) for k in ("lease_ms", "heartbeat_ms", "max_wait_ms", "max_claim",
                                                        "max_result_bytes") if isinstance(r.get(k), int)}
                if stale is not None:
                    log.warning("worker %s was forgotten by the server; registered again as %s", stale,
                                self.worker_id)
                return True
            return False

    def _call(self, op: str, body: Any, worker_id: Optional[str], **kw: Any) -> Any:
        method, path = WORKER_ROUTES[op]
        if worker_id is not None:
            path = path.replace("{worker_id}", urllib.parse.quote(worker_id, safe=""))
        return self._t.call(method, path, body, **kw)

    def _param(self, key: str, default: int) -> int:
        return self._params.get(key) or default

    def _on_api_error(self, e: APIError, wid: str, where: str) -> None:
        if e.status == 404 and e.field == "worker_id":
            try:
                self._register(wid)
            except APIError as e2:
                log.error("worker: registering again: %s", e2)
                self._stop_requested.wait(5)
            return
        log.warning("worker %s: %s: %s", wid, where, e)

    # Claims.

    def _claim_loop(self) -> None:
        attempt = 0
        # One id per claim, kept by its retries: a retry after a lost answer
        # (a server died, a connection broke) gets the tasks that answer held.
        claim_id = ""
        while not self._stopping.is_set():
            with self._mu:
                while self._fits(0) <= 0 and not self._stopping.is_set():
                    self._claim_waiting = True
                    self._slot_cv.wait()
                self._claim_waiting = False
                free = self._fits(0)
            if self._stopping.is_set():
                return
            wid = self.worker_id or ""
            wait_ms = min(CLAIM_WAIT_MS, self._param("max_wait_ms", CLAIM_WAIT_MS))
            claim_id = claim_id or "c-" + secrets.token_hex(12)
            body = {"max": max(1, min(free, self._param("max_claim", 256))), "wait_ms": wait_ms, "claim_id": claim_id}
            try:
                r = self._call("claimWorkerTasks", body, wid, timeout=wait_ms / 1000 + 15,
                                 stop=self._stopping, canceler=self._claim_cancel)
                attempt = 0
                claim_id = ""
            except InterruptedError:
                return
            except APIError as e:
                if e.status in (401, 403):
                    raise  # the token was revoked or narrowed: claiming again cannot succeed
                self._on_api_error(e, wid, "claim")
                attempt += 1
                if not (e.status == 404 and e.field == "worker_id"):
                    self._stopping.wait(self._t.delay(attempt, e.retry_after))
                continue
            except OSError as e:
                attempt += 1
                log.warning("worker %s: claim at %s: %s", wid, self._t.url, e)
                self._stopping.wait(self._t.delay(attempt))
                continue
            for raw in (r or {}).get("tasks") or []:
                self._start(raw)

    def _busy(self) -> int:
        """Room in use as the server counts it, in milli-slots: running tasks
        and those whose outcome is not reported yet (the caller holds _mu)."""
        return sum(r.task._milli for r in self._runs.values()) + self._unacked

    def _fits(self, freed: int) -> int:
        """How many tasks a claim asks for at most, with freed milli-slots
        about to be freed (a report's outcomes): as many of the smallest the
        worker was handed as the free room holds (the caller holds _mu)."""
        room = self.concurrency * MILLI_SLOTS - self._busy() + freed
        return room // self._smallest if room > 0 else 0

    def _queue_outcome(self, o: Dict[str, Any], milli: int) -> None:
        """Queues o, the outcome of a task holding milli milli-slots, for the
        next report (the caller holds _mu)."""
        o["_milli"] = milli
        self._outcomes.append(o)
        self._unacked += milli
        self._wake(OUTCOME_DELAY)

    def _acked(self, outcomes: List[Dict[str, Any]]) -> None:
        if outcomes:
            with self._mu:
                self._unacked -= sum(o.get("_milli", MILLI_SLOTS) for o in outcomes)
                self._slot_cv.notify_all()

    def _start(self, raw: Mapping[str, Any]) -> None:
        task = Task(raw, self._report_progress)
        h = self._handlers.get(task.type)
        is_async = h is not None and inspect.iscoroutinefunction(h)
        run = _Run(task, self._loop if is_async else None)
        with self._mu:
            held = self._runs.get(task.id)
            if held is not None and held.task.lease == task.lease:
                return  # a retried claim's answer names a task already running here
            if self._stopping.is_set() or h is None:
                # Claimed as the worker stops, or of a type it has no handler for:
                # back to the queue without spending an attempt.
                self._queue_outcome({"id": task.id, "lease": task.lease, "status": "return", "retry_after_ms": 0},
                                    task._milli)
                return
            self._runs[task.id] = run
            self._smallest = min(self._smallest, task._milli)
        assert self._pool is not None
        if is_async:
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._begin_async, run, h)
            return
        fut = self._pool.submit(_run_sync, h, task)
        with self._mu:
            run.future = fut
        fut.add_done_callback(lambda f: self._finish(run, f))

    def _begin_async(self, run: _Run, h: Handler) -> None:
        """Starts an async handler (loop thread); its slot is freed when its coroutine is over."""
        assert run.loop is not None
        if run.cancelled:  # stopped before it began: it never runs
            f = run.loop.create_future()
            f.cancel()
            self._finish(run, f)
            return
        run.atask = run.loop.create_task(_run_async(h, run))
        run.atask.add_done_callback(lambda f: self._finish(run, f))

    def _finish(self, run: _Run, fut: _Future) -> None:
        # fut is done: the handler returned, or will never run
        run.ended.set()
        with self._mu:
            self._runs.pop(run.task.id, None)
            self._slot_cv.notify_all()
            if run.done or run.task.canceled:
                return  # the server said stop, or shutdown handed it back
            run.done = True
            self._queue_outcome(self._outcome(run.task, fut), run.task._milli)

    def _outcome(self, task: Task, fut: _Future) -> Dict[str, Any]:
        o: Dict[str, Any] = {"id": task.id, "lease": task.lease}
        exc: Optional[BaseException]
        if fut.cancelled():
            exc = asyncio.CancelledError()
        else:
            exc = fut.exception()
        if exc is None:
            try:
                text = json.dumps(fut.result(), separators=(",", ":"), allow_nan=False)
            except (TypeError, ValueError) as e:
                return dict(o, status="failure", error="result is not JSON: %s" % e, retry=False)
            limit = self._param("max_result_bytes", 64 << 10)
            if len(text.encode()) > limit:
                return dict(o, status="failure", retry=False,
                            error="result of %d bytes is over max_result_bytes %d" % (len(text.encode()), limit))
            o.update(status="success", result=json.loads(text))
            return o
        o.update(status="failure", retry=not isinstance(exc, FinalError), error=_error_text(exc))
        if isinstance(exc, RetryAfter):
            o["retry_after_ms"] = max(0, int(exc.seconds * 1000))
        return o

    # Reports.

    def _report_progress(self, task: Task, percent: float, message: str) -> None:
        with self._mu:
            run = self._runs.get(task.id)
            if run is None or run.done or task.canceled:
                return
            p: Dict[str, Any] = {"id": task.id, "lease": task.lease, "percent": percent}
            if message:
                p["message"] = message.encode()[:512].decode(errors="ignore")
            self._progress[task.id] = p
            self._wake(PROGRESS_DELAY)

    def _wake(self, within: float) -> None:
        """Asks for a report within seconds (the caller holds _mu)."""
        at = time.monotonic() + within
        if self._wake_at is None or at < self._wake_at:
            self._wake_at = at
            self._report_cv.notify_all()

    def _report_loop(self) -> None:
        attempt = 0
        next_beat = time.monotonic()
        while True:
            with self._mu:
                while True:
                    now = time.monotonic()
                    closing = self._closing.is_set()
                    due = next_beat if self._wake_at is None else min(next_beat, self._wake_at)
                    if closing or now >= due:
                        break
                    self._report_cv.wait(due - now)
                if closing and not self._outcomes and not self._progress:
                    return
                held = [{"id": r.task.id, "lease": r.task.lease} for r in self._runs.values() if not r.done]
                progress = [p for p in self._progress.values() if not self._runs.get(p["id"], _DONE).done]
                outcomes = self._outcomes
                self._outcomes, self._progress, self._wake_at = [], {}, None
                claim = self._report_claim(outcomes, closing)
            wire = [{k: v for k, v in o.items() if k != "_milli"} for o in outcomes]
            body: Dict[str, Any] = {k: v for k, v in (("held", held), ("progress", progress), ("outcomes", wire))
                                    if v}
            if claim is not None:
                body["claim"] = claim
            wid = self.worker_id or ""
            err: Optional[BaseException] = None
            try:
                r = self._call("reportWorker", body, wid, timeout=15,
                                 stop=None if closing else self._closing)
                attempt = 0
                next_beat = time.monotonic() + self._param("heartbeat_ms", 10000) / 2000
                if claim is not None:
                    with self._mu:
                        if self._report_claim_id == claim["claim_id"]:
                            self._report_claim_id = ""
                # Before the outcomes free their slots: the claim loop they
                # wake counts the tasks the report's claim took.
                self._answered(r or {})
                self._acked(outcomes)
                continue
            except InterruptedError:
                self._requeue(progress, outcomes)  # closing began: send it as the last report
                continue
            except APIError as e:
                if self._repair(e, held, progress, outcomes):
                    continue
                self._on_api_error(e, wid, "report")
                err = e
            except OSError as e:
                log.warning("worker %s: report at %s: %s", wid, self._t.url, e)
                err = e
            attempt += 1
            refused = isinstance(err, APIError) and 400 <= err.status < 500 and err.status != 429 and not (
                err.status == 404 and err.field == "worker_id")
            if refused and attempt >= 3:
                # The same refusal thrice, naming no item: the report cannot be fixed.
                # Its outcomes are dropped (their leases run out; the tasks run again).
                log.error("worker %s: report refused %d times, dropping %d outcomes and %d progress: %s", wid,
                          attempt, len(outcomes), len(progress), err)
                attempt = 0
                self._acked(outcomes)
                continue
            self._requeue(progress, outcomes)
            if closing and attempt > 3:
                log.error("worker %s: %d outcomes not reported: %s", wid, len(outcomes), err)
                return
            ra = err.retry_after if isinstance(err, APIError) else None
            if isinstance(err, APIError) and err.status == 404 and err.field == "worker_id":
                continue
            wait = self._t.delay(attempt, ra)
            if closing:
                time.sleep(wait)
            else:
                self._closing.wait(wait)

    def _report_claim(self, outcomes: List[Dict[str, Any]], closing: bool) -> Optional[Dict[str, Any]]:
        """The claim of a report of outcomes (the caller holds _mu): while the
        claim loop waits for room, the tasks the room those outcomes free
        holds; None when it does not wait or no room would be free."""
        if not (outcomes and self._claim_waiting and self._report_claims) or closing or \
                self._stop_requested.is_set():
            return None
        # _busy counts the report's own outcomes: the server frees them first.
        freed = sum(o.get("_milli", MILLI_SLOTS) for o in outcomes)
        n = min(self._fits(freed), self._param("max_claim", 256))
        if n <= 0:
            return None
        self._report_claim_id = self._report_claim_id or "c-" + secrets.token_hex(12)
        return {"max": n, "claim_id": self._report_claim_id}

    def _requeue(self, progress: List[Dict[str, Any]], outcomes: List[Dict[str, Any]]) -> None:
        with self._mu:
            self._outcomes[:0] = outcomes
            for p in progress:
                self._progress.setdefault(p["id"], p)
            if outcomes or progress:
                self._wake(0)

    def _answered(self, r: Mapping[str, Any]) -> None:
        for raw in r.get("tasks") or []:
            self._start(raw)  # the report's claim took it
        for s in r.get("stop") or []:
            with self._mu:
                run = self._runs.get(s.get("id"))
                if run is None:
                    continue
                run.done = True
                self._progress.pop(run.task.id, None)
                self._slot_cv.notify_all()
            run.task._stop(str(s.get("reason") or "stopped"))
            run.cancel()
            log.info("worker %s: task %s stopped: %s", self.worker_id, run.task.id, run.task.stop_reason)
        for o in r.get("outcomes") or []:
            if not o.get("ok", True):
                log.warning("worker %s: outcome of task %s not applied: %s %s", self.worker_id, o.get("id"),
                            o.get("code"), o.get("message"))

    def _repair(self, e: APIError, held: List[Dict[str, Any]], progress: List[Dict[str, Any]],
                outcomes: List[Dict[str, Any]]) -> bool:
        """Fixes a report the server refused for one item (field held[i], progress[i],
        outcomes[i]...) and queues the rest again; False when e names no item."""
        if 400 <= e.status < 500 and e.status != 429 and (e.field or "").startswith("claim"):
            # A server that refuses the report's claim: claim through the claim route only.
            log.warning("worker %s: report claim refused, claiming without it: %s", self.worker_id, e)
            with self._mu:
                self._report_claims = False
            self._requeue(progress, outcomes)
            return True
        m = _FIELD_ITEM.match(e.field or "")
        if e.status < 400 or e.status >= 500 or e.status == 429 or not m:
            return False
        kind, i = m.group(1), int(m.group(2))
        log.warning("worker %s: report refused: %s", self.worker_id, e)
        if kind == "outcomes" and i < len(outcomes):
            bad = outcomes.pop(i)
            if e.field.endswith(".result") and bad.get("status") == "success":
                outcomes.insert(i, {"id": bad["id"], "lease": bad["lease"], "status": "failure", "retry": False,
                                    "error": "result refused: %s" % e.message,
                                    "_milli": bad.get("_milli", MILLI_SLOTS)})
            else:
                self._acked([bad])
        elif kind == "progress" and i < len(progress):
            progress.pop(i)
        elif kind == "held" and i < len(held):
            # The server refuses that lease: the handler's outcome would be refused too.
            with self._mu:
                run = self._runs.get(held[i]["id"])
                if run is not None:
                    run.done = True
            if run is not None:
                run.task._stop("lease_lost")
        self._requeue(progress, outcomes)
        return True


class _Done:
    done = True


class _Threads:
    """Daemon threads running sync handlers, concurrency of them to begin
    with and one more whenever a handler finds none idle (fractional tasks
    run more handlers than slots): one that ignores its cancellation past
    the grace does not keep the process from exiting (the threads of a
    ThreadPoolExecutor are joined at exit)."""

    def __init__(self, n: int) -> None:
        self._q: "queue.SimpleQueue[Optional[tuple]]" = queue.SimpleQueue()
        self._mu = threading.Lock()
        self._n = 0
        self._idle = 0
        for _ in range(n):
            self._spawn()

    def _spawn(self) -> None:
        """Starts one idle thread (the caller holds _mu, or none shares it yet)."""
        threading.Thread(target=self._serve, name="axsched-handler-%d" % self._n, daemon=True).start()
        self._n += 1
        self._idle += 1

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._mu:
            if self._idle == 0:
                self._spawn()
            self._idle -= 1
        self._q.put((fut, fn, args))
        return fut

    def shutdown(self) -> None:
        with self._mu:
            n = self._n
        for _ in range(n):
            self._q.put(None)

    def _serve(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            fut, fn, args = item
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn(*args))
                except BaseException as e:  # the handler's failure is its outcome
                    fut.set_exception(e)
            with self._mu:
                self._idle += 1


_DONE = _Done()


def _run_sync(h: Handler, task: Task) -> Any:
    return h(task)


async def _run_async(h: Handler, run: _Run) -> Any:
    task = run.task
    try:
        left = task.seconds_left()
        if left is None:
            return await h(task)
        try:
            return await asyncio.wait_for(h(task), timeout=max(left, 0))
        except asyncio.TimeoutError:
            raise TimeoutError("deadline %s passed" % task.deadline.isoformat() if task.deadline else "") from None
    finally:
        run.ended.set()


def _error_text(exc: BaseException) -> str:
    text = "%s: %s" % (type(exc).__name__, exc) if str(exc) else type(exc).__name__
    return text.encode()[:MAX_ERROR_BYTES].decode(errors="ignore")
