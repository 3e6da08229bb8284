package render

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

// Or is s, or "-" when empty.
func Or(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Cut shortens s to n runes on one line, for table cells.
func Cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Time is a time in loc (UTC, or the local zone with --local), to the
// millisecond; "-" for none.
func Time(t *time.Time, loc *time.Location) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	// RFC 3339 with milliseconds and the zone ("Z" or its offset), so a
	// time read from one machine means the same on another.
	return t.In(loc).Format("2006-01-02T15:04:05.000Z07:00")
}

// Partial is the error of an answer gathered from every region that some
// did not give (nil when all did): the command exits 1 after printing the
// rest.
func Partial(unavailable []string) error {
	if len(unavailable) == 0 {
		return nil
	}
	return fmt.Errorf("partial result: unavailable region(s): %s", strings.Join(unavailable, ", "))
}

// Table is the CLI's table writer: columns two spaces apart.
func Table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// Task prints a task as "Field:  value" lines, the empty ones left out.
func Task(w *tabwriter.Writer, t *task.Task, loc *time.Location) {
	row := func(k, v string) {
		if v != "" && v != "-" {
			fmt.Fprintf(w, "%s:\t%s\n", k, v)
		}
	}
	state := string(t.State)
	if t.Reason != "" {
		state += " (" + t.Reason + ")"
	}
	if t.CancelRequested {
		state += ", cancel requested"
	}
	row("ID", t.ID)
	row("Type", t.Type)
	row("State", state)
	row("Priority", strconv.Itoa(t.Priority))
	row("Tenant", t.Tenant)
	row("Home region", t.Region)
	row("Held by", t.HeldBy)
	row("Pool", t.Pool)
	row("Handed off to", t.HandedOffTo)
	row("Worker", t.Worker)
	row("Attempts", fmt.Sprintf("%d of %d", t.Attempts, t.MaxRetries+1))
	if t.PreemptCount > 0 {
		row("Preempted", fmt.Sprintf("%d times", t.PreemptCount))
	}
	if t.Paused > 0 || t.MaxPause > 0 {
		budget := "the region's max_pause"
		if t.MaxPause > 0 {
			budget = "max_pause " + time.Duration(t.MaxPause).String()
		}
		row("Paused", fmt.Sprintf("%s by retry after, of %s", time.Duration(t.Paused), budget))
	}
	row("Tags", Tags(t.Tags))
	row("Regions", strings.Join(t.Regions, ","))
	var flags []string
	if t.Preemptible {
		flags = append(flags, "preemptible")
	}
	if t.Critical {
		flags = append(flags, "critical")
	}
	if t.Pinned {
		flags = append(flags, "pinned")
	}
	row("Flags", strings.Join(flags, ","))
	row("Timeout", time.Duration(t.Timeout).String())
	row("Retry backoff", fmt.Sprintf("%s … %s", time.Duration(t.RetryBase), time.Duration(t.RetryCap)))
	row("Idempotency key", t.IdempotencyKey)
	row("Unique key", t.UniqueKey)
	row("Debounce key", t.DebounceKey)
	if t.PricePerHour > 0 {
		row("Price", fmt.Sprintf("$%.3f/slot-h", t.PricePerHour))
	}
	row("Created", Time(&t.CreatedAt, loc))
	row("Due", Time(t.DueAt, loc))
	row("Enqueued", Time(t.EnqueuedAt, loc))
	row("Ready", Time(t.ReadyAt, loc))
	row("Started", Time(t.StartedAt, loc))
	row("Finished", Time(t.FinishedAt, loc))
	row("Progress", progressText(t.Progress))
	row("Last error", Cut(t.LastError, 200))
	row("Result", Cut(t.Result, 200))
	row("Result expires", Time(t.ResultExpiresAt, loc))
	if t.ResultTTL > 0 {
		row("Result TTL", time.Duration(t.ResultTTL).String())
	}
	row("Payload", Cut(string(t.Payload), 200))
	row("Trace ID", t.TraceID)
	row("Limit key", t.LimitKey)
	if t.Slots > 0 {
		row("Slots", strconv.FormatFloat(float64(t.Slots), 'f', -1, 64))
	}
}

