"""The errors of the client and the exceptions a handler raises."""

from __future__ import annotations

from typing import Optional

__all__ = ["APIError", "FinalError", "RetryAfter", "WaitTimeout"]


class APIError(Exception):
    """An error answer of the API ({"error": {"code", "message", "field"}}).

    status is the HTTP status, code the API's error code (invalid_argument,
    not_found, forbidden, unavailable, ...), field the request field it names
    (empty when none), retry_after the seconds of Retry-After (429 and 503).
    """

    def __init__(self, status: int, code: str, message: str, field: str = "",
                 retry_after: Optional[float] = None) -> None:
        super().__init__("%d %s: %s%s" % (status, code, message, " (field %s)" % field if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """Whether the request may be sent again as it is (429 and 503)."""
        return self.status in (429, 503)


class WaitTimeout(TimeoutError):
    """Client.wait ran out of time; task holds the last state it read."""

    def __init__(self, task_id: str, timeout: float, task: Optional[dict] = None) -> None:
        state = task.get("state") if task else None
        super().__init__("task %s not finished after %gs (state %s)" % (task_id, timeout, state))
        self.task_id = task_id
        self.task = task


class FinalError(Exception):
    """Raised by a handler: the task fails for good (no retry, dead letter)."""


class RetryAfter(Exception):
    """Raised by a handler: the attempt failed; retry no sooner than seconds."""

    def __init__(self, seconds: float, message: str = "") -> None:
        super().__init__(message or "retry after %gs" % seconds)
        self.seconds = seconds
