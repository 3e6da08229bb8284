package task

import (
	"strconv"
	"strings"
	"time"
)

// Gates: a node of a schedule's DAG run that depends on another schedule
// (package schedule) carries one Gate per such dependency. The federation
// leader resolves each when it starts the run; the run's home region
// releases the node only once every gate is open (package dag).

// Rules of a dependency on another schedule.
const (
	// GateSamePeriod waits for the upstream schedule's run whose period
	// covers this run's period start, until its deadline.
	GateSamePeriod = "same_period"
	// GateLatestSuccess needs the upstream's newest successful run, ended
	// within the dependency's max_age, when the run starts: it never waits.
	GateLatestSuccess = "latest_success"
)

// What a node does when a gate cannot open.
const (
	GateFail = "fail" // FAILED (the default)
	GateSkip = "skip" // SKIPPED: its dependants follow their trigger rules
)

// Reasons of a node a gate settled without a task.
const (
	ReasonUpstreamTimeout = "UPSTREAM_TIMEOUT" // same_period: no successful upstream run by the deadline
	ReasonUpstreamStale   = "UPSTREAM_STALE"   // latest_success: none recent enough when the run started
)

// Gate is a resolved dependency of one node on another schedule's run.
type Gate struct {
	Schedule string `json:"schedule"`
	Rule     string `json:"rule"`
	// RunID is the upstream run waited for (same_period): a DAG run's id
	// when DAG is set, else a task's.
	RunID string `json:"run_id,omitempty"`
	DAG   bool   `json:"dag,omitempty"`
	// Exact: only RunID opens the gate, not another run of its period (a
	// downstream rerun waits for its upstream's rerun, not for the
	// period's earlier success).
	Exact bool `json:"exact,omitempty"`
	// Period is the start of the upstream's period (same_period), or of
	// the successful run found (latest_success).
	Period *time.Time `json:"period,omitempty"`
	// Stale is set when latest_success found no run recent enough: the
	// gate never opens.
	Stale bool `json:"stale,omitempty"`
	// Deadline: a same_period gate still closed then settles its node by
	// OnTimeout.
	Deadline  time.Time `json:"deadline"`
	OnTimeout string    `json:"on_timeout,omitempty"`
}

// Unmet is the state and reason of a node whose gate cannot open: FAILED,
// or SKIPPED when the gate says skip.
func (g Gate) Unmet(reason string) (NodeState, string) {
	if g.OnTimeout == GateSkip {
		return NodeSkipped, reason
	}
	return NodeFailed, reason
}

// ScheduleEndOf is the Spec.ScheduleEnd of the task tenant's schedule name
// runs for the period starting at period. Tenants and schedule names hold
// no '/' or space (their validations), so it parses back (ParseScheduleEnd)
// and fits a space-separated list entry.
func ScheduleEndOf(tenant, name string, period time.Time) string {
	return "s/" + tenant + "/" + name + "/" + strconv.FormatInt(period.UnixMilli(), 10)
}

// ParseScheduleEnd takes a ScheduleEndOf apart; ok is false when s is not
// one.
func ParseScheduleEnd(s string) (tenant, name string, period time.Time, ok bool) {
	f := strings.Split(s, "/")
	if len(f) != 4 || f[0] != "s" || f[1] == "" || f[2] == "" {
		return "", "", time.Time{}, false
	}
	ms, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return "", "", time.Time{}, false
	}
	return f[1], f[2], time.UnixMilli(ms).UTC(), true
}
