package dag

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Reasons a node settles with besides its task's own.
const (
	reasonUpstreamSkipped = "UPSTREAM_SKIPPED"   // all_success with a SKIPPED upstream
	reasonNoneFailed      = "NO_UPSTREAM_FAILED" // one_failed, and nothing failed
	reasonInvalidSpec     = "INVALID_SPEC"       // the spec no longer validates at release
)

var (
	// Node ids are DNS-label-like; _ is allowed (Airflow habits).
	nodeIDRe  = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$`)
	dagNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$`)
	tenantRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) // as queue's spec tenant
)

func nodeField(i int, rest string) string {
	if rest == "" {
		return fmt.Sprintf("nodes[%d]", i)
	}
	return fmt.Sprintf("nodes[%d].%s", i, rest)
}

// prefixed moves a spec's FieldError under nodes[i].task.
func prefixed(i int, err error) error {
	var fe *task.FieldError
	if errors.As(err, &fe) {
		return fe.Under(nodeField(i, "task"))
	}
	return err
}

// define validates a request (tenant already settled) into a definition
// with its id and derived task ids. Errors are *task.FieldError naming the
// field: nodes[i].id, nodes[i].depends_on[j], nodes[i].task.<field>, and
// nodes for a cycle, whose message walks it: "cycle: a -> b -> a" (x -> y:
// y depends on x).
func (r *Runs) define(req *apiv1.DAGRequest, now time.Time) (*queue.DAGDef, error) {
	def, err := r.validate(req, now)
	if err != nil {
		return nil, err
	}
	return def, assignIDs(def, r.dags.NewID(rand.IntN(r.dags.Options().Shards), now))
}

// Check validates a request (tenant already settled) as Create would,
// storing nothing; its errors are define's.
func (r *Runs) Check(req *apiv1.DAGRequest) error {
	_, err := r.validate(req, r.cfg.Now())
	return err
}

// validate is define without the ids.
func (r *Runs) validate(req *apiv1.DAGRequest, now time.Time) (*queue.DAGDef, error) {
	if req.Name != "" && !dagNameRe.MatchString(req.Name) {
		return nil, &task.FieldError{Field: "name", Msg: "1–128 letters, digits and _ . : / - only"}
	}
	tenant := req.Tenant
	if tenant == "" {
		tenant = "default"
	} else if !tenantRe.MatchString(tenant) {
		return nil, &task.FieldError{Field: "tenant", Msg: "letters, digits, _ . - only (at most 64)"}
	}
	switch {
	case len(req.Nodes) == 0:
		return nil, &task.FieldError{Field: "nodes", Msg: "a DAG needs at least one node"}
	case len(req.Nodes) > apiv1.MaxDAGNodes:
		return nil, &task.FieldError{Field: "nodes", Msg: fmt.Sprintf("at most %d nodes", apiv1.MaxDAGNodes)}
	}
	def := &queue.DAGDef{Name: req.Name, Tenant: tenant, Nodes: make([]queue.DAGNodeDef, len(req.Nodes))}
	index := make(map[string]int, len(req.Nodes))
	for i, nd := range req.Nodes {
		switch {
		case nd.ID == "":
			return nil, &task.FieldError{Field: nodeField(i, "id"), Msg: "is required"}
		case !nodeIDRe.MatchString(nd.ID):
			return nil, &task.FieldError{Field: nodeField(i, "id"), Msg: fmt.Sprintf("node id %q: 1–63 lowercase letters, digits, - and _, starting and ending with a letter or digit", nd.ID)}
		}
		if j, dup := index[nd.ID]; dup {
			return nil, &task.FieldError{Field: nodeField(i, "id"), Msg: fmt.Sprintf("duplicate node id %q (also nodes[%d])", nd.ID, j)}
		}
		index[nd.ID] = i
		rule := nd.TriggerRule
		switch rule {
		case "":
			rule = task.AllSuccess
		case task.AllSuccess, task.AllDone:
		case task.OneFailed:
			if len(nd.DependsOn) == 0 {
				return nil, &task.FieldError{Field: nodeField(i, "trigger_rule"), Msg: "one_failed needs at least one depends_on"}
			}
		default:
			return nil, &task.FieldError{Field: nodeField(i, "trigger_rule"), Msg: fmt.Sprintf("%q: must be all_success, all_done or one_failed", rule)}
		}
		if len(nd.DependsOnSchedules) > 0 {
			return nil, &task.FieldError{Field: nodeField(i, "depends_on_schedules"), Msg: "only in a schedule's DAG (POST /v1/schedules): a run started by hand has no period"}
		}
		if t := strings.TrimSpace(string(nd.Task)); t == "" || t == "null" {
			return nil, &task.FieldError{Field: nodeField(i, "task"), Msg: "is required: the node's task spec"}
		}
		sp, err := task.DecodeSpec(nd.Task)
		if err != nil {
			return nil, prefixed(i, err)
		}
		if sp.Tenant != "" && sp.Tenant != tenant {
			return nil, &task.FieldError{Field: nodeField(i, "task.tenant"), Msg: fmt.Sprintf("must be the DAG's tenant %q (or left out)", tenant)}
		}
		if err := sp.RefuseInternal(); err != nil {
			return nil, prefixed(i, err)
		}
		if key, f := sp.Key(); key != "" {
			return nil, &task.FieldError{Field: nodeField(i, "task."+f), Msg: "not allowed in a DAG node: its task id is derived from the run and the node"}
		}
		sp.Tenant = tenant
		if err := sp.Normalize(r.cfg.Defaults, now); err != nil {
			return nil, prefixed(i, err)
		}
		if err := r.knownRegions(sp.Regions); err != nil {
			return nil, prefixed(i, err)
		}
		def.Nodes[i] = queue.DAGNodeDef{ID: nd.ID, DependsOn: nd.DependsOn, TriggerRule: rule, Task: compactJSON(nd.Task)}
	}
	for i, nd := range req.Nodes {
		seen := make(map[string]bool, len(nd.DependsOn))
		for j, dep := range nd.DependsOn {
			f := nodeField(i, fmt.Sprintf("depends_on[%d]", j))
			if _, ok := index[dep]; !ok {
				return nil, &task.FieldError{Field: f, Msg: fmt.Sprintf("node %q depends on unknown node %q", nd.ID, dep)}
			}
			if seen[dep] {
				return nil, &task.FieldError{Field: f, Msg: fmt.Sprintf("node %q lists %q twice", nd.ID, dep)}
			}
			seen[dep] = true
		}
	}
	if _, cycle := topoOrder(def.Nodes); cycle != nil {
		return nil, &task.FieldError{Field: "nodes", Msg: "cycle: " + strings.Join(cycle, " -> ")}
	}
	return def, nil
}

