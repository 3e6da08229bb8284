package record

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ax-sched/ax/task"
)

// The task hash uses short field names to stay small (docs/architecture.md §4):
//
//	st state code  rs reason (CLAIMED implied while st is U)  ty type  pl payload  pr priority
//	tg tags k=v,.. rg regions   to timeout   mr max retries
//	rb/rc retry base/cap (ms)   ik idem key  pe preemptible cr critical
//	tn tenant (absent: default) tr trace id (absent: derived from the id)
//	ct created  du due  eq enqueue  rt ready  sa started  fa finished (ms)
//	po pool  pn pinned  wk worker  lt lease token  at attempts (an attempt's
//	deadline is sa + timeout, not stored)
//	er last error  rv result  cx cancel requested  pq preempt requested
//	pc preempt count  ho handed off to  px price at claim  ke keep enqueue
//	mp max price per slot-hour (the spec's cap)
//	ob hand-off target region (in the outbox)  lg the trail list exists
//	hx received from another region at (ms): the trail list holds the steps
//	   it brought and its RECEIVED step
//	lk limit key  lc the limit keys whose concurrency a RUNNING task holds
//	   (",k:a,n:b,")  pk the limit key a READY task is parked under (limits.go)
//	xt result_ttl (ms)  rx when a SUCCESS record is due for removal (ms)
//	xp max pause, the spec's pause budget (ms)  pd paused in all by its
//	   handler's retry-after answers (ms; return.lua)
//	pg progress "<attempt>\t<percent>\t<updated ms>\t<message>"
//	uk unique key  dk debounce key  pa a DAG node's parents' results (JSON
//	   object, node id → base64)
var stateCodes = map[task.State]string{
	task.Pending: "P", task.Ready: "R", task.Running: "U", task.Success: "S", task.Failed: "F",
	task.Canceled: "C", task.HandedOff: "H", task.Timeout: "T",
}

var codeStates = func() map[string]task.State {
	m := make(map[string]task.State, len(stateCodes))
	for s, c := range stateCodes {
		m[c] = s
	}
	return m
}()

// stateCodeOf is the record's code of a state ("" for none).
func StateCodeOf(st task.State) string {
	if c, ok := stateCodes[st]; ok {
		return c
	}
	return string(st)
}

func StateOf(code string) task.State {
	if s, ok := codeStates[code]; ok {
		return s
	}
	return task.State(code)
}

// encodeTags writes tags as sorted "k=v,k=v" (values cannot hold , or =).
func EncodeTags(tags map[string]string) string {
	if len(tags) == 0 {
		return ""
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(tags[k])
	}
	return b.String()
}

