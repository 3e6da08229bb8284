package submit

import (
	"strconv"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
)

// groupKey is the unique or debounce key t takes in shard's Redis and its
// submit.lua flag ("u" or "b"); "" when t takes none: it has no such key,
// or it is not a new submit (a hand-off received, a task with its id —
// a DAG node, a schedule's slot — whose key was settled where it began).
func (s *Submitter) groupKey(shard int, t queue.NewTask) (key, flag string) {
	sp := t.Spec
	if t.ID != "" || t.History != nil || t.HeldFrom != "" || t.Returning {
		return "", ""
	}
	switch {
	case sp.UniqueKey != "":
		return queue.UniqueKey(s.Prefix(shard), sp.Tenant, sp.UniqueKey), "u"
	case sp.DebounceKey != "":
		return queue.DebounceKey(s.Prefix(shard), sp.Tenant, sp.DebounceKey), "b"
	}
	return "", ""
}

// uniqueModes are submit.lua's letters of the unique_until values.
var uniqueModes = map[string]string{
	task.UniqueUntilStarted:  "s",
	task.UniqueUntilFinished: "f",
	task.UniqueUntilWindow:   "w",
}

// groupArgs are submit.lua's idem_ttl_ms and spec_hash of a unique or
// debounced task (submit.lua flags 'u' and 'b').
// supersedes is NewTask.Supersedes.
func (s *Submitter) groupArgs(sp *task.Spec, supersedes string) (ttl, hash string) {
	if sp.UniqueKey != "" {
		return record.Ms(time.Duration(sp.UniqueFor)), uniqueModes[sp.UniqueUntil] + supersedes
	}
	return record.Ms(time.Duration(sp.Debounce)),
		record.Ms(time.Duration(sp.DebounceMaxWait)) + " " + strconv.FormatInt(s.Options().RetainCanceled.Milliseconds(), 10)
}
