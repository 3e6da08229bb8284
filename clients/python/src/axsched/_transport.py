"""HTTP/1.1 + JSON calls to the servers of one region, with retries.

A call that gets 429 or 503 (with or without Retry-After) or no answer at all
is sent again after a backoff with jitter, never sooner than Retry-After; a
connection error or a 503 moves the call to the next server URL (the servers
of a region share its state, so any of them answers for it). A request that
may have reached the server but got no answer is sent again only when it is
idempotent; one refused at connect never reached it and is always retried.
"""

from __future__ import annotations

import http.client
import json
import logging
import random
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from .errors import APIError

__all__ = ["Transport", "Canceler", "parse_urls"]

log = logging.getLogger("axsched")


def parse_urls(urls: Union[str, Sequence[str]]) -> List[str]:
    """The server URLs of urls: one string (commas allowed) or a list."""
    if isinstance(urls, str):
        urls = urls.split(",")
    out = [u.strip().rstrip("/") for u in urls if u and u.strip()]
    if not out:
        raise ValueError("no server URL")
    for u in out:
        p = urllib.parse.urlsplit(u)
        if p.scheme not in ("http", "https") or not p.hostname:
            raise ValueError("server URL %r: want http(s)://host[:port]" % u)
    return out


class Canceler:
    """Aborts the call in flight that was given it (from another thread)."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._conn: Optional[http.client.HTTPConnection] = None
        self.canceled = False

    def _bind(self, conn: Optional[http.client.HTTPConnection]) -> bool:
        with self._mu:
            self._conn = conn
            return not self.canceled

    def cancel(self) -> None:
        with self._mu:
            self.canceled = True
            conn = self._conn
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _NoAnswer(Exception):
    """The server gave no HTTP answer; sent says whether it may have seen the request."""

    def __init__(self, err: BaseException, sent: bool) -> None:
        super().__init__(str(err))
        self.err = err
        self.sent = sent


class Transport:
    """Sends JSON requests to a list of server URLs, rotating on failure."""

    def __init__(self, urls: Union[str, Sequence[str]], token: Optional[str] = None, timeout: float = 30.0,
                 retries: int = 6, backoff: float = 0.1, max_backoff: float = 5.0,
                 user_agent: str = "axsched-python") -> None:
        self.urls = parse_urls(urls)
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.user_agent = user_agent
        self._mu = threading.Lock()
        self._at = 0
        self._rand = random.Random()
        self._ssl: Optional[ssl.SSLContext] = None

    @property
    def url(self) -> str:
        """The server URL calls go to now."""
        with self._mu:
            return self.urls[self._at]

    def _rotate(self, from_url: str, why: object) -> None:
        # Two threads failing on the same URL move on once, not twice.
        with self._mu:
            if self.urls[self._at] != from_url or len(self.urls) == 1:
                return
            self._at = (self._at + 1) % len(self.urls)
            to = self.urls[self._at]
        log.warning("server %s: %s; moving to %s", from_url, why, to)

    def delay(self, attempt: int, retry_after: Optional[float] = None) -> float:
        """The wait before retry attempt (1, 2, ...): exponential with jitter, at least Retry-After."""
        cap = min(self.max_backoff, self.backoff * (2 ** min(attempt - 1, 16)))
        d = self._rand.uniform(cap / 2, cap)
        if retry_after is not None and retry_after > 0:
            d = max(d, retry_after + self._rand.uniform(0, min(1.0, retry_after / 4)))
        return d

    def call(self, method: str, path: str, body: Any = None, query: Optional[Mapping[str, Any]] = None,
             idempotent: bool = True, timeout: Optional[float] = None, retries: Optional[int] = None,
             stop: Optional[threading.Event] = None, canceler: Optional[Canceler] = None,
             sleep: Callable[[float], None] = time.sleep) -> Any:
        """Sends the request and returns the decoded JSON answer (None when empty).

        Raises APIError for an error answer (after the retries of a 429 or
        503), OSError when no server answered, InterruptedError when stop
        was set or canceler canceled while retrying.
        """
        target = path
        if query:
            q = {k: _qval(v) for k, v in query.items() if v is not None and v != ""}
            if q:
                target += "?" + urllib.parse.urlencode(sorted(q.items()))
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        n = self.retries if retries is None else retries
        attempt = 0
        while True:
            url = self.url
            try:
                return self._once(url, method, target, data, timeout or self.timeout, canceler)
            except APIError as e:
                if not e.retryable or attempt >= n:
                    raise
                if e.status == 503:
                    self._rotate(url, e)
                wait = self.delay(attempt + 1, e.retry_after)
            except _NoAnswer as e:
                if canceler is not None and canceler.canceled:
                    raise InterruptedError("canceled") from e.err
                self._rotate(url, e.err)
                if (e.sent and not idempotent) or attempt >= n:
                    raise e.err from None
                wait = self.delay(attempt + 1)
            attempt += 1
            if stop is not None:
                if stop.wait(wait):
                    raise InterruptedError("stopped")
            else:
                sleep(wait)

    def _conn(self, url: str, timeout: float) -> http.client.HTTPConnection:
        p = urllib.parse.urlsplit(url)
        if p.scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            return http.client.HTTPSConnection(p.hostname or "", p.port, timeout=timeout, context=self._ssl)
        return http.client.HTTPConnection(p.hostname or "", p.port, timeout=timeout)

    def _once(self, url: str, method: str, target: str, data: Optional[bytes], timeout: float,
              canceler: Optional[Canceler]) -> Any:
        headers: Dict[str, str] = {"Accept": "application/json", "User-Agent": self.user_agent}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        prefix = urllib.parse.urlsplit(url).path
        conn = self._conn(url, timeout)
        sent = False
        try:
            try:
                conn.connect()
            except OSError as e:
                raise _NoAnswer(e, False) from None
            if canceler is not None and not canceler._bind(conn):
                raise _NoAnswer(InterruptedError("canceled"), False)
            try:
                sent = True
                conn.request(method, prefix + target, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException) as e:
                raise _NoAnswer(e, sent) from None
        finally:
            if canceler is not None:
                canceler._bind(None)
            conn.close()
        if resp.status >= 400:
            raise _api_error(resp.status, raw, resp.getheader("Retry-After"))
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise APIError(resp.status, "bad_answer", "not JSON: %r" % raw[:200]) from None


def _qval(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _api_error(status: int, raw: bytes, retry_after: Optional[str]) -> APIError:
    ra: Optional[float] = None
    if retry_after:
        try:
            ra = float(retry_after)
        except ValueError:
            ra = None
    try:
        err = json.loads(raw)["error"]
        code, message, field = err.get("code", ""), err.get("message", ""), err.get("field", "") or ""
        if ra is None and isinstance(err.get("retry_after_seconds"), (int, float)):
            ra = float(err["retry_after_seconds"])
    except (ValueError, KeyError, TypeError, AttributeError):
        code, message, field = "http_%d" % status, raw.decode(errors="replace")[:200], ""
    return APIError(status, code, message, field, ra)
