"""The client of ax's HTTP API (httpapi/openapi.json).

    from axsched import Client, APIError
    ax = Client("http://127.0.0.1:8080")          # token: argument or AX_TOKEN
    t = ax.submit({"type": "report.generate", "payload": {"id": 7}})
    done = ax.wait(t["id"], timeout=60)           # its result once SUCCESS, FAILED or CANCELED
    for task in ax.iter_tasks(state="FAILED", type="report.generate"):
        ax.replay(task["id"])

Every error answer is raised as axsched.APIError (status, code, message, field,
retry_after) once the retries of a 429 or 503 are spent; no answer from any
server raises the OSError of the last attempt.
"""

from __future__ import annotations

import datetime
import os
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

from ._transport import Transport
from .errors import WaitTimeout

__all__ = ["Client", "ROUTES", "TERMINAL", "DAG_TERMINAL", "BATCH_TERMINAL"]

# The routes the client calls, by the spec's operationId: (method, path).
# The package's tests check each against httpapi/openapi.json.
ROUTES: Dict[str, Tuple[str, str]] = {
    "submitTask": ("POST", "/v1/tasks"),
    "submitTasks": ("POST", "/v1/tasks/batch"),
    "listTasks": ("GET", "/v1/tasks"),
    "getTask": ("GET", "/v1/tasks/{id}"),
    "getTaskTrail": ("GET", "/v1/tasks/{id}/trail"),
    "getTaskResult": ("GET", "/v1/tasks/{id}/result"),
    "cancelTask": ("POST", "/v1/tasks/{id}/cancel"),
    "replayTask": ("POST", "/v1/tasks/{id}/replay"),
    "setTaskPriority": ("POST", "/v1/tasks/{id}/priority"),
    "listDeadLetters": ("GET", "/v1/dlq"),
    "listRegions": ("GET", "/v1/regions"),
    "explainPlacement": ("POST", "/v1/placement/explain"),
    "createDAG": ("POST", "/v1/dags"),
    "listDAGs": ("GET", "/v1/dags"),
    "getDAG": ("GET", "/v1/dags/{id}"),
    "cancelDAG": ("POST", "/v1/dags/{id}/cancel"),
    "createBatch": ("POST", "/v1/batches"),
    "listBatches": ("GET", "/v1/batches"),
    "getBatch": ("GET", "/v1/batches/{id}"),
    "cancelBatch": ("POST", "/v1/batches/{id}/cancel"),
    "createSchedule": ("POST", "/v1/schedules"),
    "listSchedules": ("GET", "/v1/schedules"),
    "getSchedule": ("GET", "/v1/schedules/{name}"),
    "deleteSchedule": ("DELETE", "/v1/schedules/{name}"),
    "pauseSchedule": ("POST", "/v1/schedules/{name}/pause"),
    "resumeSchedule": ("POST", "/v1/schedules/{name}/resume"),
    "backfillSchedule": ("POST", "/v1/schedules/{name}/backfill"),
    "rerunSchedule": ("POST", "/v1/schedules/{name}/rerun"),
    "listScheduleBackfills": ("GET", "/v1/schedules/{name}/backfills"),
}

# The longest wait the result route takes (GET /v1/tasks/{id}/result?wait=).
MAX_RESULT_WAIT = 60.0
# The fewest seconds between two result waits: a server that answers before
# the wait it was asked for (one without waits) is asked at most 5 times a second.
MIN_RESULT_ASK = 0.2

# The task states no transition leaves (but replay of a FAILED one).
TERMINAL = frozenset({"SUCCESS", "FAILED", "CANCELED"})
# The DAG states no transition leaves.
DAG_TERMINAL = frozenset({"SUCCESS", "FAILED", "CANCELED"})
# The state of a batch whose members have all ended.
BATCH_TERMINAL = frozenset({"COMPLETED"})


