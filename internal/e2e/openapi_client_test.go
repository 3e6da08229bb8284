package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/e2e/apiclient"
)

// clientRoundTrip drives every public route through the client oapi-codegen
// generated from the spec (package apiclient) and reads the typed answers.
func clientRoundTrip(t *testing.T, fed *federation, region string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	as := func(token string) *apiclient.ClientWithResponses {
		c, err := apiclient.NewClientWithResponses(fed.server(region).api, apiclient.WithHTTPClient(fed.http),
			apiclient.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
				r.Header.Set("Authorization", "Bearer "+fed.token(token))
				return nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	sub, ops := as(tokSubmitterA), as(tokOperatorA)
	check := func(what string, status int, err error, want int, typed bool) {
		t.Helper()
		if err != nil || status != want || !typed {
			t.Fatalf("%s: %d %v (typed answer: %v), want %d", what, status, err, typed, want)
		}
	}

	key := "client-1"
	created, err := sub.SubmitTaskWithResponse(ctx, apiclient.TaskSpec{Type: "noop", IdempotencyKey: &key, Tags: &map[string]string{"class": "cpu"}})
	check("submitTask", created.StatusCode(), err, 201, created.JSON201 != nil)
	id := created.JSON201.Id
	if created.JSON201.State == "" || created.JSON201.Region == "" {
		t.Fatalf("submitTask: %+v", created.JSON201)
	}
	fed.waitState(region, tokSubmitterA, id, "SUCCESS", 30*time.Second)
	got, err := sub.GetTaskWithResponse(ctx, id)
	check("getTask", got.StatusCode(), err, 200, got.JSON200 != nil)
	if tk := got.JSON200; tk.Id != id || tk.State != apiclient.StateSUCCESS || tk.Type != "noop" || tk.Attempts != 1 || tk.FinishedAt == nil || tk.Tenant != "team-a" {
		t.Fatalf("getTask: %+v", tk)
	}
	missing, err := sub.GetTaskWithResponse(ctx, "nope")
	check("getTask 404", missing.StatusCode(), err, 404, missing.JSON404 != nil && missing.JSON404.Error.Code == "not_found")
	state := apiclient.StateSUCCESS
	limit := 10
	list, err := sub.ListTasksWithResponse(ctx, &apiclient.ListTasksParams{State: &state, Limit: &limit})
	check("listTasks", list.StatusCode(), err, 200, list.JSON200 != nil && len(list.JSON200.Tasks) > 0)
	trail, err := sub.GetTaskTrailWithResponse(ctx, id)
	check("getTaskTrail", trail.StatusCode(), err, 200, trail.JSON200 != nil && len(trail.JSON200.Transitions) > 0)
	resWait := "5s"
	res, err := sub.GetTaskResultWithResponse(ctx, id, &apiclient.GetTaskResultParams{Wait: &resWait})
	check("getTaskResult", res.StatusCode(), err, 200, res.JSON200 != nil && res.JSON200.Done && res.JSON200.State == apiclient.StateSUCCESS)
	batch, err := sub.SubmitTasksWithResponse(ctx, apiclient.SubmitTasksJSONRequestBody{Tasks: []apiclient.TaskSpec{{Type: "noop"}}})
	check("submitTasks", batch.StatusCode(), err, 200, batch.JSON200 != nil && batch.JSON200.Accepted == 1)

	delay := "1h"
	later, err := sub.SubmitTaskWithResponse(ctx, apiclient.TaskSpec{Type: "noop", Delay: &delay})
	check("submitTask delayed", later.StatusCode(), err, 201, later.JSON201 != nil)
	pr, err := ops.SetTaskPriorityWithResponse(ctx, later.JSON201.Id, apiclient.SetTaskPriorityJSONRequestBody{Priority: 3})
	check("setTaskPriority", pr.StatusCode(), err, 200, pr.JSON200 != nil && pr.JSON200.Priority == 3)
	cn, err := ops.CancelTaskWithResponse(ctx, later.JSON201.Id)
	check("cancelTask", cn.StatusCode(), err, 200, cn.JSON200 != nil && cn.JSON200.State == apiclient.StateCANCELED)
	rp, err := ops.ReplayTaskWithResponse(ctx, id)
	check("replayTask of a success", rp.StatusCode(), err, 409, rp.JSON409 != nil)
	typ := "never.submitted"
	bulk, err := ops.CancelTasksWithResponse(ctx, apiclient.CancelTasksJSONRequestBody{Type: &typ})
	check("cancelTasks", bulk.StatusCode(), err, 200, bulk.JSON200 != nil && bulk.JSON200.Canceled == 0)
	dlq, err := ops.ListDeadLettersWithResponse(ctx, &apiclient.ListDeadLettersParams{})
	check("listDeadLetters", dlq.StatusCode(), err, 200, dlq.JSON200 != nil)
	cost, err := ops.GetCostReportWithResponse(ctx, &apiclient.GetCostReportParams{})
	check("getCostReport", cost.StatusCode(), err, 200, cost.JSON200 != nil)

	regions, err := sub.ListRegionsWithResponse(ctx)
	check("listRegions", regions.StatusCode(), err, 200, regions.JSON200 != nil && len(regions.JSON200.Regions) == 2)
	minutes := 5
	hist, err := sub.GetHistoryWithResponse(ctx, &apiclient.GetHistoryParams{Minutes: &minutes})
	check("getHistory", hist.StatusCode(), err, 200, hist.JSON200 != nil && hist.JSON200.EverySeconds == 15)
	ex, err := sub.ExplainPlacementWithResponse(ctx, apiclient.TaskSpec{Type: "noop"})
	check("explainPlacement", ex.StatusCode(), err, 200, ex.JSON200 != nil && ex.JSON200.Outcome == "PLACED" && ex.JSON200.Chosen != nil)
	wait := "0s"
	evs, err := sub.ListEventsWithResponse(ctx, &apiclient.ListEventsParams{Region: &region, Wait: &wait})
	check("listEvents", evs.StatusCode(), err, 200, evs.JSON200 != nil && evs.JSON200.Region == region)
	tk, err := sub.CreateStreamTicketWithResponse(ctx)
	check("createStreamTicket", tk.StatusCode(), err, 201, tk.JSON201 != nil && tk.JSON201.Ticket != "" && !tk.JSON201.ExpiresAt.IsZero())
	spec, err := sub.GetOpenAPIWithResponse(ctx)
	check("getOpenAPI", spec.StatusCode(), err, 200, spec.JSON200 != nil && strings.HasPrefix(spec.JSON200.Openapi, "3.") && spec.JSON200.Paths["/v1/tasks"] != nil)

	name := "client"
	dag, err := sub.CreateDAGWithResponse(ctx, apiclient.DAGRequest{Name: &name, Nodes: []apiclient.DAGNodeSpec{
		{Id: "a", Task: apiclient.TaskSpec{Type: "noop", Delay: &delay}}}})
	check("createDAG", dag.StatusCode(), err, 201, dag.JSON201 != nil && len(dag.JSON201.Nodes) == 1)
	dags, err := sub.ListDAGsWithResponse(ctx, &apiclient.ListDAGsParams{})
	check("listDAGs", dags.StatusCode(), err, 200, dags.JSON200 != nil && len(dags.JSON200.Runs) > 0)
	gd, err := sub.GetDAGWithResponse(ctx, dag.JSON201.Id)
	check("getDAG", gd.StatusCode(), err, 200, gd.JSON200 != nil && gd.JSON200.State == apiclient.DAGStateRUNNING)
	cd, err := ops.CancelDAGWithResponse(ctx, dag.JSON201.Id)
	check("cancelDAG", cd.StatusCode(), err, 200, cd.JSON200 != nil)

	sc, err := ops.CreateScheduleWithResponse(ctx, apiclient.ScheduleRequest{Name: "client-nightly", Cron: "0 0 2 * * *", Task: &apiclient.TaskSpec{Type: "noop"}})
	check("createSchedule", sc.StatusCode(), err, 201, sc.JSON201 != nil && sc.JSON201.Name == "client-nightly" && sc.JSON201.NextSlot != nil)
	scs, err := ops.ListSchedulesWithResponse(ctx, &apiclient.ListSchedulesParams{})
	check("listSchedules", scs.StatusCode(), err, 200, scs.JSON200 != nil && len(scs.JSON200.Schedules) > 0)
	gs, err := ops.GetScheduleWithResponse(ctx, "client-nightly", &apiclient.GetScheduleParams{})
	check("getSchedule", gs.StatusCode(), err, 200, gs.JSON200 != nil)
	ps, err := ops.PauseScheduleWithResponse(ctx, "client-nightly", &apiclient.PauseScheduleParams{})
	check("pauseSchedule", ps.StatusCode(), err, 200, ps.JSON200 != nil && ps.JSON200.Paused)
	rs, err := ops.ResumeScheduleWithResponse(ctx, "client-nightly", &apiclient.ResumeScheduleParams{})
	check("resumeSchedule", rs.StatusCode(), err, 200, rs.JSON200 != nil && !rs.JSON200.Paused)
	ds, err := ops.DeleteScheduleWithResponse(ctx, "client-nightly", &apiclient.DeleteScheduleParams{})
	check("deleteSchedule", ds.StatusCode(), err, 200, ds.JSON200 != nil && ds.JSON200.Deleted)

	bt, err := sub.CreateBatchWithResponse(ctx, apiclient.CreateBatchJSONRequestBody{Tasks: []apiclient.TaskSpec{{Type: "noop", Delay: &delay}},
		OnComplete: &apiclient.TaskSpec{Type: "noop"}})
	check("createBatch", bt.StatusCode(), err, 201, bt.JSON201 != nil && bt.JSON201.Counts.Total == 1 && bt.JSON201.OnCompleteId != nil)
	bts, err := sub.ListBatchesWithResponse(ctx, &apiclient.ListBatchesParams{})
	check("listBatches", bts.StatusCode(), err, 200, bts.JSON200 != nil && len(bts.JSON200.Batches) > 0)
	gb, err := sub.GetBatchWithResponse(ctx, bt.JSON201.Id)
	check("getBatch", gb.StatusCode(), err, 200, gb.JSON200 != nil && gb.JSON200.State == apiclient.BatchStatusStateRUNNING)
	cb, err := ops.CancelBatchWithResponse(ctx, bt.JSON201.Id)
	check("cancelBatch", cb.StatusCode(), err, 200, cb.JSON200 != nil)
	nb, err := sub.CreateBatchWithResponse(ctx, apiclient.CreateBatchJSONRequestBody{Tasks: []apiclient.TaskSpec{}})
	check("createBatch of no task", nb.StatusCode(), err, 400, nb.JSON400 != nil && nb.JSON400.Error.Field != nil && *nb.JSON400.Error.Field == "tasks")

	dr, err := as(tokAdmin).DrainRegionWithResponse(ctx, "eu-west-1", &apiclient.DrainRegionParams{})
	check("drainRegion", dr.StatusCode(), err, 200, dr.JSON200 != nil && dr.JSON200.Region == "eu-west-1")
}
