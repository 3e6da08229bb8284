"""A remote Python worker for internal/e2e's TestPythonWorkerFederation.

Its whole environment: PATH, AX_URL (the region's servers), AX_TOKEN (a
worker token), AX_POOL, AX_E2E_RUNS (a file: one JSON line per handler
run) and AX_E2E_GATES (a directory: a task whose payload has "gate" waits
until the file GATES/<task id> exists).
"""

import json
import logging
import os
import time
import urllib.error
import urllib.request

from axsched import Worker

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

RUNS = os.environ["AX_E2E_RUNS"]
GATES = os.environ["AX_E2E_GATES"]
URL = os.environ["AX_URL"].split(",")[-1]

w = Worker(pool=os.environ["AX_POOL"], concurrency=4, grace=10, name="e2e-python")


def status(method, path, body=None):
    """The status the API answers this handler with the worker token."""
    req = urllib.request.Request(URL + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + os.environ["AX_TOKEN"],
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


@w.handler("py.e2e")
def run(task):
    with open(RUNS, "a") as f:
        f.write(json.dumps({"id": task.id, "tenant": task.tenant, "attempt": task.attempt}) + "\n")
    p = task.payload or {}
    task.progress(50, "half way")
    if p.get("gate"):
        while not os.path.exists(os.path.join(GATES, task.id)):
            if task.canceled:
                return None
            time.sleep(0.02)
    out = {"n": p.get("n"), "tenant": task.tenant}
    if p.get("probe"):
        # What a hostile handler reaches: its environment, and the API with
        # the only credential it has.
        out["env"] = dict(os.environ)
        out["list_tasks"] = status("GET", "/v1/tasks?tenant=globex")
        out["get_task"] = status("GET", "/v1/tasks/" + task.id)
        out["submit"] = status("POST", "/v1/tasks", {"type": "py.e2e", "tenant": "globex"})
    return out


w.run()
print("pyworker exited", flush=True)
