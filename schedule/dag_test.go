package schedule

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/httpapi"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/internal/fedtest/fedapi"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/task"
	"github.com/prometheus/client_golang/prometheus"
)

// dagFed is the harness with every region serving DAG runs (no reconciler:
// runs stay RUNNING with their roots released) and one scheduler, on gcp,
// starting DAG schedules' runs through its region's runs.
type dagFed struct {
	*fed
	runs  map[string]*dag.Runs
	sched *schedInstance
}

func newDAGFed(t *testing.T) *dagFed {
	f := &dagFed{fed: newFed(t), runs: map[string]*dag.Runs{}}
	for _, r := range fedtest.Regions {
		f.runs[r] = dag.New(f.R(r).Store.DAGs(), f.R(r).Node(), dag.Config{Region: r, Regions: fedtest.Regions, Logger: f.Log})
	}
	cli := f.Etcd.Client()
	s := New(cli, f.R(gcp).Node(), Config{Region: gcp, Regions: fedtest.Regions, ID: "sched-gcp", SessionTTL: testTTL,
		CallTimeout: 2 * time.Second, DAGs: f.runs[gcp], Logger: f.Log.With("scheduler", "sched-gcp")})
	f.sched = &schedInstance{id: "sched-gcp", region: gcp, s: s, cli: cli}
	for _, r := range fedtest.Regions {
		srv := f.R(r).Server()
		cfg := fedapi.Config(srv)
		cfg.DAGs, cfg.Registerer = f.runs[r], prometheus.NewRegistry()
		if r == gcp {
			cfg.Schedules = s
		}
		srv.Serve(httpapi.New(srv.Node, cfg))
	}
	return f
}

// scheduledRuns lists the runs of schedule name in region r, oldest first.
func (f *dagFed) scheduledRuns(r, name string) []*apiv1.DAGStatus {
	f.T.Helper()
	ctx := fedtest.Ctx(f.T)
	list, _, err := f.runs[r].List(ctx, apiv1.DAGFilter{Limit: 200})
	if err != nil {
		f.T.Fatal(err)
	}
	var out []*apiv1.DAGStatus
	for i := len(list) - 1; i >= 0; i-- {
		st, err := f.runs[r].Status(ctx, list[i].ID, 0)
		if err != nil {
			f.T.Fatal(err)
		}
		if st.Schedule == name {
			out = append(out, st)
		}
	}
	return out
}

func diamond(typ string) spec {
	node := func(id string, deps ...string) spec {
		return spec{"id": id, "depends_on": deps, "task": spec{"type": typ,
			"payload": spec{"node": id, "from": "{{period_start}}", "to": "{{period_end}}"}}}
	}
	return spec{"name": "warehouse", "nodes": []spec{node("extract"), node("clean", "extract"), node("stats", "extract"), node("load", "clean", "stats")}}
}

