package httpapi_test

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// schemaTypes names the Go type each object schema of openapi.json is the
// JSON form of: the server encodes answers from these types and decodes
// requests into them.
var schemaTypes = map[string]any{
	"Backfill": apiv1.Backfill{}, "BackfillList": apiv1.BackfillList{}, "BackfillRequest": apiv1.BackfillRequest{},
	"BackfillRun": apiv1.BackfillRun{}, "BatchCounts": apiv1.BatchCounts{}, "BatchCreate": apiv1.BatchCreate{},
	"BatchItem": apiv1.BatchItem{}, "BatchList": apiv1.BatchList{}, "BatchRejected": apiv1.BatchRejected{},
	"BatchResponse": apiv1.BatchResponse{}, "BatchStatus": apiv1.BatchStatus{}, "BulkCancelRequest": apiv1.BulkCancelRequest{},
	"BulkCancelResponse": apiv1.BulkCancelResponse{}, "CancelResponse": apiv1.CancelResponse{}, "Candidate": apiv1.Candidate{},
	"CapacityWindow": apiv1.CapacityWindow{}, "CostBudget": apiv1.CostBudget{}, "CostReport": apiv1.CostReport{},
	"CostRow": apiv1.CostRow{}, "DAGList": apiv1.DAGList{}, "DAGNodeSpec": apiv1.DAGNodeSpec{},
	"DAGNodeStatus": apiv1.DAGNodeStatus{}, "DAGRequest": apiv1.DAGRequest{}, "DAGStatus": apiv1.DAGStatus{},
	"DAGSummary": apiv1.DAGSummary{}, "DrainResponse": apiv1.DrainResponse{}, "Error": apiv1.ErrorBody{},
	"ErrorDetail": apiv1.Error{}, "Event": task.Event{}, "EventsResponse": apiv1.EventsResponse{},
	"Explanation": apiv1.Explanation{}, "GridCell": apiv1.GridCell{}, "GridPeriod": apiv1.GridPeriod{},
	"HistoryPool": apiv1.HistoryPool{}, "HistoryRegion": apiv1.HistoryRegion{}, "HistoryResponse": apiv1.HistoryResponse{},
	"HistorySample": apiv1.HistorySample{}, "Period": apiv1.Period{}, "PoolStatus": apiv1.PoolStatus{},
	"PriorityRequest": apiv1.PriorityRequest{}, "RegionOutcome": apiv1.RegionOutcome{}, "RegionStatus": apiv1.RegionStatus{},
	"RegionsResponse": apiv1.RegionsResponse{}, "RerunRequest": apiv1.RerunRequest{}, "RerunRef": apiv1.RerunRef{}, "RerunWait": apiv1.RerunWait{}, "ScheduleDeleted": apiv1.ScheduleDeleted{},
	"ScheduleDependency": apiv1.ScheduleDependency{}, "ScheduleGate": task.Gate{}, "ScheduleGrid": apiv1.ScheduleGrid{},
	"ScheduleList": apiv1.ScheduleList{}, "ScheduleRequest": apiv1.ScheduleRequest{}, "ScheduleStatus": apiv1.ScheduleStatus{},
	"StreamTicket": apiv1.StreamTicket{}, "SubmitResponse": apiv1.SubmitResponse{}, "Task": task.Task{},
	"TaskList": apiv1.TaskList{}, "TaskProgress": task.Progress{}, "TaskResult": apiv1.TaskResult{},
	"TaskSpec": task.Spec{}, "Trail": apiv1.TrailResponse{}, "Transition": task.Transition{},
	"WorkerClaimRequest": apiv1.WorkerClaimRequest{}, "WorkerClaimResponse": apiv1.WorkerClaimResponse{},
	"WorkerLease": apiv1.WorkerLease{}, "WorkerOutcome": apiv1.WorkerOutcome{}, "WorkerOutcomeResult": apiv1.WorkerOutcomeResult{},
	"WorkerProgress": apiv1.WorkerProgress{}, "WorkerRegister": apiv1.WorkerRegister{}, "WorkerRegistered": apiv1.WorkerRegistered{},
	"WorkerReport": apiv1.WorkerReport{}, "WorkerReportClaim": apiv1.WorkerReportClaim{},
	"WorkerReportResponse": apiv1.WorkerReportResponse{}, "WorkerStop": apiv1.WorkerStop{}, "WorkerTask": apiv1.WorkerTask{},
	// openapi-internal.json's.
	"HandOff": apiv1.HandOff{}, "HandOffBatch": apiv1.HandOffBatch{}, "HandOffBatchResponse": apiv1.HandOffBatchResponse{},
	"HandOffCommit": apiv1.HandOffCommit{}, "HandOffCommitResponse": apiv1.HandOffCommitResponse{}, "HandOffItem": apiv1.HandOffItem{},
	"HandOffResponse": apiv1.HandOffResponse{}, "HandOffStatus": apiv1.HandOffStatus{}, "HandOffStatusItem": apiv1.HandOffStatusItem{},
	"HandOffStatusResponse": apiv1.HandOffStatusResponse{}, "ScheduleEnqueue": apiv1.ScheduleEnqueue{},
	"ScheduleEnqueueResponse": apiv1.ScheduleEnqueueResponse{}, "ScheduledDAG": apiv1.ScheduledDAG{},
	"ScheduledDAGResponse": apiv1.ScheduledDAGResponse{}, "BatchEnd": apiv1.BatchEnd{}, "BatchEnds": apiv1.BatchEnds{},
	"BatchEndsResponse": apiv1.BatchEndsResponse{},
	// Both documents': the served document, bytes embedded as they are.
	"OpenAPIDocument": nil,
}

