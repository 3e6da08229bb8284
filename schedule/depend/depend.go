package depend

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// Bounds of a same_period dependency's timeout.
const (
	DefaultTimeout = 24 * time.Hour
	MaxTimeout     = 30 * 24 * time.Hour
)

func fieldError(field, msg string) error { return &task.FieldError{Field: field, Msg: msg} }

// Check validates the depends_on_schedules of a DAG's nodes
// (their shape: Create checks the names against the tenant's schedules)
// and fills in the defaults.
func Check(dr *apiv1.DAGRequest) error {
	for i := range dr.Nodes {
		if err := CheckList(fmt.Sprintf("dag.nodes[%d].depends_on_schedules", i), dr.Nodes[i].DependsOnSchedules); err != nil {
			return err
		}
	}
	return nil
}

// CheckList validates one list of dependencies, whose field is field
// (errors name field[j].<key>), and fills in the defaults.
func CheckList(field string, deps []apiv1.ScheduleDependency) error {
	seen := map[string]bool{}
	for j := range deps {
		d := &deps[j]
		f := fmt.Sprintf("%s[%d].", field, j)
		switch {
		case d.Schedule == "":
			return fieldError(f+"schedule", "is required: the name of a schedule of the same tenant")
		case seen[d.Schedule]:
			return fieldError(f+"schedule", fmt.Sprintf("%q is listed twice for this node", d.Schedule))
		}
		seen[d.Schedule] = true
		switch d.Rule {
		case task.GateSamePeriod:
			if d.MaxAge != 0 {
				return fieldError(f+"max_age", "only with rule latest_success")
			}
		case task.GateLatestSuccess:
			if d.MaxAge < 0 {
				return fieldError(f+"max_age", "must not be negative")
			}
			if d.Timeout != 0 {
				return fieldError(f+"timeout", "only with rule same_period: latest_success never waits")
			}
		default:
			return fieldError(f+"rule", "must be same_period or latest_success")
		}
		if d.Rule == task.GateSamePeriod {
			switch {
			case d.Timeout == 0:
				d.Timeout = task.Duration(DefaultTimeout)
			case d.Timeout < task.Duration(time.Second) || d.Timeout > task.Duration(MaxTimeout):
				return fieldError(f+"timeout", fmt.Sprintf("must be between 1s and %v", MaxTimeout))
			}
		}
		switch d.OnTimeout {
		case "":
			d.OnTimeout = task.GateFail
		case task.GateFail, task.GateSkip:
		default:
			return fieldError(f+"on_timeout", "must be fail or skip")
		}
	}
	return nil
}

// list is one list of dependencies of a schedule and its field.
type list struct {
	field string
	deps  []apiv1.ScheduleDependency
}

// lists are d's lists of dependencies: its own (a single-task schedule's),
// then each node's.
func lists(d *apiv1.Schedule) []list {
	out := []list{{"depends_on_schedules", d.DependsOnSchedules}}
	if d.DAG != nil {
		for i, nd := range d.DAG.Nodes {
			out = append(out, list{fmt.Sprintf("dag.nodes[%d].depends_on_schedules", i), nd.DependsOnSchedules})
		}
	}
	return out
}

// Upstreams lists the schedules d depends on.
func Upstreams(d *apiv1.Schedule) []string {
	var out []string
	for _, l := range lists(d) {
		for _, dep := range l.deps {
			if !slices.Contains(out, dep.Schedule) {
				out = append(out, dep.Schedule)
			}
		}
	}
	return out
}

