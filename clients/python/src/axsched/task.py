"""The task a handler is given: one claimed attempt."""

from __future__ import annotations

import datetime
import threading
from typing import Any, Callable, Dict, Mapping, Optional

__all__ = ["Task"]


class Task:
    """One attempt of a task, claimed by a Worker for a handler.

    id, type, payload (any JSON, None when none), attempt (1 for the first),
    max_retries, priority, tags, tenant, trace_id, deadline (an aware
    datetime: when this attempt's timeout ends; None when the server sent
    none) and slots (the share of a worker slot it holds while it runs: 1.0,
    or less for a fractional task, docs/tasks.md "Fractional slots"). canceled turns True (and cancel_event is set) when the server says
    to stop (the task was cancelled or preempted, its lease was lost, its
    deadline passed) or the worker shuts down past its grace; stop_reason
    says which. A sync handler checks canceled between steps; an async one
    is also cancelled (asyncio.CancelledError at its next await).
    """

    def __init__(self, raw: Mapping[str, Any], report_progress: Callable[["Task", float, str], None]) -> None:
        self.id: str = str(raw["id"])
        self.type: str = str(raw.get("type", ""))
        self.payload: Any = raw.get("payload")
        self.attempt: int = int(raw.get("attempt") or 1)
        self.max_retries: int = int(raw.get("max_retries") or 0)
        self.priority: int = int(raw.get("priority") or 0)
        self.tags: Dict[str, str] = dict(raw.get("tags") or {})
        self.tenant: str = str(raw.get("tenant") or "")
        self.trace_id: str = str(raw.get("trace_id") or "")
        self.deadline: Optional[datetime.datetime] = parse_time(raw.get("deadline"))
        self.lease: str = str(raw.get("lease") or "")
        self.slots: float = float(raw.get("slots") or 1.0)
        # The room it holds in the worker's slots, in milli-slots (a whole
        # slot unless the server said less).
        self._milli: int = milli_slots(self.slots)
        # A DAG node's parents' results by parent node id (those that
        # succeeded and still kept one): JSON as that value, other text as a str.
        self.parents: Dict[str, Any] = dict(raw.get("parents") or {})
        self.stop_reason: Optional[str] = None
        self._cancel = threading.Event()
        self._report_progress = report_progress

    @property
    def canceled(self) -> bool:
        """Whether the handler should stop: its outcome is no longer wanted."""
        return self._cancel.is_set()

    @property
    def cancel_event(self) -> threading.Event:
        """Set when canceled turns True (wait on it instead of polling)."""
        return self._cancel

    def seconds_left(self) -> Optional[float]:
        """Seconds until deadline (negative once past), None without one."""
        if self.deadline is None:
            return None
        return (self.deadline - datetime.datetime.now(datetime.timezone.utc)).total_seconds()

    def parent_result(self, node: str) -> Any:
        """The result of parent node `node` of a DAG node's task (None: none, see parents)."""
        return self.parents.get(node)

    def progress(self, percent: float, message: str = "") -> None:
        """Reports how far the attempt got (0..100); GET /v1/tasks/{id} shows the last one.

        Reports are batched: a later call before the next report replaces
        an earlier one. Raises ValueError for a percent outside 0..100.
        """
        p = float(percent)
        if not 0 <= p <= 100:
            raise ValueError("progress percent %r: want 0..100" % percent)
        self._report_progress(self, p, str(message))

    def _stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self._cancel.set()

    def __repr__(self) -> str:
        return "Task(id=%r, type=%r, attempt=%d, tenant=%r)" % (self.id, self.type, self.attempt, self.tenant)


MILLI_SLOTS = 1000


def milli_slots(slots: Any) -> int:
    """The room a task of slots holds, in milli-slots: a whole slot (1000)
    unless slots is a fraction in (0, 1)."""
    try:
        m = int(round(float(slots) * MILLI_SLOTS))
    except (TypeError, ValueError):
        return MILLI_SLOTS
    return m if 0 < m < MILLI_SLOTS else MILLI_SLOTS


def parse_time(v: Any) -> Optional[datetime.datetime]:
    """An RFC 3339 time of the API (Z or an offset, any fraction) as an aware datetime."""
    if not v or not isinstance(v, str):
        return None
    s = v.strip()
    if s.endswith("Z") or s.endswith("z"):
        s = s[:-1] + "+00:00"
    # fromisoformat before 3.11 takes at most 6 digits of fraction.
    if "." in s:
        head, rest = s.split(".", 1)
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        s = head + "." + (rest[:i] + "000000")[:6] + rest[i:]
    try:
        t = datetime.datetime.fromisoformat(s)
    except ValueError:
        return None
    if t.year <= 1:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return t