// schemaFieldsApart are the differences between a schema and its Go type
// that are meant: "+name" a property the type's MarshalJSON adds, "-name"
// a field of the type the public API neither shows nor takes.
var schemaFieldsApart = map[string][]string{
	// task.Task.MarshalJSON sends a result that is not UTF-8 text as
	// result_base64.
	"Task": {"+result_base64"},
	// A DAG node's parents' results, the batch a task belongs to and the
	// end of its schedule period are set by the server (hand-off carries
	// them); a public submit cannot set them.
	"TaskSpec": {"-parents", "-batch", "-schedule_end"},
}

// jsonFields are the names encoding/json gives t's fields, embedded
// structs' included.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && tag == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if tag == "" {
			tag = f.Name
		}
		out = append(out, tag)
	}
	return out
}

// TestOpenAPISchemasMatchTypes: every object schema of openapi.json lists
// exactly the JSON fields of the Go type the server encodes or decodes it
// with (schemaTypes; nil: none), but for the differences schemaFieldsApart
// names.
// A field added to an answer type and not to the spec fails here, though
// no test answer carries it (omitempty): a client generated from the spec
// would drop it.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	named := map[string]bool{}
	for _, file := range []string{"openapi.json", "openapi-internal.json"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Components struct {
				Schemas map[string]struct {
					Type       any                        `json:"type"`
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		for name, s := range doc.Components.Schemas {
			named[name] = true
			if s.Type != "object" {
				continue
			}
			v, ok := schemaTypes[name]
			if !ok {
				t.Errorf("%s: schema %s: no Go type named for it in schemaTypes", file, name)
			}
			if v == nil {
				continue
			}
			props := make([]string, 0, len(s.Properties))
			for p := range s.Properties {
				props = append(props, p)
			}
			missing, extra := fieldsApart(jsonFields(reflect.TypeOf(v)), props, schemaFieldsApart[name])
			if len(missing) > 0 {
				t.Errorf("%s: schema %s lacks %v, which %T has", file, name, missing, v)
			}
			if len(extra) > 0 {
				t.Errorf("%s: schema %s has %v, which %T has not", file, name, extra, v)
			}
		}
	}
	for name := range schemaTypes {
		if !named[name] {
			t.Errorf("schemaTypes names %s, which neither document has", name)
		}
	}
}

// fieldsApart compares a Go type's JSON fields with a schema's properties,
// after the meant differences (schemaFieldsApart): the fields the schema
// lacks, and the properties the type has not.
func fieldsApart(fields, props, meant []string) (missing, extra []string) {
	want := map[string]bool{}
	for _, f := range fields {
		want[f] = true
	}
	for _, d := range meant {
		want[d[1:]] = d[0] == '+'
	}
	for f, in := range want {
		if in && !slices.Contains(props, f) {
			missing = append(missing, f)
		}
	}
	for _, p := range props {
		if !want[p] {
			extra = append(extra, p)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return missing, extra
}

// TestJSONFields: jsonFields reads tags, skips "-" and unexported fields,
// and flattens an embedded struct, as encoding/json does.
func TestJSONFields(t *testing.T) {
	type inner struct {
		B string `json:"b,omitempty"`
	}
	type outer struct {
		A string `json:"a"`
		inner
		C      string `json:"-"`
		D      int
		hidden int
	}
	_ = outer{}.hidden
	if got := jsonFields(reflect.TypeOf(outer{})); !slices.Equal(got, []string{"a", "b", "D"}) {
		t.Errorf("jsonFields: %v", got)
	}
}

// TestFieldsApart: a field the schema lacks and a property the type has
// not are found; the meant differences are not.
func TestFieldsApart(t *testing.T) {
	missing, extra := fieldsApart([]string{"id", "held_by", "parents"}, []string{"id", "result_base64", "colour"}, []string{"+result_base64", "-parents"})
	if !slices.Equal(missing, []string{"held_by"}) || !slices.Equal(extra, []string{"colour"}) {
		t.Errorf("missing %v, extra %v; want [held_by], [colour]", missing, extra)
	}
}