// CheckUpstreams refuses a dependency of d on a schedule its tenant does
// not have (defs: the tenant's schedules) and a cycle through d, naming
// the dependency's field and the cycle's path.
func CheckUpstreams(d *apiv1.Schedule, defs map[string]*apiv1.Schedule) error {
	for _, l := range lists(d) {
		for j, dep := range l.deps {
			f := fmt.Sprintf("%s[%d].schedule", l.field, j)
			if dep.Schedule == d.Name {
				return fieldError(f, fmt.Sprintf("cycle: %s -> %s", d.Name, d.Name))
			}
			if defs[dep.Schedule] == nil {
				return fieldError(f, fmt.Sprintf("no schedule named %q", dep.Schedule))
			}
			if path := pathTo(dep.Schedule, d.Name, defs, map[string]bool{}); path != nil {
				return fieldError(f, "cycle: "+strings.Join(append([]string{d.Name}, path...), " -> "))
			}
		}
	}
	return nil
}

// pathTo returns a dependency path from one schedule to another (both
// included), or nil.
func pathTo(from, to string, defs map[string]*apiv1.Schedule, seen map[string]bool) []string {
	if from == to {
		return []string{to}
	}
	if seen[from] || defs[from] == nil {
		return nil
	}
	seen[from] = true
	for _, up := range Upstreams(defs[from]) {
		if p := pathTo(up, to, defs, seen); p != nil {
			return append([]string{from}, p...)
		}
	}
	return nil
}

// Strip returns dr with its nodes' depends_on_schedules left
// out (what the DAG runs check and start), and whether it had any.
func Strip(dr *apiv1.DAGRequest) (apiv1.DAGRequest, bool) {
	out := *dr
	out.Nodes = slices.Clone(dr.Nodes)
	had := false
	for i := range out.Nodes {
		had = had || len(out.Nodes[i].DependsOnSchedules) > 0
		out.Nodes[i].DependsOnSchedules = nil
	}
	return out, had
}

// Downstream lists the schedules among defs (a tenant's, by name) that
// depend on root, directly or through others, each after every one of its
// upstreams that is listed (root itself is not listed). A cycle among root
// and them, which Create refuses but definitions written around it could
// hold, is a 409 failed_precondition naming field downstream and the
// cycle's path: a rerun along it would wait for itself.
func Downstream(root string, defs map[string]*apiv1.Schedule) ([]string, error) {
	dependants := map[string][]string{}
	names := make([]string, 0, len(defs))
	for name := range defs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, up := range Upstreams(defs[name]) {
			dependants[up] = append(dependants[up], name)
		}
	}
	in := map[string]bool{root: true}
	for queue := []string{root}; len(queue) > 0; queue = queue[1:] {
		for _, d := range dependants[queue[0]] {
			if !in[d] {
				in[d] = true
				queue = append(queue, d)
			}
		}
	}
	o := orderer{defs: defs, in: in, state: map[string]int{}}
	for _, name := range append([]string{root}, names...) {
		if in[name] {
			if err := o.visit(name); err != nil {
				return nil, err
			}
		}
	}
	return slices.DeleteFunc(o.out, func(n string) bool { return n == root }), nil
}

// orderer sorts a set of schedules upstreams first (depth first).
type orderer struct {
	defs  map[string]*apiv1.Schedule
	in    map[string]bool
	state map[string]int // 1 on the path being walked, 2 listed
	path  []string
	out   []string
}

func (o *orderer) visit(name string) error {
	switch o.state[name] {
	case 2:
		return nil
	case 1:
		i := slices.Index(o.path, name)
		cycle := append(slices.Clone(o.path[i:]), name)
		return &apiv1.Error{Code: apiv1.CodeFailedPrecond, Field: "downstream",
			Message: "cycle: " + strings.Join(cycle, " -> ") + ": a downstream rerun along it would wait for itself"}
	}
	o.state[name] = 1
	o.path = append(o.path, name)
	if d := o.defs[name]; d != nil {
		for _, up := range Upstreams(d) {
			if o.in[up] {
				if err := o.visit(up); err != nil {
					return err
				}
			}
		}
	}
	o.path = o.path[:len(o.path)-1]
	o.state[name] = 2
	o.out = append(o.out, name)
	return nil
}