// assignIDs gives def the run id id and derives every node's task id.
func assignIDs(def *queue.DAGDef, id string) error {
	def.ID = id
	used := make(map[string]bool, len(def.Nodes))
	for i := range def.Nodes {
		// 30 bits of hash: two nodes of one run collide about once in 2 000
		// runs of 1 000 nodes; the next salt settles it.
		for salt := 0; ; salt++ {
			id, err := queue.DAGTaskID(def.ID, def.Nodes[i].ID, salt)
			if err != nil {
				return err
			}
			if !used[id] {
				used[id] = true
				def.Nodes[i].TaskID = id
				break
			}
		}
	}
	return nil
}

func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// topoOrder returns node indexes upstream first (Kahn, ties in input
// order), or a cycle as node ids in execution order, its first node
// repeated at the end. Every depends_on must name a node.
func topoOrder(nodes []queue.DAGNodeDef) (order []int, cycle []string) {
	index := make(map[string]int, len(nodes))
	for i, nd := range nodes {
		index[nd.ID] = i
	}
	pending := make([]int, len(nodes)) // unsettled upstream count
	down := make([][]int, len(nodes))
	for i, nd := range nodes {
		pending[i] = len(nd.DependsOn)
		for _, dep := range nd.DependsOn {
			down[index[dep]] = append(down[index[dep]], i)
		}
	}
	var ready []int
	for i := range nodes {
		if pending[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		order = append(order, i)
		for _, d := range down[i] {
			if pending[d]--; pending[d] == 0 {
				ready = append(ready, d)
			}
		}
	}
	if len(order) == len(nodes) {
		return order, nil
	}
	// Every node left has an upstream that is left too: walking upstream
	// from any of them must come back to a node already walked.
	start := -1
	for i := range nodes {
		if pending[i] > 0 {
			start = i
			break
		}
	}
	walked := map[int]int{}
	var path []int
	for cur := start; ; {
		if at, ok := walked[cur]; ok {
			path = path[at:]
			break
		}
		walked[cur] = len(path)
		path = append(path, cur)
		for _, dep := range nodes[cur].DependsOn {
			if j := index[dep]; pending[j] > 0 {
				cur = j
				break
			}
		}
	}
	// The walk went upstream; show it downstream, from its earliest node.
	slices.Reverse(path)
	first := 0
	for k, i := range path {
		if i < path[first] {
			first = k
		}
	}
	for k := range path {
		cycle = append(cycle, nodes[path[(first+k)%len(path)]].ID)
	}
	return nil, append(cycle, cycle[0])
}

// knownRegions refuses a node task's regions outside the federation
// (Config.Regions and Config.Region), naming regions[j]; with no Regions
// configured nothing is refused.
func (r *Runs) knownRegions(names []string) error {
	if len(r.cfg.Regions) == 0 {
		return nil
	}
	return task.CheckRegions(names, append(slices.Clone(r.cfg.Regions), r.cfg.Region))
}
