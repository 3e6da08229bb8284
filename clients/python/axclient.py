"""A small client of ax's HTTP API (standard library only).

    from axclient import Client, APIError
    ax = Client("http://127.0.0.1:8080", token="...")
    t = ax.submit({"type": "report.generate", "payload": {"id": 7}})
    ax.get(t["id"])["state"]
    for task in ax.iter_tasks(state="FAILED", type="report.generate"):
        ...
    try:
        ax.submit({"type": "x", "priority": 9})
    except APIError as e:
        e.status, e.code, e.message, e.field   # 400 invalid_argument ... priority

Every error answer of the API ({"error": {"code", "message", "field"}}) is
raised as APIError; a server that cannot be reached raises the urllib
error as it is. The token goes in the Authorization header only.
"""

import json
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Client", "APIError"]


class APIError(Exception):
    """An error answer of the API: HTTP status, code, message, field."""

    def __init__(self, status, code, message, field="", retry_after=None):
        super().__init__("%d %s: %s%s" % (status, code, message, " (field %s)" % field if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after = retry_after  # seconds, on 429 and 503


class Client:
    """Calls one ax server; tasks of every region are reachable through it."""

    def __init__(self, base_url, token=None, timeout=30.0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _call(self, method, path, body=None, query=None):
        url = self.base_url + path
        if query:
            q = {k: str(v) for k, v in query.items() if v is not None and v != ""}
            if q:
                url += "?" + urllib.parse.urlencode(sorted(q.items()))
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                raise APIError(e.code, "http_%d" % e.code, raw.decode(errors="replace")[:200]) from None
            ra = e.headers.get("Retry-After")
            raise APIError(e.code, err.get("code", ""), err.get("message", ""), err.get("field", ""),
                           int(ra) if ra and ra.isdigit() else None) from None
        return json.loads(raw) if raw else None

    @staticmethod
    def _id(task_id):
        return urllib.parse.quote(task_id, safe="")

    def submit(self, spec):
        """POST /v1/tasks: {id, state, region, pool, duplicate}."""
        return self._call("POST", "/v1/tasks", spec)

    def get(self, task_id):
        """GET /v1/tasks/{id}: the task, wherever it is held."""
        return self._call("GET", "/v1/tasks/" + self._id(task_id))

    def trail(self, task_id):
        """GET /v1/tasks/{id}/trail: its transitions, across regions."""
        return self._call("GET", "/v1/tasks/" + self._id(task_id) + "/trail")["transitions"]

    def cancel(self, task_id):
        """POST /v1/tasks/{id}/cancel (operator token): {id, state, requested}."""
        return self._call("POST", "/v1/tasks/" + self._id(task_id) + "/cancel", {})

    def replay(self, task_id):
        """POST /v1/tasks/{id}/replay (operator token): a dead letter runs again."""
        return self._call("POST", "/v1/tasks/" + self._id(task_id) + "/replay", {})

    def list_tasks(self, **filters):
        """GET /v1/tasks: one page {tasks, next_cursor, regions, unavailable}.

        Filters: state, type, tenant, pool, region, created_after,
        created_before, limit_key, payload, limit, cursor.
        """
        return self._call("GET", "/v1/tasks", query=filters)

    def iter_tasks(self, **filters):
        """Every task matching filters, page after page."""
        return self._pages(self.list_tasks, filters)

    def dlq(self, **filters):
        """GET /v1/dlq: one page of dead letters (type, tenant, region, limit, cursor)."""
        return self._call("GET", "/v1/dlq", query=filters)

    def iter_dlq(self, **filters):
        """Every dead letter matching filters, page after page."""
        return self._pages(self.dlq, filters)

    @staticmethod
    def _pages(page, filters):
        filters = dict(filters)
        while True:
            p = page(**filters)
            yield from p["tasks"]
            if not p.get("next_cursor"):
                return
            filters["cursor"] = p["next_cursor"]