// TaskRows is a table of tasks, one row each (ax tasks ls).
func TaskRows(w io.Writer, tasks []*task.Task, loc *time.Location) {
	fmt.Fprintln(w, "ID\tREGION\tSTATE\tTYPE\tTENANT\tPOOL\tATTEMPTS\tCREATED")
	for _, t := range tasks {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", t.ID, Or(t.HeldBy), t.State, t.Type, Or(t.Tenant),
			Or(t.Pool), t.Attempts, Time(&t.CreatedAt, loc))
	}
}

// TaskHint tells on w what the user may have done wrong when t waits for
// a handler no live worker serves.
func TaskHint(w io.Writer, t *task.Task) {
	if t.State == task.Pending && t.Reason == task.ReasonNoHandler {
		fmt.Fprintf(w, "ax: no live worker serves type %q in the pools this task may run in: it waits for one "+
			"(is the type misspelt? ax explain --type %s shows each pool's reason)\n", t.Type, t.Type)
	}
}

// progressText is "40% resizing (attempt 2)" ("" for none).
func progressText(p *task.Progress) string {
	if p == nil {
		return ""
	}
	s := strconv.FormatFloat(p.Percent, 'f', -1, 64) + "%"
	if p.Message != "" {
		s += " " + Cut(p.Message, 120)
	}
	if p.Attempt > 0 {
		s += fmt.Sprintf(" (attempt %d)", p.Attempt)
	}
	return s
}

func Tags(tags map[string]string) string {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + tags[k]
	}
	return strings.Join(keys, ",")
}

// Schedules prints a schedule list as a table when it has the expected
// shape ({"schedules":[...]}, or a bare array, of schedules with names),
// times as every other table prints them; false otherwise.
func Schedules(out io.Writer, raw json.RawMessage, loc *time.Location) bool {
	var list []apiv1.ScheduleStatus
	var wrapped apiv1.ScheduleList
	switch {
	case json.Unmarshal(raw, &wrapped) == nil && wrapped.Schedules != nil:
		list = wrapped.Schedules
	case json.Unmarshal(raw, &list) == nil:
	default:
		return false
	}
	for _, s := range list {
		if s.Name == "" {
			return false
		}
	}
	w := Table(out)
	fmt.Fprintln(w, "NAME\tTENANT\tCRON\tTIME ZONE\tHOME\tPAUSED\tLAST FIRED\tNEXT SLOT")
	for _, s := range list {
		tenant := ""
		switch {
		case s.Task != nil:
			tenant = s.Task.Tenant
		case s.DAG != nil:
			tenant = s.DAG.Tenant
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", s.Name, Or(tenant), Or(s.Cron), Or(s.Timezone), Or(s.HomeRegion),
			s.Paused, Time(s.LastFiredSlot, loc), Time(s.NextSlot, loc))
	}
	return w.Flush() == nil
}

// Schedule prints one schedule as "Field:  value" lines (as ax get
// prints a task), the empty ones left out.
func Schedule(w *tabwriter.Writer, s *apiv1.ScheduleStatus, loc *time.Location) {
	row := func(k, v string) {
		if v != "" && v != "-" {
			fmt.Fprintf(w, "%s:\t%s\n", k, v)
		}
	}
	row("Name", s.Name)
	row("Cron", s.Cron)
	row("Time zone", s.Timezone)
	row("Home region", s.HomeRegion)
	row("Paused", strconv.FormatBool(s.Paused))
	misfire := s.Misfire
	if s.CatchUpLimit > 0 {
		misfire += fmt.Sprintf(" (at most %d)", s.CatchUpLimit)
	}
	row("Misfire", misfire)
	row("Overlap", s.Overlap)
	if s.Jitter > 0 {
		row("Jitter", time.Duration(s.Jitter).String())
	}
	row("Created", Time(&s.CreatedAt, loc))
	row("Created by", s.CreatedBy)
	last := Time(s.LastSlot, loc)
	if last != "-" && s.LastOutcome != "" {
		last += " (" + s.LastOutcome + ")"
	}
	row("Last slot", last)
	row("Last fired", Time(s.LastFiredSlot, loc))
	if s.DAG != nil {
		row("Last run", s.LastTaskID)
	} else {
		row("Last task", s.LastTaskID)
	}
	if s.LastPeriod != nil {
		row("Last period", periodText(*s.LastPeriod))
	}
	row("Next slot", Time(s.NextSlot, loc))
	if g := s.DAG; g != nil {
		ids := make([]string, len(g.Nodes))
		for i, n := range g.Nodes {
			ids[i] = n.ID
		}
		row("DAG", g.Name)
		row("DAG nodes", strings.Join(ids, ","))
	}
	if t := s.Task; t != nil {
		row("Task type", t.Type)
		if t.Priority != nil {
			row("Task priority", strconv.Itoa(*t.Priority))
		}
		row("Task tenant", t.Tenant)
		row("Task tags", Tags(t.Tags))
		row("Task regions", strings.Join(t.Regions, ","))
		row("Task payload", Cut(string(t.Payload), 200))
	}
}

