package queue

import (
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The task hash uses short field names to stay small (DESIGN §3):
//
//	st state code  rs reason    ty type      pl payload   pr priority
//	tg tags k=v,.. rg regions   to timeout   mr max retries
//	rb/rc retry base/cap (ms)   ik idem key  pe preemptible cr critical
//	tn tenant (absent: default) tr trace id (absent: derived from the id)
//	ct created  du due  eq enqueue  rt ready  sa started  fa finished (ms)
//	po pool  pn pinned  wk worker  lt lease token  dl deadline  at attempts
//	er last error  rv result  cx cancel requested  pq preempt requested
//	pc preempt count  ho handed off to  px price at claim  ke keep enqueue
//	ob hand-off target region (in the outbox)
var stateCodes = map[State]string{
	Pending: "P", Ready: "R", Running: "U", Success: "S", Failed: "F",
	Canceled: "C", HandedOff: "H", Timeout: "T",
}

var codeStates = func() map[string]State {
	m := make(map[string]State, len(stateCodes))
	for s, c := range stateCodes {
		m[c] = s
	}
	return m
}()

func stateOf(code string) State {
	if s, ok := codeStates[code]; ok {
		return s
	}
	return State(code)
}

// encodeTags writes tags as sorted "k=v,k=v" (values cannot hold , or =).
func encodeTags(tags map[string]string) string {
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

func decodeTags(s string) map[string]string {
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
func specFields(s *Spec, d Defaults) []any {
	f := make([]any, 0, 24)
	f = append(f, "ty", s.Type)
	if len(s.Payload) > 0 {
		f = append(f, "pl", string(s.Payload))
	}
	if t := encodeTags(s.Tags); t != "" {
		f = append(f, "tg", t)
	}
	if len(s.Regions) > 0 {
		f = append(f, "rg", strings.Join(s.Regions, ","))
	}
	if time.Duration(s.Timeout) != d.Timeout {
		f = append(f, "to", ms(time.Duration(s.Timeout)))
	}
	if *s.MaxRetries != d.MaxRetries {
		f = append(f, "mr", strconv.Itoa(*s.MaxRetries))
	}
	if time.Duration(s.RetryBase) != d.RetryBase {
		f = append(f, "rb", ms(time.Duration(s.RetryBase)))
	}
	if time.Duration(s.RetryCap) != d.RetryCap {
		f = append(f, "rc", ms(time.Duration(s.RetryCap)))
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
	return f
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func msTime(s string) *time.Time {
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

func atoi(s string) int { v, _ := strconv.Atoi(s); return v }

func msDur(s string) Duration {
	v, _ := strconv.ParseInt(s, 10, 64)
	return Duration(time.Duration(v) * time.Millisecond)
}

// TraceIDFor derives a stable W3C trace id from a task id when the client
// gave none, so no bytes are spent storing a generated one.
func TraceIDFor(id string) string {
	var b [16]byte
	copy(b[:], id)
	for i := 16; i < len(id); i++ {
		b[i%16] ^= id[i]
	}
	return hex.EncodeToString(b[:])
}

// decodeTask builds a Task from a hash given as field→value; d fills the
// fields a record leaves out because they equal the region defaults.
func decodeTask(id string, h map[string]string, d Defaults) *Task {
	t := &Task{
		ID:              id,
		Type:            h["ty"],
		Priority:        atoi(h["pr"]),
		Tags:            decodeTags(h["tg"]),
		Timeout:         msDur(h["to"]),
		MaxRetries:      atoi(h["mr"]),
		RetryBase:       msDur(h["rb"]),
		RetryCap:        msDur(h["rc"]),
		IdempotencyKey:  h["ik"],
		Preemptible:     h["pe"] == "1",
		Critical:        h["cr"] == "1",
		Tenant:          h["tn"],
		TraceID:         h["tr"],
		State:           stateOf(h["st"]),
		Reason:          h["rs"],
		Pool:            h["po"],
		Pinned:          h["pn"] == "1",
		Worker:          h["wk"],
		Attempts:        atoi(h["at"]),
		PreemptCount:    atoi(h["pc"]),
		CancelRequested: h["cx"] == "1",
		HandedOffTo:     h["ho"],
		HandOffTarget:   h["ob"],
		LastError:       h["er"],
		Result:          h["rv"],
		DueAt:           msTime(h["du"]),
		EnqueuedAt:      msTime(h["eq"]),
		ReadyAt:         msTime(h["rt"]),
		StartedAt:       msTime(h["sa"]),
		FinishedAt:      msTime(h["fa"]),
		LeaseToken:      h["lt"],
	}
	if p := h["pl"]; p != "" {
		t.Payload = json.RawMessage(p)
	}
	if r := h["rg"]; r != "" {
		t.Regions = strings.Split(r, ",")
	}
	if h["to"] == "" {
		t.Timeout = Duration(d.Timeout)
	}
	if h["mr"] == "" {
		t.MaxRetries = d.MaxRetries
	}
	if h["rb"] == "" {
		t.RetryBase = Duration(d.RetryBase)
	}
	if h["rc"] == "" {
		t.RetryCap = Duration(d.RetryCap)
	}
	if t.Reason == "" && t.State == Ready {
		t.Reason = ReasonPlaced
	}
	if t.Tenant == "" {
		t.Tenant = "default"
	}
	if t.TraceID == "" {
		t.TraceID = TraceIDFor(id)
	}
	if c := msTime(h["ct"]); c != nil {
		t.CreatedAt = *c
	}
	if px := h["px"]; px != "" {
		t.PricePerHour, _ = strconv.ParseFloat(px, 64)
	}
	if p, err := ParseID(id); err == nil {
		t.Region = p.Region
	}
	return t
}

func pairsToMap(v []any) map[string]string {
	m := make(map[string]string, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		k, _ := v[i].(string)
		s, _ := v[i+1].(string)
		m[k] = s
	}
	return m
}

// bound cuts s to at most max bytes on a UTF-8 boundary (results keep
// their newlines; they never go into the trail).
func bound(s string, max int) string {
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
func clean(s string, max int) string {
	if len(s) > max {
		s = s[:max]
	}
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}
