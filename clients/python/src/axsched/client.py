"""The client of ax's HTTP API (httpapi/openapi.json).

    from axsched import Client, APIError
    ax = Client("http://127.0.0.1:8080")          # token: argument or AX_TOKEN
    t = ax.submit({"type": "report.generate", "payload": {"id": 7}})
    done = ax.wait(t["id"], timeout=60)           # SUCCESS, FAILED or CANCELED
    for task in ax.iter_tasks(state="FAILED", type="report.generate"):
        ax.replay(task["id"])

Every error answer is raised as axsched.APIError (status, code, message, field,
retry_after) once the retries of a 429 or 503 are spent; no answer from any
server raises the OSError of the last attempt.
"""

from __future__ import annotations

import os
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

from ._transport import Transport
from .errors import WaitTimeout

__all__ = ["Client", "ROUTES", "TERMINAL", "DAG_TERMINAL"]

# The routes the client calls, by the spec's operationId: (method, path).
# The package's tests check each against httpapi/openapi.json.
ROUTES: Dict[str, Tuple[str, str]] = {
    "submitTask": ("POST", "/v1/tasks"),
    "submitTasks": ("POST", "/v1/tasks/batch"),
    "listTasks": ("GET", "/v1/tasks"),
    "getTask": ("GET", "/v1/tasks/{id}"),
    "getTaskTrail": ("GET", "/v1/tasks/{id}/trail"),
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
    "createSchedule": ("POST", "/v1/schedules"),
    "listSchedules": ("GET", "/v1/schedules"),
    "getSchedule": ("GET", "/v1/schedules/{name}"),
    "deleteSchedule": ("DELETE", "/v1/schedules/{name}"),
    "pauseSchedule": ("POST", "/v1/schedules/{name}/pause"),
    "resumeSchedule": ("POST", "/v1/schedules/{name}/resume"),
}

# The task states no transition leaves (but replay of a FAILED one).
TERMINAL = frozenset({"SUCCESS", "FAILED", "CANCELED"})
# The DAG states no transition leaves.
DAG_TERMINAL = frozenset({"SUCCESS", "FAILED", "CANCELED"})


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

    def submit(self, spec: Mapping[str, Any]) -> Dict[str, Any]:
        """POST /v1/tasks: {id, state, region, pool, duplicate}.

        A submit that may have reached a server without an answer is sent
        again only when spec has an idempotency_key (else it could run twice).
        """
        return self._call("submitTask", dict(spec), idempotent=bool(spec.get("idempotency_key")))

    def submit_batch(self, specs: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
        """POST /v1/tasks/batch: {accepted, rejected, results}, one result per spec."""
        keyed = all(s.get("idempotency_key") for s in specs)
        return self._call("submitTasks", {"tasks": [dict(s) for s in specs]}, idempotent=keyed)

    def get(self, task_id: str) -> Dict[str, Any]:
        """GET /v1/tasks/{id}: the task, wherever it is held."""
        return self._call("getTask", id=task_id)

    def wait(self, task_id: str, timeout: float = 60.0, poll: float = 0.05, max_poll: float = 2.0,
             clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> Dict[str, Any]:
        """Reads the task until it is SUCCESS, FAILED or CANCELED, at most timeout seconds.

        The polls back off from poll to max_poll. Raises WaitTimeout (a
        TimeoutError holding the last task read) when time runs out.
        """
        return _poll(self.get, task_id, TERMINAL, timeout, poll, max_poll, clock, sleep)

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
