package submit

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/task"
)

// PlacementError is a submit no pool can take: Unplaceable (422, no pool
// could ever match) or Saturated (429, every candidate is saturated).
type PlacementError struct {
	Saturated   bool
	RetryAfter  time.Duration
	Explanation placement.Explanation
}

func (e *PlacementError) Error() string {
	if e.Saturated {
		return "every eligible pool is saturated; retry later"
	}
	// The reasons pools were rejected, each once: a price cap or a budget's
	// cap read as a tag mismatch when the message named tags and regions only.
	var why []string
	for _, c := range e.Explanation.Candidates {
		if r := string(c.Reason); r != "" && !slices.Contains(why, r) {
			why = append(why, r)
		}
	}
	if len(why) == 0 {
		return "no pool in any region matches this task's tags and regions"
	}
	return "no pool in any region can take this task (" + strings.Join(why, ", ") + ")"
}

// QuotaError is a submit refused by one of its tenant's quotas (429).
type QuotaError struct {
	Field  string // the quota's key: "max_backlog" or "max_backlog_bytes"
	Tenant string
	Max    int
	// Have and Asked, when Asked > 0: the backlog read and the tasks a
	// DAG or schedule would add to it (BacklogRoom).
	Have, Asked int
	// Regions, when set: the other regions a task may run in, every one
	// refusing the tenant's hand-offs for its max_backlog there.
	Regions []string
}

func (e *QuotaError) Error() string {
	if len(e.Regions) > 0 {
		return fmt.Sprintf("every region this task may run in (%s) refuses tenant %s's tasks: its %s there is reached; wait for some to finish",
			strings.Join(e.Regions, ", "), e.Tenant, e.Field)
	}
	if e.Asked > 0 {
		return fmt.Sprintf("tenant %s has %d unfinished tasks in this region: %d more would pass its %s (%d); wait for some to finish",
			e.Tenant, e.Have, e.Asked, e.Field, e.Max)
	}
	if e.Field == "max_backlog_bytes" {
		return fmt.Sprintf("tenant %s's unfinished tasks in this region hold its max_backlog_bytes (%d bytes of payloads) or close to it: this payload does not fit; wait for some to finish", e.Tenant, e.Max)
	}
	return fmt.Sprintf("tenant %s has %d unfinished tasks in this region, its %s: wait for some to finish", e.Tenant, e.Max, e.Field)
}

// Outcome is the result of one submitted spec.
type Outcome struct {
	ID        string
	State     task.State
	Region    string // where it runs (or will)
	Pool      string // "" while unplaced
	Duplicate bool
	Err       error
}
