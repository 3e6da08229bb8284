package queue

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ax-sched/ax/task"
)

// Bounds of handler-aware routing. A worker's list travels with every
// heartbeat and every claim, so it stays small; a pool's union is published
// to the global etcd with the pool's figures.
const (
	// MaxWorkerTypes bounds the task types one worker may list (a worker
	// that serves more declares that it serves every type: AnyType).
	MaxWorkerTypes = 64
	// MaxPoolTypes bounds the union of a pool's workers' types that the
	// region leader publishes; past it the pool is published as serving
	// every type (placement does not restrict it).
	MaxPoolTypes = 256
	// claimSkip bounds, per priority, the READY tasks of types a claimer
	// does not serve that one claim passes over (claim.lua). A claim then
	// reads at most 5 × claimSkip type fields more than it takes tasks.
	ClaimSkip = 32
)

// Types is the set of task types a worker serves: it filters the worker's
// claims (ClaimRequest.Types) and is published with its heartbeat, from
// which the region leader derives what each pool serves (PoolWorkers).
//
// The zero value says nothing: claims take every type, and the worker's
// pool counts as serving every type (a worker built before types were
// published). AnyType is a worker with a catch-all handler.
//
// Why the claim filters instead of taking a task and giving it back: a
// give-back costs two scripts per task, spends the worker's slots, and
// puts the task back at the head where the same claimer takes it again;
// passing a task over costs one field read and changes nothing, bounded
// per claim by claimSkip.
type Types struct {
	Code string // "": unsaid; "*": every type; else ",a,b," (sorted), "," for none
}

// AnyType serves every task type.
var AnyType = Types{Code: "*"}

// ServeTypes is the set of the given task types (duplicates are folded).
// Each must be a task type name (task.CheckType) and there may be at most
// MaxWorkerTypes.
func ServeTypes(types ...string) (Types, error) {
	ts := slices.Clone(types)
	slices.Sort(ts)
	ts = slices.Compact(ts)
	if len(ts) > MaxWorkerTypes {
		return Types{}, fmt.Errorf("queue: %d task types, at most %d per worker (serve every type instead)", len(ts), MaxWorkerTypes)
	}
	for _, t := range ts {
		if err := task.CheckType(t); err != nil {
			return Types{}, fmt.Errorf("queue: task type %q: %w", t, err)
		}
	}
	return Types{Code: "," + strings.Join(ts, ",") + ","}, nil
}

// Known reports whether the set was said (not the zero value).
func (t Types) Known() bool { return t.Code != "" }

// All reports whether every type is served: AnyType, or the zero value.
func (t Types) All() bool { return t.Code == "" || t.Code == "*" }

// Serves reports whether typ is in the set.
func (t Types) Serves(typ string) bool {
	return t.All() || (typ != "" && !strings.Contains(typ, ",") && strings.Contains(t.Code, ","+typ+","))
}

// List returns the listed types, sorted; nil when All.
func (t Types) List() []string {
	if t.All() {
		return nil
	}
	return SplitTypes(t.Code)
}

// String is "*" for every type, else the comma-joined list.
func (t Types) String() string {
	if t.All() {
		return "*"
	}
	return strings.Trim(t.Code, ",")
}

// splitTypes parses a stored list (",a,b,"), never nil.
func SplitTypes(code string) []string {
	out := []string{}
	for _, s := range strings.Split(code, ",") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
