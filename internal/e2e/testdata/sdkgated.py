"""A remote Python worker for internal/e2e's TestSDKWorkersKilledAndStopped.

Its whole environment: PATH, AX_URL (the region's servers), AX_TOKEN (a
worker token), AX_POOL, AX_E2E_NAME (its name in the runs file), AX_E2E_GRACE
(seconds running handlers get at SIGTERM), AX_E2E_SLOTS (its concurrency), AX_E2E_RUNS (a file: one JSON line
per handler start and per handler end) and AX_E2E_GATES (a directory: a task
whose payload has "gate" waits until the file GATES/<task id> exists). The
TypeScript twin is clients/typescript/test/e2e-gated-worker.ts.
"""

import json
import logging
import os
import time

from axsched import Worker

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

NAME = os.environ["AX_E2E_NAME"]
RUNS = os.environ["AX_E2E_RUNS"]
GATES = os.environ["AX_E2E_GATES"]

w = Worker(pool=os.environ["AX_POOL"], concurrency=int(os.environ.get("AX_E2E_SLOTS", "4")), grace=float(os.environ["AX_E2E_GRACE"]), name=NAME)


def note(ev, task):
    with open(RUNS, "a") as f:
        f.write(json.dumps({"ev": ev, "id": task.id, "attempt": task.attempt, "worker": NAME, "slots": task.slots}) + "\n")


@w.handler("sdk.gated")
def run(task):
    note("start", task)
    p = task.payload or {}
    task.progress(50, "at the gate")
    if p.get("gate"):
        while not os.path.exists(os.path.join(GATES, task.id)):
            if task.canceled:
                note("stopped", task)
                return None
            time.sleep(0.02)
    note("done", task)
    return {"n": p.get("n"), "worker": NAME}


print("sdkgated running", flush=True)
w.run()
print("sdkgated exited", flush=True)