// Regions prints one row per pool; a region without pools gets one
// row of its own.
func Regions(w *tabwriter.Writer, res *apiv1.RegionsResponse) {
	fmt.Fprintln(w, "REGION\tPROVIDER\tLEADER\tSERVERS\tHEALTHY\tPOOL\tSLOTS\tRUNNING\tREADY\tPARKED\tSTARVING\tWAIT-P99\tFILL\tPRICE $/SLOT-H\tSPOT\tWINDOW")
	for _, r := range res.Regions {
		health := "yes"
		switch {
		case r.Stale:
			health = "stale"
		case !r.Healthy:
			health = "no"
		}
		if len(r.Pools) == 0 {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\n", r.Name, Or(r.Provider), Or(r.Leader), r.Servers, health)
		}
		for _, p := range r.Pools {
			fill := fmt.Sprintf("%.1f%%", 100*p.QueueFill)
			if p.Paused {
				fill += " paused"
			}
			spot := "no"
			if p.Spot {
				spot = "yes"
			}
			slots := strconv.Itoa(p.Slots)
			if p.CapacityWindow != nil && p.WorkerSlots > 0 {
				// The window's slots, then the live workers' they come from.
				slots += " of " + strconv.Itoa(p.WorkerSlots)
			}
			wait := "-" // too few claims in the last minute to say
			if p.WaitP99Seconds != nil {
				wait = time.Duration(*p.WaitP99Seconds * float64(time.Second)).Round(time.Millisecond).String()
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%.3f\t%s\t%s\n", r.Name, Or(r.Provider), Or(r.Leader), r.Servers, health,
				p.Name, slots, p.Running, p.Ready, p.Parked, p.Starving, wait, fill, p.PricePerSlotHour, spot, capacityWindow(p.CapacityWindow))
		}
	}
}

// capacityWindow is a pool's capacity window now, in the window's time
// zone: "-" without a capacity schedule, "open: 3 slots until 18:00
// Europe/Berlin", "open: 3 slots all day", "closed until 20:00 UTC".
func capacityWindow(cw *apiv1.CapacityWindow) string {
	if cw == nil {
		return "-"
	}
	until := " all day"
	if cw.NextChange != nil {
		loc, err := time.LoadLocation(cw.Timezone)
		if err != nil {
			loc = time.UTC
		}
		until = " until " + cw.NextChange.In(loc).Format("15:04") + " " + cw.Timezone
	}
	if !cw.Open {
		return "closed" + until
	}
	return fmt.Sprintf("open: %d slots%s", cw.Slots, until)
}

// DAGCancel prints the answer of a DAG cancel as one line; false when
// it does not have the expected shape.
func DAGCancel(out io.Writer, id string, raw json.RawMessage) bool {
	var d struct {
		ID              string  `json:"id"`
		State           string  `json:"state"`
		CancelRequested *string `json:"cancel_requested_at"`
		Nodes           []struct {
			State     string `json:"state"`
			TaskState string `json:"task_state"`
		} `json:"nodes"`
	}
	if json.Unmarshal(raw, &d) != nil || d.State == "" {
		return false
	}
	if d.ID != "" {
		id = d.ID
	}
	if d.CancelRequested == nil {
		_, err := fmt.Fprintf(out, "DAG %s already ended %s: nothing to cancel\n", id, d.State)
		return err == nil
	}
	canceled, stopping := 0, 0
	for _, n := range d.Nodes {
		switch {
		case n.State == "CANCELED" || n.TaskState == "CANCELED":
			canceled++
		case n.State == "RELEASED":
			stopping++
		}
	}
	var err error
	if d.State == "RUNNING" {
		_, err = fmt.Fprintf(out, "DAG %s cancel requested: %d nodes canceled, %d tasks stopping; it ends CANCELED once they stop\n", id, canceled, stopping)
	} else {
		_, err = fmt.Fprintf(out, "DAG %s %s: %d nodes canceled\n", id, d.State, canceled)
	}
	return err == nil
}

