"""Tests of the client against a real server (run by httpapi's Go tests,
which start one and pass it in the environment; skipped without it):

AX_URL, AX_SUBMITTER (a tenant's submitter token), AX_OTHER (another
tenant's), AX_OPERATOR (an operator of every tenant), AX_DEAD (the id of a
dead letter of the submitter's tenant), AX_TAGS (JSON tags a pool has).
"""

import json
import os
import unittest

from axsched import APIError, Client

URL = os.environ.get("AX_URL", "")


@unittest.skipUnless(os.environ.get("AX_SUBMITTER"), "needs a server with tenants (httpapi's TestAPIContract)")
class ContractTest(unittest.TestCase):
    def setUp(self):
        self.sub = Client(URL, os.environ["AX_SUBMITTER"])
        self.other = Client(URL, os.environ["AX_OTHER"])
        self.ops = Client(URL, os.environ["AX_OPERATOR"])
        self.tags = json.loads(os.environ["AX_TAGS"])

    def test_submit_get_list_cancel(self):
        r = self.sub.submit({"type": "py.client", "tags": self.tags, "delay": "2m", "payload": {"n": 1}})
        self.assertEqual(r["state"], "PENDING")
        t = self.sub.get(r["id"])
        self.assertEqual((t["id"], t["type"], t["payload"]), (r["id"], "py.client", {"n": 1}))
        self.sub.submit({"type": "py.client", "tags": self.tags, "delay": "2m"})
        seen = [t["id"] for t in self.sub.iter_tasks(type="py.client", limit=1)]
        self.assertIn(r["id"], seen)
        self.assertEqual(len(seen), len(set(seen)))
        self.assertGreaterEqual(len(seen), 2)  # through the cursor, one a page
        c = self.ops.cancel(r["id"])
        self.assertEqual(c["state"], "CANCELED")
        self.assertEqual(self.sub.trail(r["id"])[-1]["to"], "CANCELED")

    def test_errors(self):
        with self.assertRaises(APIError) as e:
            self.sub.submit({"type": "x", "priority": 9})
        self.assertEqual((e.exception.status, e.exception.code, e.exception.field), (400, "invalid_argument", "priority"))
        r = self.sub.submit({"type": "py.client", "tags": self.tags, "delay": "2m"})
        with self.assertRaises(APIError) as e:
            self.other.get(r["id"])  # another tenant's task: not found
        self.assertEqual((e.exception.status, e.exception.code), (404, "not_found"))
        with self.assertRaises(APIError) as e:
            self.sub.cancel(r["id"])  # a submitter may not cancel
        self.assertEqual(e.exception.status, 403)
        with self.assertRaises(APIError) as e:
            Client(URL).get(r["id"])
        self.assertEqual((e.exception.status, e.exception.code), (401, "unauthenticated"))
        with self.assertRaises(APIError) as e:
            self.sub.list_tasks(typ="x")
        self.assertEqual(e.exception.field, "typ")

    def test_dlq_replay(self):
        dead = os.environ["AX_DEAD"]
        self.assertIn(dead, [t["id"] for t in self.sub.iter_dlq(type="py.poison")])
        self.ops.replay(dead)
        self.assertNotEqual(self.sub.get(dead)["state"], "FAILED")
        self.assertNotIn(dead, [t["id"] for t in self.sub.iter_dlq(type="py.poison")])
        self.assertEqual(self.ops.cancel(dead)["state"], "CANCELED")  # it runs nowhere: no worker claims it here


if __name__ == "__main__":
    unittest.main()
