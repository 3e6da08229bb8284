package federation

// Schedules (DESIGN §4, §5): cron definitions kept in the global etcd and
// fired by the federation leader.
//
//   - <prefix>schedules/<name> holds the definition (Schedule), written by the
//     API; only pause and resume change it after creation.
//   - <prefix>schedule-state/<name> holds the last slot handled (fired or
//     skipped), written only by the federation leader in a transaction that
//     compares its election key, so a deposed leader cannot move it.
//   - A slot's task id is derived from (schedule, slot) (ScheduleTaskID): the
//     leader enqueues the task into the schedule's home region first and
//     records the slot second, so a leader that dies in between makes its
//     successor enqueue the same id again, which the store refuses
//     (queue.ErrExists). Each slot is enqueued once and runs at least once.
//
// The cron syntax is robfig/cron/v3's with a seconds field first
// ("*/10 * * * * *"); five-field expressions (no seconds) and the
// descriptors @yearly, @monthly, @weekly, @daily, @hourly are accepted too.
// "@every D" fires at the multiples of D since the Unix epoch, so every
// leader computes the same slots.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // schedules name IANA zones; servers in minimal images have no zoneinfo

	"github.com/ax-sched/ax/queue"
	"github.com/robfig/cron/v3"
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

// Schedule is a cron schedule's definition, as stored in etcd and returned
// by the API.
type Schedule struct {
	Name       string      `json:"name"`
	Cron       string      `json:"cron"`
	Timezone   string      `json:"timezone"`
	Task       *queue.Spec `json:"task"` // as given (tenant applied), normalized at each firing by the home region
	HomeRegion string      `json:"home_region"`
	Misfire    string      `json:"misfire"`
	// CatchUpLimit bounds a catch-up (misfire catch_up only).
	CatchUpLimit int            `json:"catch_up_limit,omitempty"`
	Overlap      string         `json:"overlap"`
	Jitter       queue.Duration `json:"jitter,omitempty"`
	Paused       bool           `json:"paused"`
	CreatedAt    time.Time      `json:"created_at"`
	CreatedBy    string         `json:"created_by,omitempty"`
}

// ScheduleStatus is a schedule with what the leader has done with it.
type ScheduleStatus struct {
	Schedule
	// LastSlot is the last slot handled: fired, or skipped by a policy.
	LastSlot    *time.Time `json:"last_slot,omitempty"`
	LastOutcome string     `json:"last_outcome,omitempty"`
	// LastFiredSlot is the last slot that has a task (LastTaskID).
	LastFiredSlot *time.Time `json:"last_fired_slot"`
	LastTaskID    string     `json:"last_task_id,omitempty"`
	// NextSlot is the next slot from now (null while paused).
	NextSlot *time.Time `json:"next_slot"`
}

// ScheduleList answers GET /v1/schedules.
type ScheduleList struct {
	Schedules []ScheduleStatus `json:"schedules"`
}

// scheduleRequest is POST /v1/schedules. Jitter and task are decoded by
// hand so their errors name the field.
type scheduleRequest struct {
	Name         string          `json:"name"`
	Cron         string          `json:"cron"`
	Timezone     string          `json:"timezone"`
	Task         json.RawMessage `json:"task"`
	HomeRegion   string          `json:"home_region"`
	Misfire      string          `json:"misfire"`
	CatchUpLimit *int            `json:"catch_up_limit"`
	Overlap      string          `json:"overlap"`
	Jitter       json.RawMessage `json:"jitter"`
	Paused       bool            `json:"paused"`
}

// scheduleState is <prefix>schedule-state/<name>, written by the leader.
type scheduleState struct {
	// DefRev is the create revision of the definition this state belongs
	// to: a schedule deleted and created again starts afresh.
	DefRev        int64      `json:"def_rev"`
	LastSlot      time.Time  `json:"last_slot"`
	LastOutcome   string     `json:"last_outcome"`
	LastFiredSlot *time.Time `json:"last_fired_slot,omitempty"`
	LastTaskID    string     `json:"last_task_id,omitempty"`
	UpdatedAt     time.Time  `json:"updated_at"`
	Leader        int64      `json:"leader_token"` // fencing token of the term that wrote it
}

var scheduleNameRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// validateSchedule checks a request and builds the definition (CreatedAt
// and CreatedBy are the caller's). Errors are *queue.FieldError; a task
// error names its field as "task.<field>".
func (n *Node) validateSchedule(req scheduleRequest, now time.Time) (*Schedule, error) {
	d := &Schedule{Name: req.Name, Cron: strings.TrimSpace(req.Cron), Timezone: req.Timezone,
		HomeRegion: req.HomeRegion, Misfire: req.Misfire, Overlap: req.Overlap, Paused: req.Paused}
	if d.Name == "" {
		return nil, fieldError("name", "is required")
	}
	if !scheduleNameRe.MatchString(d.Name) {
		return nil, fieldError("name", "must be a DNS label: lowercase letters, digits and -, at most 63, starting and ending with a letter or digit")
	}
	if d.Cron == "" {
		return nil, fieldError("cron", "is required")
	}
	if d.Timezone == "" {
		d.Timezone = "UTC"
	}
	c, err := compileSchedule(d.Cron, d.Timezone)
	if err != nil {
		return nil, err
	}
	if c.next(now).IsZero() {
		return nil, fieldError("cron", "never fires")
	}
	if d.HomeRegion == "" {
		d.HomeRegion = n.cfg.Region
	}
	if !slices.Contains(n.cfg.Regions, d.HomeRegion) {
		return nil, fieldError("home_region", fmt.Sprintf("must be one of the federation's regions %v", n.cfg.Regions))
	}
	switch d.Misfire {
	case "":
		d.Misfire = MisfireFireOnce
	case MisfireSkip, MisfireFireOnce, MisfireCatchUp:
	default:
		return nil, fieldError("misfire", "must be skip, fire_once or catch_up")
	}
	if req.CatchUpLimit != nil {
		if d.Misfire != MisfireCatchUp {
			return nil, fieldError("catch_up_limit", "only with misfire catch_up")
		}
		if *req.CatchUpLimit < 1 || *req.CatchUpLimit > MaxCatchUpLimit {
			return nil, fieldError("catch_up_limit", fmt.Sprintf("must be between 1 and %d", MaxCatchUpLimit))
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
		return nil, fieldError("overlap", "must be allow, forbid or replace")
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
		if gap := c.minGap(now, 16); d.Jitter > 0 && time.Duration(d.Jitter) >= gap {
			return nil, fieldError("jitter", fmt.Sprintf("must be shorter than the interval between slots (%v)", gap))
		}
	}
	if len(req.Task) == 0 || string(req.Task) == "null" {
		return nil, fieldError("task", "is required")
	}
	sp, err := queue.DecodeSpec(req.Task)
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
	}
	d.Task = sp
	return d, nil
}

// checkTask validates the task as its home region will at each firing,
// without keeping the defaults it fills in.
func (n *Node) checkTask(sp *queue.Spec, now time.Time) error {
	c := *sp
	if err := c.Normalize(n.cfg.Defaults, now); err != nil {
		return taskFieldError(err)
	}
	return nil
}

func fieldError(field, msg string) error { return &queue.FieldError{Field: field, Msg: msg} }

// taskFieldError names a spec's field error as a field of "task".
func taskFieldError(err error) error { return prefixField("task", err) }

// prefixField names a nested object's field error from the outer object:
// "tags.gpu" in "task" becomes "task.tags.gpu".
func prefixField(prefix string, err error) error {
	var fe *queue.FieldError
	if errors.As(err, &fe) {
		f := prefix
		if fe.Field != "" {
			f += "." + fe.Field
		}
		return &queue.FieldError{Field: f, Msg: fe.Msg}
	}
	return err
}