// A DAG schedule homed in another region than its leader's starts one run
// per slot there, under the slot's derived id, with the slot's period on the
// run and in its tasks' payloads; overlap forbid holds while a run is
// RUNNING; bad DAGs are refused naming the field.
func TestScheduleStartsDAGRuns(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	f := newDAGFed(t)
	f.sched.Start(t)
	fedtest.Eventually(t, 10*time.Second, "gcp leads", f.sched.s.Leading)

	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct {
			body  spec
			field string
		}{
			{spec{"name": "both", "cron": "@every 1s", "task": spec{"type": "x"}, "dag": diamond("x")}, "dag"},
			{spec{"name": "cycle", "cron": "@every 1s", "dag": spec{"nodes": []spec{
				{"id": "a", "depends_on": []string{"b"}, "task": spec{"type": "x"}},
				{"id": "b", "depends_on": []string{"a"}, "task": spec{"type": "x"}}}}}, "dag.nodes"},
			{spec{"name": "unknown", "cron": "@every 1s", "dag": spec{"nodes": []spec{{"id": "a", "task": spec{"type": "x"}}}, "when": 1}}, "dag"},
			{spec{"name": "runat", "cron": "@every 1s", "dag": spec{"nodes": []spec{{"id": "a", "task": spec{"type": "x", "run_at": time.Now()}}}}}, "dag.nodes[0].task.run_at"},
			{spec{"name": "tenant", "cron": "@every 1s", "dag": spec{"tenant": "globex", "nodes": []spec{{"id": "a", "task": spec{"type": "x"}}}}}, "dag.tenant"},
		} {
			tok := tokOperator
			if c.field == "dag.tenant" {
				tok = tokGlobexOps
				c.body["dag"].(spec)["tenant"] = "acme"
			}
			rep := f.createSchedule(gcp, tok, c.body)
			var e struct{ Error apiv1.Error }
			_ = json.Unmarshal(rep.Body, &e)
			if rep.Status/100 != 4 || e.Error.Field != c.field {
				t.Errorf("%s: %d field %q (%s), want 4xx field %s", c.body["name"], rep.Status, e.Error.Field, rep.Body, c.field)
			}
		}
	})

	const name, typ = "nightly", "sched.dag"
	f.createSchedule(gcp, tokOperator, spec{"name": name, "cron": "@every 1s", "home_region": aws,
		"dag": diamond(typ)}).Want(t, http.StatusCreated)
	f.createSchedule(gcp, tokOperator, spec{"name": "single", "cron": "@every 1s", "home_region": aws, "overlap": "forbid",
		"dag": diamond(typ + ".single")}).Want(t, http.StatusCreated)
	var runs []*apiv1.DAGStatus
	fedtest.Eventually(t, 15*time.Second, "3 runs of the DAG schedule in aws", func() bool {
		runs = f.scheduledRuns(aws, name)
		return len(runs) >= 3
	})
	for _, r := range []string{gcp, az} {
		if got := f.scheduledRuns(r, name); len(got) > 0 {
			t.Errorf("%d runs in %s, want all in the home region", len(got), r)
		}
	}
	seen := map[string]bool{}
	for _, run := range runs {
		if run.Period == nil || run.Period.End.Sub(run.Period.Start) != time.Second {
			t.Fatalf("run %s: period %+v, want one second", run.ID, run.Period)
		}
		if want := f.slotID("default", name, run.Period.Start, aws); run.ID != want {
			t.Errorf("run %s is not the derived id of its slot %v (%s)", run.ID, run.Period.Start, want)
		}
		if seen[run.ID] {
			t.Errorf("run %s twice", run.ID)
		}
		seen[run.ID] = true
		root := run.Nodes[0]
		if root.ID != "extract" || root.State != task.NodeReleased {
			t.Fatalf("run %s: first node %+v, want extract RELEASED", run.ID, root)
		}
		tk, err := f.R(aws).Store.Tasks().Get(context.Background(), root.TaskID)
		if err != nil {
			t.Fatalf("root task of %s: %v", run.ID, err)
		}
		want := `"from":"` + run.Period.Start.UTC().Format(time.RFC3339) + `","node":"extract","to":"` + run.Period.End.UTC().Format(time.RFC3339) + `"`
		if !strings.Contains(string(tk.Spec().Payload), want) {
			t.Errorf("root task of %s: payload %s, want the period %s", run.ID, tk.Spec().Payload, want)
		}
	}
	st := f.Call(http.MethodGet, f.R(gcp).URL()+"/v1/schedules/"+name, tokOperator, nil).Want(t, http.StatusOK)
	var got apiv1.ScheduleStatus
	if err := json.Unmarshal(st.Body, &got); err != nil || got.LastPeriod == nil || got.DAG == nil || got.Task != nil {
		t.Errorf("GET schedule: %s (%v), want its dag and last_period", st.Body, err)
	}

	// overlap forbid: the first run stays RUNNING (no reconciler), so no
	// other slot starts one.
	if got := f.scheduledRuns(aws, "single"); len(got) != 1 {
		t.Errorf("%d runs of the forbid schedule, want 1", len(got))
	}
	if fires(f.sched, "single", OutcomeSkippedOverlap) < 1 {
		t.Error("no slot of the forbid schedule skipped for overlap")
	}
}