// DAG prints a DAG run as a node table when it has the expected shape
// ({id, state, nodes:[{id, state, reason, task_id, task_state, region, pool,
// depends_on}]}); false otherwise.
func DAG(out io.Writer, raw json.RawMessage) bool {
	var d struct {
		ID       string        `json:"id"`
		Name     string        `json:"name"`
		State    string        `json:"state"`
		Schedule string        `json:"schedule"`
		Period   *apiv1.Period `json:"period"`
		Nodes    []struct {
			ID        string   `json:"id"`
			State     string   `json:"state"`
			Reason    string   `json:"reason"`
			TaskID    string   `json:"task_id"`
			TaskState string   `json:"task_state"`
			Region    string   `json:"region"`
			Pool      string   `json:"pool"`
			DependsOn []string `json:"depends_on"`
		} `json:"nodes"`
	}
	if json.Unmarshal(raw, &d) != nil || d.ID == "" || len(d.Nodes) == 0 || d.Nodes[0].ID == "" {
		return false
	}
	w := Table(out)
	fmt.Fprintf(w, "DAG %s\t%s\t%s\n", d.ID, Or(d.State), d.Name)
	if d.Period != nil {
		fmt.Fprintf(w, "Schedule %s\tperiod %s\n", Or(d.Schedule), periodText(*d.Period))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "NODE\tSTATE\tTASK\tTASK STATE\tWHERE\tDEPENDS ON")
	for _, n := range d.Nodes {
		deps := "-"
		if len(n.DependsOn) > 0 {
			deps = fmt.Sprint(n.DependsOn)
		}
		st := Or(n.State)
		if n.Reason != "" && n.State != "SUCCESS" {
			st += " (" + n.Reason + ")"
		}
		where := "-"
		if n.Region != "" {
			where = n.Region + "/" + Or(n.Pool)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, st, Or(n.TaskID), Or(n.TaskState), where, deps)
	}
	return w.Flush() == nil
}

// RawField is a top-level string field of a JSON object, "" when absent.
func RawField(raw json.RawMessage, key string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m[key], &s) != nil {
		return ""
	}
	return s
}

// USD prints dollars at full precision, never rounding a small figure to
// $0.0000: six significant digits ($12.3457, $0.05, $0.000123457).
func USD(v float64) string {
	sign, a := "", v
	if v < 0 {
		sign, a = "-", -v
	}
	if a == 0 {
		return "$0"
	}
	// The shortest decimal of a rounded to six significant digits.
	r, _ := strconv.ParseFloat(strconv.FormatFloat(a, 'g', 6, 64), 64)
	return sign + "$" + strconv.FormatFloat(r, 'f', -1, 64)
}

// CostLine is one row of the table: its dimensions, then the figures at
// full precision (a task can cost well under a cent).
func CostLine(by []string, r apiv1.CostRow, total bool) string {
	cells := make([]string, 0, len(by)+8)
	for i, g := range by {
		v := map[string]string{apiv1.CostGroupTenant: r.Tenant, apiv1.CostGroupType: r.Type, apiv1.CostGroupPool: r.Pool,
			apiv1.CostGroupRegion: r.Region, apiv1.CostGroupDay: r.Day}[g]
		if total {
			v = ""
			if i == 0 {
				v = "TOTAL"
			}
		}
		cells = append(cells, Or(v))
	}
	return strings.Join(append(cells,
		fmt.Sprint(r.Runs), fmt.Sprint(r.FailedRuns), fmt.Sprintf("%.1fs", r.RunSeconds),
		USD(r.SpendUSD), USD(r.ReferenceUSD), USD(r.SavingsUSD), fmt.Sprint(r.SpotRuns), fmt.Sprintf("%.1fs", r.SpotSeconds)), "\t")
}