func DecodeTags(s string) map[string]string {
	if s == "" {
		return nil
	}
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// specFields is the static part of a new task's hash. Fields equal to the
// region defaults are left out (scripts and decodeTask fill them back).
func SpecFields(s *task.Spec, d task.Defaults) []any {
	f := make([]any, 0, 24)
	f = append(f, "ty", s.Type)
	if len(s.Payload) > 0 {
		f = append(f, "pl", string(s.Payload))
	}
	if t := EncodeTags(s.Tags); t != "" {
		f = append(f, "tg", t)
	}
	if len(s.Regions) > 0 {
		f = append(f, "rg", strings.Join(s.Regions, ","))
	}
	if time.Duration(s.Timeout) != d.Timeout {
		f = append(f, "to", Ms(time.Duration(s.Timeout)))
	}
	if *s.MaxRetries != d.MaxRetries {
		f = append(f, "mr", strconv.Itoa(*s.MaxRetries))
	}
	if time.Duration(s.RetryBase) != d.RetryBase {
		f = append(f, "rb", Ms(time.Duration(s.RetryBase)))
	}
	if time.Duration(s.RetryCap) != d.RetryCap {
		f = append(f, "rc", Ms(time.Duration(s.RetryCap)))
	}
	if s.IdempotencyKey != "" {
		f = append(f, "ik", s.IdempotencyKey)
	}
	if s.Preemptible {
		f = append(f, "pe", "1")
	}
	if s.Critical {
		f = append(f, "cr", "1")
	}
	if s.Tenant != "" && s.Tenant != "default" {
		f = append(f, "tn", s.Tenant)
	}
	if s.TraceID != "" {
		f = append(f, "tr", s.TraceID)
	}
	if s.MaxPricePerSlotHour > 0 {
		f = append(f, "mp", strconv.FormatFloat(s.MaxPricePerSlotHour, 'f', -1, 64))
	}
	if s.LimitKey != "" {
		f = append(f, "lk", s.LimitKey)
	}
	if s.MaxWait > 0 {
		f = append(f, "mw", Ms(time.Duration(s.MaxWait)))
	}
	if s.MaxPause > 0 {
		f = append(f, "xp", Ms(time.Duration(s.MaxPause)))
	}
	if m := s.SlotMilli(); m != task.MilliSlots {
		f = append(f, "sl", strconv.Itoa(m))
	}
	if s.ResultTTL > 0 {
		f = append(f, "xt", Ms(time.Duration(s.ResultTTL)))
	}
	if s.UniqueKey != "" {
		f = append(f, "uk", s.UniqueKey)
	}
	if s.DebounceKey != "" {
		f = append(f, "dk", s.DebounceKey)
	}
	if len(s.Parents) > 0 {
		b, _ := json.Marshal(s.Parents) // a map of byte slices always encodes
		f = append(f, "pa", string(b))
	}
	if s.Batch != "" {
		f = append(f, "bt", s.Batch)
	}
	if s.ScheduleEnd != "" {
		f = append(f, "se", s.ScheduleEnd)
	}
	return f
}

func Ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func MsTime(s string) *time.Time {
	if s == "" {
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil
	}
	t := time.UnixMilli(v).UTC()
	return &t
}

func Atoi(s string) int { v, _ := strconv.Atoi(s); return v }

func msDur(s string) task.Duration {
	v, _ := strconv.ParseInt(s, 10, 64)
	return task.Duration(time.Duration(v) * time.Millisecond)
}

// decodeTask builds a Task from a hash given as field→value; d fills the
// fields a record leaves out because they equal the region defaults.
func DecodeTask(id string, h map[string]string, d task.Defaults) *task.Task {
	var r TaskReader
	r.T = &task.Task{ID: id}
	for k, v := range h {
		r.Set(k, v)
	}
	return r.Finish(d)
}

// decodePairs is decodeTask for a flat field, value, … reply (a record as
// a script returns it), without building a map: claims decode every
// record they take.
func DecodePairs(id string, pairs []any, d task.Defaults) *task.Task {
	var r TaskReader
	r.T = &task.Task{ID: id}
	for i := 0; i+1 < len(pairs); i += 2 {
		k, _ := pairs[i].(string)
		v, _ := pairs[i+1].(string)
		r.Set(k, v)
	}
	return r.Finish(d)
}

// taskReader fills a Task field by field and remembers which of the
// fields that default to the region's values were present.
type TaskReader struct {
	T                          *task.Task
	hasTo, hasMr, hasRb, hasRc bool
}

// set applies record field k: the spec's fields (setSpec), else the
// state's (setState); an unknown field is ignored.
func (r *TaskReader) Set(k, v string) {
	if !r.setSpec(k, v) {
		r.setState(k, v)
	}
}

// setSpec applies k when it is a field of the spec and says whether it was.
func (r *TaskReader) setSpec(k, v string) bool {
	t := r.T
	switch k {
	case "ty":
		t.Type = v
	case "pl":
		if v != "" {
			t.Payload = json.RawMessage(v)
		}
	case "pr":
		t.Priority = Atoi(v)
	case "tg":
		t.Tags = DecodeTags(v)
	case "rg":
		if v != "" {
			t.Regions = strings.Split(v, ",")
		}
	case "to":
		t.Timeout, r.hasTo = msDur(v), v != ""
	case "mr":
		t.MaxRetries, r.hasMr = Atoi(v), v != ""
	case "rb":
		t.RetryBase, r.hasRb = msDur(v), v != ""
	case "rc":
		t.RetryCap, r.hasRc = msDur(v), v != ""
	case "ik":
		t.IdempotencyKey = v
	case "pe":
		t.Preemptible = v == "1"
	case "cr":
		t.Critical = v == "1"
	case "tn":
		t.Tenant = v
	case "tr":
		t.TraceID = v
	case "lk":
		t.LimitKey = v
	case "mp":
		t.MaxPricePerSlotHour, _ = strconv.ParseFloat(v, 64)
	case "mw":
		t.MaxWait = msDur(v)
	case "xp":
		t.MaxPause = msDur(v)
	case "sl":
		if m := Atoi(v); m > 0 && m < task.MilliSlots {
			t.Slots = task.Slots(m) / task.MilliSlots
		}
	case "xt":
		t.ResultTTL = msDur(v)
	case "uk":
		t.UniqueKey = v
	case "dk":
		t.DebounceKey = v
	case "pa":
		_ = json.Unmarshal([]byte(v), &t.Parents) // written by SpecFields
	case "bt":
		t.Batch = v
	case "se":
		t.ScheduleEnd = v
	default:
		return false
	}
	return true
}

// setState applies k when it is a field of the task's life (state, lease,
// attempts, times, hand-off).
func (r *TaskReader) setState(k, v string) {
	t := r.T
	switch k {
	case "st":
		t.State = StateOf(v)
	case "rs":
		t.Reason = v
	case "po":
		t.Pool = v
	case "pn":
		t.Pinned = v == "1"
	case "wk":
		t.Worker = v
	case "at":
		t.Attempts = Atoi(v)
	case "pc":
		t.PreemptCount = Atoi(v)
	case "cx":
		t.CancelRequested = v == "1"
	case "ho":
		t.HandedOffTo = v
	case "ob":
		t.HandOffTarget = v
	case "br":
		t.BudgetHold = v
	case "pd":
		t.Paused = msDur(v)
	case "er":
		t.LastError = v
	case "rv":
		t.Result = v
	case "rx":
		t.ResultExpiresAt = MsTime(v)
	case "pg":
		t.Progress = decodeProgress(v)
	case "du":
		t.DueAt = MsTime(v)
	case "eq":
		t.EnqueuedAt = MsTime(v)
	case "rt":
		t.ReadyAt = MsTime(v)
	case "sa":
		t.StartedAt = MsTime(v)
	case "fa":
		t.FinishedAt = MsTime(v)
	case "lt":
		t.LeaseToken = v
	case "ct":
		if c := MsTime(v); c != nil {
			t.CreatedAt = *c
		}
	case "px":
		if v != "" {
			t.PricePerHour, _ = strconv.ParseFloat(v, 64)
		}
	}
}

func (r *TaskReader) Finish(d task.Defaults) *task.Task {
	t := r.T
	if !r.hasTo {
		t.Timeout = task.Duration(d.Timeout)
	}
	if !r.hasMr {
		t.MaxRetries = d.MaxRetries
	}
	if !r.hasRb {
		t.RetryBase = task.Duration(d.RetryBase)
	}
	if !r.hasRc {
		t.RetryCap = task.Duration(d.RetryCap)
	}
	switch {
	case t.State == task.Running:
		t.Reason = task.ReasonClaimed // implied: claim leaves rs as it was
	case t.State == task.Success:
		t.Reason = task.ReasonCompleted // implied: complete leaves rs as it was
	case t.Reason == "" && t.State == task.Ready:
		t.Reason = task.ReasonPlaced
	}
	if t.Tenant == "" {
		t.Tenant = "default"
	}
	if t.TraceID == "" {
		t.TraceID = task.TraceIDFor(t.ID)
	}
	t.Progress = progressOf(t)
	if p, err := task.ParseID(t.ID); err == nil {
		t.Region = p.Region
	}
	return t
}

// bound cuts s to at most max bytes on a UTF-8 boundary (results keep
// their newlines; they never go into the trail).
func Bound(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// clean makes free text safe for the tab-separated trail and bounds it.
func Clean(s string, max int) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, Bound(s, max))
}