class Client:
    """Calls the servers of one region; tasks of every region are reachable through them.

    urls: one URL, a comma-separated list or a list (a connection error or a
    503 moves to the next). token: the API token, else $AX_TOKEN. retries:
    how many times a 429, a 503 or a connection error is retried (with
    backoff and jitter, never sooner than Retry-After).
    """

    def __init__(self, urls: Union[str, Sequence[str]], token: Optional[str] = None, timeout: float = 30.0,
                 retries: int = 6) -> None:
        if token is None:
            token = os.environ.get("AX_TOKEN") or None
        self._t = Transport(urls, token, timeout=timeout, retries=retries)

    @property
    def url(self) -> str:
        """The server URL calls go to now."""
        return self._t.url

    def _call(self, op: str, body: Any = None, query: Optional[Mapping[str, Any]] = None,
              idempotent: bool = True, **params: str) -> Any:
        method, path = ROUTES[op]
        for k, v in params.items():
            path = path.replace("{%s}" % k, urllib.parse.quote(v, safe=""))
        return self._t.call(method, path, body, query, idempotent=idempotent)

    # Tasks.

    def submit(self, spec: Optional[Mapping[str, Any]] = None, *, unique_key: Optional[str] = None,
               unique_for: Optional[str] = None, unique_until: Optional[str] = None,
               unique_conflict: Optional[str] = None, debounce_key: Optional[str] = None,
               debounce: Optional[str] = None, debounce_max_wait: Optional[str] = None,
               slots: Optional[float] = None) -> Dict[str, Any]:
        """POST /v1/tasks: {id, state, region, pool, duplicate}.

        The keyword fields join spec (docs/tasks.md): unique_key with
        unique_for (a Go duration), unique_until ("started" or "finished")
        and unique_conflict ("existing": the holder's answer, 200; "reject":
        409 naming unique_key); debounce_key with debounce and
        debounce_max_wait (Go durations); slots, the share of a worker slot
        the task holds (0.001 to 1; four tasks of 0.25 share one slot). A submit that may have reached a
        server without an answer is sent again only when sending it twice
        creates one task: with an idempotency_key, a debounce_key, or a
        unique_key whose conflict is not "reject" (else it could run twice).
        """
        body = dict(spec or {})
        for k, v in (("unique_key", unique_key), ("unique_for", unique_for), ("unique_until", unique_until),
                     ("unique_conflict", unique_conflict), ("debounce_key", debounce_key), ("debounce", debounce),
                     ("debounce_max_wait", debounce_max_wait), ("slots", slots)):
            if v is not None:
                body[k] = v
        return self._call("submitTask", body, idempotent=_resendable(body))

    def submit_batch(self, specs: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
        """POST /v1/tasks/batch: {accepted, rejected, results}, one result per spec."""
        keyed = all(_resendable(s) for s in specs)
        return self._call("submitTasks", {"tasks": [dict(s) for s in specs]}, idempotent=keyed)

    def get(self, task_id: str) -> Dict[str, Any]:
        """GET /v1/tasks/{id}: the task, wherever it is held."""
        return self._call("getTask", id=task_id)

    def result(self, task_id: str, wait: float = 0.0) -> Dict[str, Any]:
        """GET /v1/tasks/{id}/result: {id, state, done, reason, result, error, attempts, progress, ...}.

        With wait (seconds, at most 60) the server holds the answer until the
        task is SUCCESS, FAILED or CANCELED or the wait ends (done false).
        result is the handler's result as a JSON value.
        """
        wait = max(0.0, min(wait, MAX_RESULT_WAIT))
        q = {"wait": "%dms" % int(wait * 1000)} if wait > 0 else None
        return self._t.call("GET", ROUTES["getTaskResult"][1].replace("{id}", urllib.parse.quote(task_id, safe="")),
                            None, q, timeout=max(self._t.timeout, wait + 15))

    def wait(self, task_id: str, timeout: float = 60.0, clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> Dict[str, Any]:
        """Waits at most timeout seconds for the task to be SUCCESS, FAILED or CANCELED; its result.

        Long-polls GET /v1/tasks/{id}/result (each wait up to 60 s, so a
        task handed to another region is waited for where it runs) and
        returns its answer once done: state, result (the handler's result
        as a JSON value), error and reason of a FAILED or CANCELED task,
        attempts. Raises WaitTimeout (a TimeoutError holding the last
        answer) when time runs out, APIError for a task that does not exist.
        """
        end = clock() + timeout
        while True:
            asked = clock()
            last = self.result(task_id, wait=max(0.0, end - asked))
            if last.get("done"):
                return last
            now = clock()
            if now >= end:
                raise WaitTimeout(task_id, timeout, last)
            sleep(max(0.0, min(asked + MIN_RESULT_ASK, end) - now))

    def trail(self, task_id: str) -> Any:
        """GET /v1/tasks/{id}/trail: its transitions, across regions."""
        return self._call("getTaskTrail", id=task_id)["transitions"]

    def cancel(self, task_id: str) -> Dict[str, Any]:
        """POST /v1/tasks/{id}/cancel (operator token): {id, state, requested}."""
        return self._call("cancelTask", {}, id=task_id)

    def replay(self, task_id: str) -> Dict[str, Any]:
        """POST /v1/tasks/{id}/replay (operator token): a dead letter runs again."""
        return self._call("replayTask", {}, id=task_id)

    def set_priority(self, task_id: str, priority: int) -> Dict[str, Any]:
        """POST /v1/tasks/{id}/priority: a waiting task's new priority."""
        return self._call("setTaskPriority", {"priority": priority}, id=task_id)

    def list_tasks(self, **filters: Any) -> Dict[str, Any]:
        """GET /v1/tasks: one page {tasks, next_cursor, regions, unavailable}.

        Filters: state, type, tenant, pool, region, created_after,
        created_before, limit_key, payload, limit, cursor.
        """
        return self._call("listTasks", query=filters)

    def iter_tasks(self, **filters: Any) -> Iterator[Dict[str, Any]]:
        """Every task matching filters, page after page."""
        return _pages(self.list_tasks, "tasks", filters)

    def dlq(self, **filters: Any) -> Dict[str, Any]:
        """GET /v1/dlq: one page of dead letters (type, tenant, region, limit, cursor)."""
        return self._call("listDeadLetters", query=filters)

    def iter_dlq(self, **filters: Any) -> Iterator[Dict[str, Any]]:
        """Every dead letter matching filters, page after page."""
        return _pages(self.dlq, "tasks", filters)

    def regions(self) -> Dict[str, Any]:
        """GET /v1/regions: every region's health, pools and prices."""
        return self._call("listRegions")

    def explain(self, spec: Mapping[str, Any]) -> Dict[str, Any]:
        """POST /v1/placement/explain: where spec would go and why (nothing is submitted)."""
        return self._call("explainPlacement", dict(spec))

    # DAGs.

    def create_dag(self, dag: Mapping[str, Any]) -> Dict[str, Any]:
        """POST /v1/dags: starts a run of {name, nodes, tenant}; its status."""
        return self._call("createDAG", dict(dag), idempotent=False)

    def get_dag(self, dag_id: str) -> Dict[str, Any]:
        """GET /v1/dags/{id}: the run's state and every node's."""
        return self._call("getDAG", id=dag_id)

    def list_dags(self, **filters: Any) -> Dict[str, Any]:
        """GET /v1/dags: one page of runs (tenant, name, state, region, limit, cursor)."""
        return self._call("listDAGs", query=filters)

    def iter_dags(self, **filters: Any) -> Iterator[Dict[str, Any]]:
        """Every DAG run matching filters, page after page."""
        return _pages(self.list_dags, "runs", filters)

    def cancel_dag(self, dag_id: str) -> Dict[str, Any]:
        """POST /v1/dags/{id}/cancel: cancels its unfinished nodes."""
        return self._call("cancelDAG", {}, id=dag_id)

    def wait_dag(self, dag_id: str, timeout: float = 60.0, poll: float = 0.1, max_poll: float = 2.0) -> Dict[str, Any]:
        """Reads the DAG run until it is SUCCESS, FAILED or CANCELED; WaitTimeout after timeout."""
        return _poll(self.get_dag, dag_id, DAG_TERMINAL, timeout, poll, max_poll, time.monotonic, time.sleep)

    # Batches.

    def create_batch(self, tasks: Sequence[Mapping[str, Any]], *, on_complete: Optional[Mapping[str, Any]] = None,
                     on_success: Optional[Mapping[str, Any]] = None, name: Optional[str] = None,
                     idempotency_key: Optional[str] = None) -> Dict[str, Any]:
        """POST /v1/batches: up to 10 000 task specs as one batch; on_complete (on_success) runs once
        every member has ended (succeeded), with the batch's counts and failed ids in its payload.

        With idempotency_key a repeat creates nothing: it answers the batch the first created
        ("duplicate": True), so a request cut off without an answer is sent again; the key with
        another request is a 409 APIError naming idempotency_key."""
        body: Dict[str, Any] = {"tasks": [dict(t) for t in tasks]}
        if idempotency_key:
            body["idempotency_key"] = idempotency_key
        if on_complete is not None:
            body["on_complete"] = dict(on_complete)
        if on_success is not None:
            body["on_success"] = dict(on_success)
        if name:
            body["name"] = name
        return self._call("createBatch", body, idempotent=bool(idempotency_key))

    def get_batch(self, batch_id: str) -> Dict[str, Any]:
        """GET /v1/batches/{id}: counts by state, failed and canceled ids, the callbacks' task ids."""
        return self._call("getBatch", id=batch_id)

    def list_batches(self, **filters: Any) -> Dict[str, Any]:
        """GET /v1/batches: one page of the server's region's batches (tenant, limit, after)."""
        return self._call("listBatches", query=filters)

    def cancel_batch(self, batch_id: str) -> Dict[str, Any]:
        """POST /v1/batches/{id}/cancel: cancels the members not ended yet; the callbacks still run once."""
        return self._call("cancelBatch", {}, id=batch_id)

    def wait_batch(self, batch_id: str, timeout: float = 60.0, poll: float = 0.1, max_poll: float = 2.0) -> Dict[str, Any]:
        """Reads the batch until every member has ended (COMPLETED); WaitTimeout after timeout."""
        return _poll(self.get_batch, batch_id, BATCH_TERMINAL, timeout, poll, max_poll, time.monotonic, time.sleep)

    # Schedules.

    def create_schedule(self, schedule: Mapping[str, Any]) -> Dict[str, Any]:
        """POST /v1/schedules: {name, cron, task, ...}; its status."""
        return self._call("createSchedule", dict(schedule), idempotent=False)

    def get_schedule(self, name: str) -> Dict[str, Any]:
        """GET /v1/schedules/{name}."""
        return self._call("getSchedule", name=name)

    def list_schedules(self, tenant: Optional[str] = None) -> Dict[str, Any]:
        """GET /v1/schedules: {"schedules": [...]}."""
        return self._call("listSchedules", query={"tenant": tenant})

    def delete_schedule(self, name: str) -> Any:
        """DELETE /v1/schedules/{name}."""
        return self._call("deleteSchedule", name=name)

    def pause_schedule(self, name: str) -> Dict[str, Any]:
        """POST /v1/schedules/{name}/pause."""
        return self._call("pauseSchedule", {}, name=name)

    def resume_schedule(self, name: str) -> Dict[str, Any]:
        """POST /v1/schedules/{name}/resume."""
        return self._call("resumeSchedule", {}, name=name)

    def backfill_schedule(self, name: str, start: Union[str, datetime.datetime, datetime.date],
                          end: Union[str, datetime.datetime, datetime.date], max_active: Optional[int] = None,
                          tenant: Optional[str] = None) -> Dict[str, Any]:
        """POST /v1/schedules/{name}/backfill (operator token): runs every slot from start to end, both included.

        start and end: RFC 3339 times, aware datetimes or dates (midnight in
        the schedule's zone). max_active: runs at once (1..100, default 1).
        tenant: whose schedule, for a token of every tenant. Answers the
        backfill {id, state, periods, runs, active, ...}; a period that ran
        already is not run again.
        """
        body: Dict[str, Any] = {"from": _when(start), "to": _when(end)}
        if max_active is not None:
            body["max_active"] = max_active
        return self._call("backfillSchedule", body, query={"tenant": tenant}, idempotent=False, name=name)

    def rerun_schedule(self, name: str, period: Union[str, datetime.datetime, datetime.date],
                       tenant: Optional[str] = None, downstream: bool = False) -> Dict[str, Any]:
        """POST /v1/schedules/{name}/rerun (operator token): a new run of the period starting at period (a slot).

        With downstream, the schedules depending on it (transitively) are rerun for their periods starting in it,
        each waiting for its upstream's rerun, not for the period's earlier success; the answer's "downstream"
        lists their reruns."""
        body: Dict[str, Any] = {"period": _when(period)}
        if downstream:
            body["downstream"] = True
        return self._call("rerunSchedule", body, query={"tenant": tenant}, idempotent=False, name=name)

    def list_schedule_backfills(self, name: str, tenant: Optional[str] = None) -> Dict[str, Any]:
        """GET /v1/schedules/{name}/backfills: {"backfills": [...]}, newest first."""
        return self._call("listScheduleBackfills", query={"tenant": tenant}, name=name)


def _resendable(spec: Mapping[str, Any]) -> bool:
    """Whether sending spec twice creates one task (a retry after no answer is safe)."""
    if spec.get("idempotency_key") or spec.get("debounce_key"):
        return True
    return bool(spec.get("unique_key")) and spec.get("unique_conflict") != "reject"


def _when(t: Union[str, datetime.datetime, datetime.date]) -> str:
    """t as the API takes a time: an RFC 3339 string, or a date (2006-01-02)."""
    if isinstance(t, datetime.datetime):
        if t.tzinfo is None:
            raise ValueError("time %r has no time zone" % t)
        return t.isoformat()
    if isinstance(t, datetime.date):
        return t.isoformat()
    return str(t)


def _pages(page: Callable[..., Dict[str, Any]], key: str, filters: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
    filters = dict(filters)
    while True:
        p = page(**filters)
        yield from p.get(key) or []
        if not p.get("next_cursor"):
            return
        filters["cursor"] = p["next_cursor"]


def _poll(get: Callable[[str], Dict[str, Any]], key: str, terminal: frozenset, timeout: float, poll: float,
          max_poll: float, clock: Callable[[], float], sleep: Callable[[float], None]) -> Dict[str, Any]:
    end = clock() + timeout
    delay = poll
    while True:
        last = get(key)
        if last.get("state") in terminal:
            return last
        left = end - clock()
        if left <= 0:
            raise WaitTimeout(key, timeout, last)
        sleep(min(delay, left))
        delay = min(max_poll, delay * 1.5)