// cronParser reads six fields, seconds first; fiveFieldParser the
// classic five.
var (
	cronParser      = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	fiveFieldParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
)

// slotClock names the slots of a schedule: Next is the first slot strictly
// after t (zero when there is none within five years).
type slotClock interface{ Next(t time.Time) time.Time }

// compiled is a parsed cron expression in its time zone.
type compiled struct {
	clock slotClock
	loc   *time.Location
}

// compileSchedule parses expr in the zone tz. Errors are *queue.FieldError.
func compileSchedule(expr, tz string) (compiled, error) {
	if tz == "Local" {
		return compiled{}, fieldError("timezone", "name an IANA zone such as Europe/Paris; Local differs between servers")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return compiled{}, fieldError("timezone", fmt.Sprintf("unknown time zone %q", tz))
	}
	expr = strings.TrimSpace(expr)
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return compiled{}, fieldError("cron", "give the zone in the timezone field, not in the expression")
	}
	if d, ok := strings.CutPrefix(expr, "@every "); ok {
		every, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || every < time.Second || every%time.Second != 0 {
			return compiled{}, fieldError("cron", "@every takes a whole number of seconds, at least 1s")
		}
		return compiled{clock: everyClock(every / time.Second), loc: loc}, nil
	}
	p := cronParser
	if !strings.HasPrefix(expr, "@") {
		switch len(strings.Fields(expr)) {
		case 5:
			p = fiveFieldParser
		case 6:
		default:
			return compiled{}, fieldError("cron", "must have 6 fields (second minute hour day-of-month month day-of-week), or the classic 5 without seconds")
		}
	}
	s, err := p.Parse(expr)
	if err != nil {
		return compiled{}, fieldError("cron", err.Error())
	}
	return compiled{clock: s, loc: loc}, nil
}

// everyClock fires at the multiples of n seconds since the Unix epoch.
type everyClock int64

var _ slotClock = everyClock(1)

