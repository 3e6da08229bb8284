"""The package against a real `ax dev` (auth off) started with
--no-demo-workers, so that only the workers of these tests run tasks:
AX_URL is its first region's API (internal/e2e's TestPythonSDK sets it).
Skipped without AX_URL.
"""

import datetime
import os
import unittest
import uuid

from axsched import APIError, Client, WaitTimeout

URL = os.environ.get("AX_URL", "")
REGION = os.environ.get("AX_REGION", "us-east-1")
SPOT = {"class": "spot"}


def unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


@unittest.skipUnless(URL, "needs a running ax dev (AX_URL)")
class ClientLiveTest(unittest.TestCase):
    def setUp(self):
        self.ax = Client(URL)

    def test_submit_get_wait_list_cancel_trail(self):
        typ = unique("py.live")
        ids = [self.ax.submit({"type": typ, "tags": SPOT, "regions": [REGION], "payload": {"n": i},
                               "delay": "10m"})["id"] for i in range(3)]
        t = self.ax.get(ids[0])
        self.assertEqual((t["type"], t["payload"], t["state"]), (typ, {"n": 0}, "PENDING"))
        with self.assertRaises(WaitTimeout) as e:
            self.ax.wait(ids[0], timeout=0.3)
        self.assertEqual(e.exception.task["state"], "PENDING")
        self.assertEqual(sorted(t["id"] for t in self.ax.iter_tasks(type=typ, limit=1)), sorted(ids))
        self.assertEqual(self.ax.cancel(ids[0])["state"], "CANCELED")
        self.assertEqual(self.ax.wait(ids[0], timeout=5)["state"], "CANCELED")
        self.assertEqual(self.ax.trail(ids[0])[-1]["to"], "CANCELED")

    def test_idempotent_submit(self):
        spec = {"type": unique("py.live"), "tags": SPOT, "delay": "10m", "idempotency_key": unique("k")}
        a, b = self.ax.submit(spec), self.ax.submit(spec)
        self.assertEqual((a["id"], b.get("duplicate")), (b["id"], True))

    def test_errors_name_their_field(self):
        with self.assertRaises(APIError) as e:
            self.ax.submit({"type": "x", "priority": 99})
        self.assertEqual((e.exception.status, e.exception.code, e.exception.field), (400, "invalid_argument",
                                                                                     "priority"))
        with self.assertRaises(APIError) as e:
            self.ax.get("no-such-task")
        self.assertEqual(e.exception.status // 100, 4)

    def test_dag_create_get_list_cancel(self):
        name = unique("py-dag")
        task = {"type": unique("py.node"), "tags": SPOT, "regions": [REGION]}
        d = self.ax.create_dag({"name": name, "nodes": [{"id": "a", "task": task},
                                                        {"id": "b", "task": task, "depends_on": ["a"]}]})
        self.assertEqual(self.ax.get_dag(d["id"])["name"], name)
        self.assertIn(d["id"], [r["id"] for r in self.ax.iter_dags(name=name)])
        self.ax.cancel_dag(d["id"])
        self.assertEqual(self.ax.wait_dag(d["id"], timeout=20)["state"], "CANCELED")

    def test_schedule_lifecycle(self):
        name = unique("py-sched")
        self.ax.create_schedule({"name": name, "cron": "0 3 * * *", "task": {"type": "py.cron", "tags": SPOT}})
        self.assertEqual(self.ax.get_schedule(name)["name"], name)
        self.assertTrue(self.ax.pause_schedule(name)["paused"])
        self.assertFalse(self.ax.resume_schedule(name)["paused"])
        self.assertIn(name, [s["name"] for s in self.ax.list_schedules()["schedules"]])
        self.ax.delete_schedule(name)
        with self.assertRaises(APIError) as e:
            self.ax.get_schedule(name)
        self.assertEqual(e.exception.status, 404)

    def test_schedule_backfill_and_rerun(self):
        name = unique("py-backfill")
        self.ax.create_schedule({"name": name, "cron": "0 3 * * *", "timezone": "UTC", "paused": True,
                                 "task": {"type": unique("py.cron"), "tags": SPOT, "regions": [REGION]}})
        b = self.ax.backfill_schedule(name, datetime.date(2026, 1, 1), "2026-01-03", max_active=2)
        self.assertEqual((b["schedule"], b["periods"], b["max_active"], b.get("rerun", False)), (name, 2, 2, False))
        r = self.ax.rerun_schedule(name, datetime.datetime(2026, 1, 1, 3, tzinfo=datetime.timezone.utc))
        self.assertEqual((r["periods"], r.get("rerun")), (1, True))
        self.assertEqual({x["id"] for x in self.ax.list_schedule_backfills(name)["backfills"]}, {b["id"], r["id"]})
        with self.assertRaises(APIError) as e:
            self.ax.backfill_schedule(name, "2026-01-03", "2026-01-01")
        self.assertEqual((e.exception.status, e.exception.field), (400, "from"))
        with self.assertRaises(APIError) as e:
            self.ax.rerun_schedule(name, "2026-01-01T04:00:00Z")
        self.assertEqual((e.exception.status, e.exception.field), (400, "period"))
        after = unique("py-after")
        self.ax.create_schedule({"name": after, "cron": "0 3 * * *", "timezone": "UTC", "paused": True,
                                 "task": {"type": unique("py.cron"), "tags": SPOT, "regions": [REGION]},
                                 "depends_on_schedules": [{"schedule": name, "rule": "same_period"}]})
        d = self.ax.rerun_schedule(name, "2026-01-02T03:00:00Z", downstream=True)
        self.assertEqual([x["schedule"] for x in d["downstream"]], [after])
        a = self.ax.list_schedule_backfills(after)["backfills"][0]
        self.assertEqual((a["id"], a["waits_for"][0]["schedule"], a["waits_for"][0]["rerun"]),
                         (d["downstream"][0]["id"], name, d["id"]))
        self.ax.delete_schedule(after)
        self.ax.delete_schedule(name)


if __name__ == "__main__":
    unittest.main()