// eventIDs is how many of an event's task ids Event shows.
const eventIDs = 3

// Event prints "15:04:05.000Z  eu-west  claim  32  id1 id2 id3 (+29)" (the
// time of day in loc, with its zone).
func Event(w io.Writer, region string, e task.Event, loc *time.Location) {
	ids := e.Tasks
	more := ""
	if len(ids) > eventIDs {
		more = fmt.Sprintf(" (+%d)", e.N-eventIDs)
		ids = ids[:eventIDs]
	}
	fmt.Fprintf(w, "%s  %s  %-8s  %5d  %s%s\n", eventTime(e.ID, loc), Or(region), e.Op, e.N, strings.Join(ids, " "), more)
}

// eventTime reads the time out of a Redis stream id ("<ms>-<seq>").
func eventTime(id string, loc *time.Location) string {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n <= 0 {
		return "----------T--:--:--.---"
	}
	return time.UnixMilli(n).In(loc).Format("2006-01-02T15:04:05.000Z07:00")
}

// Explanation prints every candidate: the chosen first, then the
// eligible by score, then the rejected in the server's order; and the
// outcome.
func Explanation(w *tabwriter.Writer, ex *apiv1.Explanation) {
	cands := append([]apiv1.Candidate(nil), ex.Candidates...)
	rank := func(c apiv1.Candidate) int {
		switch {
		case c.Chosen:
			return 0
		case c.Rejected == "":
			return 1
		}
		return 2
	}
	sort.SliceStable(cands, func(i, j int) bool {
		ri, rj := rank(cands[i]), rank(cands[j])
		if ri != rj {
			return ri < rj
		}
		return ri == 1 && cands[i].Score < cands[j].Score
	})
	fmt.Fprintln(w, "\tREGION\tPOOL\tPRICE\tEXP.DURATION\tCOST\tPENALTY\tSCORE\tSTATUS")
	for _, c := range cands {
		mark, status := "", "ok"
		switch {
		case c.Chosen:
			mark, status = "*", "CHOSEN"
		case c.Rejected != "":
			status = c.Rejected
		}
		if c.Detail != "" {
			status += ": " + c.Detail
		}
		// A rejected pool has score parts only when it passed the filters
		// before saturation (it shows what it would have cost).
		scored := c.Rejected == "" || c.Score > 0
		dur, cost, pen, score := "-", "-", "-", "-"
		if scored {
			dur = expectedDuration(c)
			cost = USD(c.BaseCost) + "/task"
			pen = "×" + strconv.FormatFloat(c.Penalty, 'g', 4, 64)
			if c.CrossRegion > 0 {
				pen += " +" + USD(c.CrossRegion)
			}
			score = USD(c.Score)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s/h\t%s\t%s\t%s\t%s\t%s\n", mark, c.Region, c.Pool, USD(c.PricePerSlotHour), dur, cost, pen, score, status)
	}
	switch {
	case ex.Chosen != nil:
		fmt.Fprintf(w, "outcome: %s in %s/%s (score %s)\n", ex.Outcome, ex.Chosen.Region, ex.Chosen.Pool, USD(ex.Chosen.Score))
	case ex.Outcome == "":
		fmt.Fprintln(w, "outcome: no pool chosen")
	default:
		fmt.Fprintf(w, "outcome: %s\n", ex.Outcome)
	}
}

// expectedDuration is a candidate's expected duration and where it came
// from: "4m0s (learnt, 312 runs)", "1s (default)".
func expectedDuration(c apiv1.Candidate) string {
	d := time.Duration(c.ExpectedSeconds * float64(time.Second))
	if d < 10*time.Second {
		d = d.Round(time.Millisecond)
	} else {
		d = d.Round(time.Second)
	}
	switch c.EstimateSource {
	case "":
		return d.String()
	case "default":
		return d.String() + " (default)"
	}
	return fmt.Sprintf("%s (%s, %d runs)", d, c.EstimateSource, c.Observations)
}

// periodText is a logical period as "start → end", RFC 3339 in the
// schedule's zone (as the API gives it).
func periodText(p apiv1.Period) string {
	return p.Start.Format(time.RFC3339) + " → " + p.End.Format(time.RFC3339)
}