func (e everyClock) Next(t time.Time) time.Time {
	n := int64(e)
	s := t.Unix()
	if t.Before(time.Unix(s, 0)) { // Unix truncates toward zero before 1970
		s--
	}
	return time.Unix((floorDiv(s, n)+1)*n, 0).In(t.Location())
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// next is the first slot strictly after t (zero: none).
func (c compiled) next(t time.Time) time.Time { return c.clock.Next(t.In(c.loc)) }

// between returns the slots s with after < s ≤ through, oldest first, at
// most limit of them.
func (c compiled) between(after, through time.Time, limit int) []time.Time {
	var out []time.Time
	for s := c.next(after); !s.IsZero() && !s.After(through) && len(out) < limit; s = c.next(s) {
		out = append(out, s)
	}
	return out
}

// newestBefore returns the latest slot s with after < s < end. Cron has no
// "previous", but next is monotonic, so a binary search over seconds finds
// it in ~40 steps however long the gap.
func (c compiled) newestBefore(after, end time.Time) (time.Time, bool) {
	first := c.next(after)
	if first.IsZero() || !first.Before(end) {
		return time.Time{}, false
	}
	lo, hi := after, end // next(lo) < end ≤ next(hi)
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
		if !mid.After(lo) {
			mid = lo.Add(time.Second)
		}
		if s := c.next(mid); !s.IsZero() && s.Before(end) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return c.next(lo), true
}

// latest returns up to k of the most recent slots s with after < s < end,
// oldest first.
func (c compiled) latest(after, end time.Time, k int) []time.Time {
	var out []time.Time
	for len(out) < k {
		s, ok := c.newestBefore(after, end)
		if !ok {
			break
		}
		out = append(out, s)
		end = s
	}
	slices.Reverse(out)
	return out
}

// countCap bounds how many skipped slots are counted for the metric: a
// schedule firing every second that missed a week is not walked slot by slot.
const countCap = 10000

// count is the number of slots s with after < s < end, at most countCap.
func (c compiled) count(after, end time.Time) int {
	n := 0
	for s := c.next(after); !s.IsZero() && s.Before(end) && n < countCap; s = c.next(s) {
		n++
	}
	return n
}

// minGap is the shortest interval between the next k slots after t.
func (c compiled) minGap(t time.Time, k int) time.Duration {
	gap := time.Duration(1<<63 - 1)
	prev := c.next(t)
	for i := 0; i < k && !prev.IsZero(); i++ {
		s := c.next(prev)
		if s.IsZero() {
			break
		}
		gap = min(gap, s.Sub(prev))
		prev = s
	}
	return gap
}

// firePlan is what one pass does with a schedule's due slots.
type firePlan struct {
	// skipTo, when set, is the latest missed slot, recorded as handled
	// without a task (misfire skip) before any firing.
	skipTo time.Time
	// fire are the slots to fire, oldest first: the missed ones the policy
	// keeps, then those on time.
	fire []time.Time
	// skipped counts the missed slots given up (up to countCap).
	skipped int
}

// maxOnTime bounds the on-time slots of one pass: with slots a second apart
// and a two-second tolerance there are three.
const maxOnTime = 100

// planSlots decides, at now, what to do with the slots after the last one
// handled (after). A slot older than tolerance at now is missed, and the
// misfire policy decides; later ones are on time and fire.
func planSlots(c compiled, d *Schedule, after, now time.Time, tolerance time.Duration) firePlan {
	var p firePlan
	cutoff := now.Add(-tolerance)
	switch d.Misfire {
	case MisfireSkip:
		if s, ok := c.newestBefore(after, cutoff); ok {
			p.skipTo = s
			p.skipped = c.count(after, s) + 1
		}
	default:
		k := 1
		if d.Misfire == MisfireCatchUp {
			k = max(d.CatchUpLimit, 1)
		}
		if missed := c.latest(after, cutoff, k); len(missed) > 0 {
			p.fire = missed
			p.skipped = c.count(after, missed[0])
		}
	}
	from := after
	if cutoff.Add(-time.Nanosecond).After(from) {
		from = cutoff.Add(-time.Nanosecond)
	}
	p.fire = append(p.fire, c.between(from, now, maxOnTime)...)
	return p
}

// scheduleIDAlphabet is queue's id alphabet (base32hex): ids sort like the
// numbers they encode.
const scheduleIDAlphabet = "0123456789abcdefghijklmnopqrstuv"

// ScheduleTaskID is the id of the task of one slot of a schedule: a valid
// ax id whose time part is the slot's Unix milliseconds and whose sequence
// part is a hash of the schedule's name, on shard 0 of the home region.
// Every leader derives the same id, so the store refuses a second task for
// the slot.
func ScheduleTaskID(name string, slot time.Time, home string) string {
	var b [16]byte
	v := uint64(slot.UnixMilli())
	for i := 9; i >= 0; i-- {
		b[i] = scheduleIDAlphabet[v&31]
		v >>= 5
	}
	h := scheduleSeq(name)
	for i := 15; i >= 10; i-- {
		b[i] = scheduleIDAlphabet[h&31]
		h >>= 5
	}
	return string(b[:]) + ".0." + home
}

// scheduleSeq is the 30-bit hash of a schedule name used in its task ids.
// Two names with the same hash would share ids; creation refuses a name
// whose hash another schedule has.
func scheduleSeq(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	s := h.Sum64()
	return (s ^ s>>30 ^ s>>60) & (1<<30 - 1)
}

// jitterOffset is the run's delay after its slot: in [0, window), from a
// hash of name and slot, so every leader computes the same.
func jitterOffset(name string, slot time.Time, window time.Duration) time.Duration {
	ms := window.Milliseconds()
	if ms <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{0})
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(slot.UnixMilli()))
	h.Write(b[:])
	return time.Duration(h.Sum64()%uint64(ms)) * time.Millisecond
}
