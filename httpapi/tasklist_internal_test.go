package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ax-sched/ax/task"
)

// TestListFilterTakesEveryState: GET /v1/tasks?state= accepts every value
// of openapi.json's State enum (in either case), and refuses any other
// naming the field state.
func TestListFilterTakesEveryState(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas struct {
				State struct{ Enum []task.State }
			}
		}
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	states := doc.Components.Schemas.State.Enum
	if len(states) == 0 || !strings.Contains(string(openAPI), `"$ref": "#/components/schemas/State"`) {
		t.Fatalf("openapi.json has no State enum the filter refers to: %v", states)
	}
	ops := Principal{Name: "ops", Role: RoleOperator}
	for _, st := range states {
		for _, v := range []string{string(st), strings.ToLower(string(st))} {
			q, err := parseTaskQuery("state="+v, ops)
			if err != nil || q.Filter.State != st {
				t.Errorf("state=%s: %v, filter %q", v, err, q.Filter.State)
			}
		}
	}
	_, err := parseTaskQuery("state=DONE", ops)
	if e := isClientError(t, "state=DONE", err); e.Field != "state" {
		t.Errorf("state=DONE: field %q", e.Field)
	}
}
