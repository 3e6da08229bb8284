package schedule

import (
	"errors"
	"fmt"
	"github.com/ax-sched/ax/schedule/slots"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/schedule/defs"
	"github.com/ax-sched/ax/schedule/depend"
	"github.com/ax-sched/ax/task"
)

// Misfire policies: what the leader does with slots it finds older than the
// tolerance (no leader ran, the home region was down, the schedule was
// paused).
const (
	MisfireSkip     = "skip"      // fire none of them; go on from now
	MisfireFireOnce = "fire_once" // one task, for the most recent missed slot
	MisfireCatchUp  = "catch_up"  // the most recent catch_up_limit missed slots, oldest first
)

// Overlap policies, as Kubernetes' concurrencyPolicy: what a slot does when
// the previous slot's task has not finished.
const (
	OverlapAllow   = "allow"   // fire anyway
	OverlapForbid  = "forbid"  // skip this slot
	OverlapReplace = "replace" // cancel the previous task, then fire
)

// Catch-up bounds.
const (
	DefaultCatchUpLimit = 10
	MaxCatchUpLimit     = 1000
)

// State is what the leader last did with a schedule (defs.State).
type State = defs.State

// validatePolicies checks and defaults the misfire, catch-up and overlap
// policies of req into d; errors are *task.FieldError.
func validatePolicies(req *apiv1.ScheduleRequest, d *apiv1.Schedule) error {
	switch d.Misfire {
	case "":
		d.Misfire = MisfireFireOnce
	case MisfireSkip, MisfireFireOnce, MisfireCatchUp:
	default:
		return fieldError("misfire", "must be skip, fire_once or catch_up")
	}
	if req.CatchUpLimit != nil {
		if d.Misfire != MisfireCatchUp {
			return fieldError("catch_up_limit", "only with misfire catch_up")
		}
		if *req.CatchUpLimit < 1 || *req.CatchUpLimit > MaxCatchUpLimit {
			return fieldError("catch_up_limit", fmt.Sprintf("must be between 1 and %d", MaxCatchUpLimit))
		}
		d.CatchUpLimit = *req.CatchUpLimit
	} else if d.Misfire == MisfireCatchUp {
		d.CatchUpLimit = DefaultCatchUpLimit
	}
	switch d.Overlap {
	case "":
		d.Overlap = OverlapAllow
	case OverlapAllow, OverlapForbid, OverlapReplace:
	default:
		return fieldError("overlap", "must be allow, forbid or replace")
	}
	return nil
}

var nameRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Validate checks a request and builds the definition (CreatedAt and
// CreatedBy are Create's). Errors are *task.FieldError; a task error names
// its field as "task.<field>".
func (s *Scheduler) Validate(req *apiv1.ScheduleRequest) (*apiv1.Schedule, error) {
	now := s.now()
	d := &apiv1.Schedule{Name: req.Name, Cron: strings.TrimSpace(req.Cron), Timezone: req.Timezone,
		HomeRegion: req.HomeRegion, Misfire: req.Misfire, Overlap: req.Overlap, Paused: req.Paused}
	if d.Name == "" {
		return nil, fieldError("name", "is required")
	}
	if !nameRe.MatchString(d.Name) {
		return nil, fieldError("name", "must be a DNS label: lowercase letters, digits and -, at most 63, starting and ending with a letter or digit")
	}
	if d.Cron == "" {
		return nil, fieldError("cron", "is required")
	}
	if d.Timezone == "" {
		d.Timezone = "UTC"
	}
	c, err := slots.Compile(d.Cron, d.Timezone)
	if err != nil {
		return nil, err
	}
	if c.Next(now).IsZero() {
		return nil, fieldError("cron", "never fires")
	}
	if d.HomeRegion == "" {
		d.HomeRegion = s.cfg.Region
	}
	if !slices.Contains(s.cfg.Regions, d.HomeRegion) {
		return nil, fieldError("home_region", fmt.Sprintf("must be one of the federation's regions %v", s.cfg.Regions))
	}
	if err := validatePolicies(req, d); err != nil {
		return nil, err
	}
	if len(req.Jitter) > 0 && string(req.Jitter) != "null" {
		if err := d.Jitter.UnmarshalJSON(req.Jitter); err != nil {
			return nil, fieldError("jitter", "must be a duration such as \"30s\"")
		}
		if d.Jitter < 0 {
			return nil, fieldError("jitter", "must not be negative")
		}
		// A window as long as the interval would let a run start after the
		// next slot's run: overlap policies would compare the wrong runs.
		if gap := c.MinGap(now, 16); d.Jitter > 0 && time.Duration(d.Jitter) >= gap {
			return nil, fieldError("jitter", fmt.Sprintf("must be shorter than the interval between slots (%v)", gap))
		}
	}
	hasTask, hasDAG := given(req.Task), given(req.DAG)
	switch {
	case hasTask && hasDAG:
		return nil, fieldError("dag", "a schedule fires a task or starts a DAG, not both")
	case hasDAG && len(req.DependsOnSchedules) > 0:
		return nil, fieldError("depends_on_schedules", "a DAG schedule's nodes say it: dag.nodes[i].depends_on_schedules")
	case hasDAG:
		dr, err := decodeDAG(req.DAG)
		if err != nil {
			return nil, err
		}
		d.DAG = dr
		return d, nil
	case !hasTask:
		return nil, fieldError("task", "is required (or dag: a DAG each slot starts)")
	}
	sp, err := task.DecodeSpec(req.Task)
	if err == nil {
		err = sp.RefuseInternal()
	}
	if err != nil {
		return nil, taskFieldError(err)
	}
	switch {
	case sp.RunAt != nil:
		return nil, fieldError("task.run_at", "a schedule sets each run's time (use jitter to spread runs)")
	case sp.Delay != 0:
		return nil, fieldError("task.delay", "a schedule sets each run's time (use jitter to spread runs)")
	case sp.IdempotencyKey != "" || sp.IdempotencyTTL != 0:
		return nil, fieldError("task.idempotency_key", "each run's id is derived from the schedule and slot; a key would merge runs")
	case sp.UniqueKey != "" || sp.DebounceKey != "":
		_, f := sp.Key()
		return nil, fieldError("task."+f, "each run's id is derived from the schedule and slot; use the schedule's overlap policy")
	}
	// A region outside the federation would leave every run PENDING
	// forever (a task submitted alone is refused the same way).
	if err := task.CheckRegions(sp.Regions, append(slices.Clone(s.cfg.Regions), s.cfg.Region)); err != nil {
		return nil, taskFieldError(err)
	}
	if err := depend.CheckList("depends_on_schedules", req.DependsOnSchedules); err != nil {
		return nil, err
	}
	d.Task, d.DependsOnSchedules = sp, req.DependsOnSchedules
	return d, nil
}

// checkTask validates the task as its home region will at each firing,
// without keeping the defaults it fills in.
func (s *Scheduler) checkTask(sp *task.Spec, now time.Time) error {
	c := *sp
	if err := c.Normalize(s.cfg.Defaults, now); err != nil {
		return taskFieldError(err)
	}
	return nil
}

func fieldError(field, msg string) error { return &task.FieldError{Field: field, Msg: msg} }

// taskFieldError names a spec's field error as a field of "task":
// "tags.gpu" becomes "task.tags.gpu".
func taskFieldError(err error) error {
	var fe *task.FieldError
	if errors.As(err, &fe) {
		return fe.Under("task")
	}
	return err
}
