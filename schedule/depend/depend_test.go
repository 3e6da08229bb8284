package depend

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

func dagWith(deps ...apiv1.ScheduleDependency) *apiv1.DAGRequest {
	return &apiv1.DAGRequest{Nodes: []apiv1.DAGNodeSpec{{ID: "a"}, {ID: "b", DependsOnSchedules: deps}}}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name  string
		dep   apiv1.ScheduleDependency
		field string
	}{
		{"no schedule", apiv1.ScheduleDependency{Rule: task.GateSamePeriod}, "schedule"},
		{"unknown rule", apiv1.ScheduleDependency{Schedule: "up", Rule: "eventually"}, "rule"},
		{"max_age on same_period", apiv1.ScheduleDependency{Schedule: "up", Rule: task.GateSamePeriod, MaxAge: task.Duration(1)}, "max_age"},
		{"timeout on latest_success", apiv1.ScheduleDependency{Schedule: "up", Rule: task.GateLatestSuccess, Timeout: task.Duration(1e9)}, "timeout"},
		{"timeout too short", apiv1.ScheduleDependency{Schedule: "up", Rule: task.GateSamePeriod, Timeout: task.Duration(1)}, "timeout"},
		{"bad on_timeout", apiv1.ScheduleDependency{Schedule: "up", Rule: task.GateSamePeriod, OnTimeout: "retry"}, "on_timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check(dagWith(c.dep))
			var fe *task.FieldError
			if !errors.As(err, &fe) || fe.Field != "dag.nodes[1].depends_on_schedules[0]."+c.field {
				t.Errorf("Check: %v, want a field error naming %s", err, c.field)
			}
		})
	}
	dr := dagWith(apiv1.ScheduleDependency{Schedule: "up", Rule: task.GateSamePeriod})
	if err := Check(dr); err != nil {
		t.Fatal(err)
	}
	if d := dr.Nodes[1].DependsOnSchedules[0]; d.Timeout != task.Duration(DefaultTimeout) || d.OnTimeout != task.GateFail {
		t.Errorf("defaults: %+v", d)
	}
	plain, had := Strip(dr)
	if !had || plain.Nodes[1].DependsOnSchedules != nil || dr.Nodes[1].DependsOnSchedules == nil {
		t.Errorf("Strip: %v %+v; the original must keep its dependencies", had, plain.Nodes[1])
	}
}

func TestCheckUpstreams(t *testing.T) {
	on := func(name string, ups ...string) *apiv1.Schedule {
		var deps []apiv1.ScheduleDependency
		for _, u := range ups {
			deps = append(deps, apiv1.ScheduleDependency{Schedule: u, Rule: task.GateSamePeriod})
		}
		return &apiv1.Schedule{Name: name, DAG: dagWith(deps...)}
	}
	defs := map[string]*apiv1.Schedule{"a": on("a", "b"), "b": on("b", "c"), "c": on("c")}
	for _, c := range []struct {
		d    *apiv1.Schedule
		want string
	}{
		{on("x", "a"), ""},
		{on("x", "nope"), `no schedule named "nope"`},
		{on("x", "x"), "cycle: x -> x"},
		{on("c", "a"), "cycle: c -> a -> b -> c"}, // c created again, depending on a
		{&apiv1.Schedule{Name: "c", DependsOnSchedules: []apiv1.ScheduleDependency{{Schedule: "a"}}}, "cycle: c -> a -> b -> c"},
		{&apiv1.Schedule{Name: "t", DependsOnSchedules: []apiv1.ScheduleDependency{{Schedule: "gone"}}}, `no schedule named "gone"`},
	} {
		field := "dag.nodes[1].depends_on_schedules[0].schedule"
		if c.d.DAG == nil {
			field = "depends_on_schedules[0].schedule"
		}
		err := CheckUpstreams(c.d, defs)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.d.Name, err)
			}
			continue
		}
		var fe *task.FieldError
		if !errors.As(err, &fe) || fe.Field != field || !strings.Contains(fe.Msg, c.want) {
			t.Errorf("%s: %v, want %q naming the field", c.d.Name, err, c.want)
		}
	}
}

func TestDownstream(t *testing.T) {
	on := func(name string, ups ...string) *apiv1.Schedule {
		var deps []apiv1.ScheduleDependency
		for _, u := range ups {
			deps = append(deps, apiv1.ScheduleDependency{Schedule: u, Rule: task.GateSamePeriod})
		}
		return &apiv1.Schedule{Name: name, DAG: dagWith(deps...)}
	}
	// a -> b, c; d on b and c; e on d; f on nothing; g on f.
	defs := map[string]*apiv1.Schedule{"a": on("a"), "b": on("b", "a"), "c": on("c", "a"), "d": on("d", "c", "b"),
		"e": on("e", "d"), "f": on("f"), "g": on("g", "f")}
	for _, c := range []struct {
		root string
		want []string
	}{
		{"a", []string{"b", "c", "d", "e"}},
		{"c", []string{"d", "e"}},
		{"e", nil},
		{"f", []string{"g"}},
	} {
		got, err := Downstream(c.root, defs)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Downstream(%s): %v %v, want %v", c.root, got, err, c.want)
		}
	}
	// A cycle written around Create's check: refused with its path.
	defs["a"] = on("a", "e")
	_, err := Downstream("c", defs)
	var ae *apiv1.Error
	if !errors.As(err, &ae) || ae.Field != "downstream" || !strings.Contains(ae.Message, "cycle: ") {
		t.Fatalf("Downstream on a cycle: %v, want a 409 naming downstream and the path", err)
	}
	for _, hop := range []string{"a", "c", "d", "e"} {
		if !strings.Contains(ae.Message, hop) {
			t.Errorf("cycle message %q does not name %s", ae.Message, hop)
		}
	}
	t.Log(ae.Message)
}
