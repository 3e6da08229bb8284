package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// Two regions, auth on: a task submitted in us-east-1 for eu-west-1 is
// handed off with the cluster token, runs on eu-west-1's worker and is
// readable by its tenant through either region; the other tenant gets 404
// and a request without a token 401. The workers run without the cluster
// token (they never need it). Once with one etcd for everything,
// once with a regional etcd per region and two servers in each; then the
// global etcd goes silent and /readyz and the gauge say so (etcdOutageIsReported).
func TestFederationHandedOffTaskSucceedsWithAuth(t *testing.T) {
	for _, c := range []struct {
		name string
		opts fedOpts
	}{
		{"one etcd", fedOpts{}},
		{"regional etcds, two servers each", fedOpts{ownEtcd: true, servers: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fed := newFederation(t, c.opts)
			handedOffSucceeds(t, fed)
			coldTaskThroughAPI(t, fed)
			if !c.opts.ownEtcd {
				dashboardInBrowser(t, fed) // one browser is enough
				groupedSubmits(t, fed)
			}
			etcdOutageIsReported(t, fed, !c.opts.ownEtcd)
		})
	}
}

func handedOffSucceeds(t *testing.T, fed *federation) {
	h := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
		"type": "sleep", "payload": map[string]int{"ms": 10}})
	for _, via := range []string{h.Home, h.Region} {
		tk := fed.waitState(via, tokSubmitterA, h.ID, task.Success, 20*time.Second)
		if tk.Tenant != "team-a" || tk.HeldBy != "eu-west-1" || tk.Result != "slept 10ms" {
			t.Fatalf("via %s: task %+v", via, tk)
		}
		if _, code := fed.getTask(via, tokSubmitterB, h.ID); code != http.StatusNotFound {
			t.Fatalf("via %s: the other tenant's GET answered %d, want 404", via, code)
		}
		if _, code := fed.getTask(via, "", h.ID); code != http.StatusUnauthorized {
			t.Fatalf("via %s: GET without a token answered %d, want 401", via, code)
		}
	}
	// `ax regions` (the real CLI) asked of either region's server names
	// each region's provider, its own and the one published by the other.
	for _, from := range []string{"us-east-1", "eu-west-1"} {
		for _, r := range []string{"us-east-1", "eu-west-1"} {
			if row := regionsRow(t, fed, from, r, "cpu"); row == nil || row["PROVIDER"] != providerOf(r) {
				t.Fatalf("ax regions via %s: %s's row %v, want provider %s", from, r, row, providerOf(r))
			}
		}
	}
	rec := fed.region("eu-west-1").task(t, h.ID)
	if rec.Worker != "eu-west-1-cpu-w1" || rec.State != task.Success {
		t.Fatalf("eu-west-1's record: %+v", rec)
	}
	if home := fed.region("us-east-1").task(t, h.ID); home.State != task.HandedOff || home.HandedOffTo != "eu-west-1" {
		t.Fatalf("us-east-1's record: %+v", home)
	}
}

// coldTaskThroughAPI: a task submitted with a delay beyond the servers'
// cold horizon (task.cold_horizon, 5m by default) waits in the cold tier
// with no record; read through either region it is PENDING with its due
// time, and a cancel through the API cancels it.
func coldTaskThroughAPI(t *testing.T, fed *federation) {
	home := fed.region("us-east-1")
	cold := func() int {
		n, err := home.store.Tasks().ColdWaiting(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := cold()
	id, _ := fed.submit("us-east-1", tokSubmitterA, map[string]any{"type": "noop", "delay": "2h"})
	if cold() != before+1 {
		t.Fatalf("a task due in 2h is not in us-east-1's cold tier")
	}
	for _, via := range []string{"eu-west-1", "us-east-1"} {
		tk, code := fed.getTask(via, tokSubmitterA, id)
		if code != 200 || tk.State != task.Pending || tk.DueAt == nil || time.Until(*tk.DueAt) < time.Hour {
			t.Fatalf("via %s: %d %+v, want PENDING due in 2h", via, code, tk)
		}
	}
	code, body := fed.call("us-east-1", tokOperatorA, http.MethodPost, "/v1/tasks/"+id+"/cancel", nil)
	if code != 200 {
		t.Fatalf("cancel: %d %s", code, body)
	}
	if tk, _ := fed.getTask("us-east-1", tokSubmitterA, id); tk.State != task.Canceled {
		t.Fatalf("after cancel: %s", tk.State)
	}
	if cold() != before {
		t.Fatalf("the cancelled task is still in the cold tier")
	}
}
