"""ax's Python SDK: the HTTP API client and a remote worker.

    from axsched import Client, Worker, FinalError

Client calls the API (submit, get, wait, list, cancel, replay, DAGs,
schedules); Worker runs handlers for tasks it claims through the worker
protocol with a worker token, never touching Redis. Standard library only.
"""

from .client import DAG_TERMINAL, ROUTES, TERMINAL, Client
from .errors import APIError, FinalError, RetryAfter, WaitTimeout
from .task import Task
from .worker import Worker

__version__ = "0.1.0"

__all__ = ["Client", "Worker", "Task", "APIError", "FinalError", "RetryAfter", "WaitTimeout", "TERMINAL",
           "DAG_TERMINAL", "ROUTES", "__version__"]
