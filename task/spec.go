package task

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Limits and defaults of a task spec (docs/architecture.md §3). Region configs may change
// the defaults through Defaults.
const (
	MaxPriority     = 4
	DefaultPriority = 2
	MaxTypeLen      = 128
	MaxTags         = 32
	MaxIdemKeyLen   = 256
	MaxLimitKeyLen  = 64
	// MaxPricePerSlotHour bounds Spec.MaxPricePerSlotHour (USD).
	MaxPricePerSlotHour = 1e6
	// MaxMaxWait bounds Spec.MaxWait.
	MaxMaxWait = 30 * 24 * time.Hour
	// MaxMaxPause bounds Spec.MaxPause and a region's retry.max_pause.
	MaxMaxPause = 30 * 24 * time.Hour
	MaxErrorLen = 2048
	// DefaultMaxResultBytes is a region's result limit unless its
	// results.max_bytes says otherwise; MaxResultBytes bounds that key. A
	// result over the region's limit fails its attempt
	// (ReasonResultTooLarge), never cut.
	DefaultMaxResultBytes = 64 << 10
	MaxResultBytes        = 1 << 20
	// MaxProgressMessage bounds a progress message (bytes; cut beyond).
	MaxProgressMessage = 512
	// MaxResultTTL bounds Spec.ResultTTL.
	MaxResultTTL = 30 * 24 * time.Hour
)

// Defaults are the region's values for fields a spec leaves out.
type Defaults struct {
	Timeout        time.Duration
	MaxRetries     int
	RetryBase      time.Duration
	RetryCap       time.Duration
	IdempotencyTTL time.Duration
	MaxPayload     int
	// MaxPause is the pause budget of a task whose spec names none
	// (Spec.MaxPause).
	MaxPause time.Duration
}

// DefaultDefaults are docs/architecture.md §3's defaults.
func DefaultDefaults() Defaults {
	return Defaults{
		Timeout:        30 * time.Minute,
		MaxRetries:     4,
		RetryBase:      300 * time.Millisecond,
		RetryCap:       30 * time.Second,
		IdempotencyTTL: 24 * time.Hour,
		MaxPayload:     1 << 20,
		MaxPause:       time.Hour,
	}
}

// Duration is a time.Duration that reads and writes Go duration strings in
// JSON ("1m30s"); a bare number is taken as milliseconds.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q", s)
		}
		*d = Duration(v)
		return nil
	}
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("invalid duration %s", b)
	}
	*d = Duration(time.Duration(ms) * time.Millisecond)
	return nil
}

// Spec is what a client submits (docs/architecture.md §3).
type Spec struct {
	Type           string            `json:"type"`
	Payload        json.RawMessage   `json:"payload,omitempty"`
	Priority       *int              `json:"priority,omitempty"`
	Tags           map[string]string `json:"tags,omitempty"`
	Regions        []string          `json:"regions,omitempty"`
	RunAt          *time.Time        `json:"run_at,omitempty"`
	Delay          Duration          `json:"delay,omitempty"`
	Timeout        Duration          `json:"timeout,omitempty"`
	MaxRetries     *int              `json:"max_retries,omitempty"`
	RetryBase      Duration          `json:"retry_base,omitempty"`
	RetryCap       Duration          `json:"retry_cap,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	IdempotencyTTL Duration          `json:"idempotency_ttl,omitempty"`
	Preemptible    bool              `json:"preemptible,omitempty"`
	Critical       bool              `json:"critical,omitempty"`
	Tenant         string            `json:"tenant,omitempty"`
	TraceID        string            `json:"trace_id,omitempty"`
	// LimitKey names a shared resource (an upstream API, a licence) whose
	// rate and concurrency limits the region's config sets (docs/limits.md).
	LimitKey string `json:"limit_key,omitempty"`
	// MaxPricePerSlotHour, when > 0, is the most the task may be placed
	// at: a pool whose effective price per slot-hour is above it is never
	// chosen (OVER_PRICE_CAP); none under it is 422 (docs/cost.md).
	MaxPricePerSlotHour float64 `json:"max_price_per_slot_hour,omitempty"`
	// MaxWait, when > 0, is the task's own target for its expected wait
	// before it starts: placement takes the cheapest pool whose expected
	// wait stays within it (or the pool's target, whichever is smaller).
	MaxWait Duration `json:"max_wait,omitempty"`
	// MaxPause, when > 0, is the task's pause budget: the most its
	// handler's retry-after answers may make it wait in all. An answer
	// that would take its paused time past it fails the attempt instead
	// (ReasonMaxPauseExceeded). 0: the region's retry.max_pause.
	MaxPause Duration `json:"max_pause,omitempty"`
	// Slots is the share of a worker slot the task holds while it runs
	// (0.001..1 in steps of 0.001; left out: 1), so small tasks pack onto
	// one slot (docs/tasks.md "Fractional slots").
	Slots Slots `json:"slots,omitempty"`
	Grouping
	// ResultTTL, when > 0, is how long the task's record and result are
	// kept after it succeeds (0: the region's retention.success); the
	// region's sweep removes them after it.
	ResultTTL Duration `json:"result_ttl,omitempty"`
	// Parents are a DAG node's parents' results (ParentResults): written
	// by the run's release and carried by hand-offs; a client's submit
	// naming them is refused (RefuseInternal).
	Parents ParentResults `json:"parents,omitempty"`
	// Batch is the id of the batch the task is a member of (package
	// batch): written by the batch's create and carried by hand-offs, so
	// whichever region ends the task reports its end to the batch; a
	// client's submit naming it is refused (RefuseInternal).
	Batch string `json:"batch,omitempty"`
	// ScheduleEnd marks the task as the run of a single-task schedule's
	// slot: "s/<tenant>/<schedule>/<period start, unix ms>" (ScheduleEndOf).
	// Written by the schedule's leader and carried by hand-offs, so
	// whichever region ends the task records its end for the gates waiting
	// for it; a client's submit naming it is refused (RefuseInternal).
	ScheduleEnd string `json:"schedule_end,omitempty"`
}

var (
	typeRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]*$`)
	tagKeyRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)
	tenantRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	regionRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	traceRe  = regexp.MustCompile(`^[0-9a-f]{32}$`)
	limitRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]*$`)
)

// DecodeSpec strictly decodes one JSON spec: unknown fields are rejected and
// named, trailing data is an error.
func DecodeSpec(data []byte) (*Spec, error) {
	// One strict pass; a spec it refuses is read again to name the fault,
	// an unknown key first (a well-formed spec is not walked twice).
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		if key, ok := UnknownKey(data, reflect.TypeFor[Spec]()); ok {
			return nil, &FieldError{Field: key, Msg: "unknown field"}
		}
		if f := badTimeField(data); f != nil {
			return nil, f
		}
		return nil, jsonFieldError(err)
	}
	if dec.More() {
		return nil, fieldErr("", "unexpected data after the JSON object")
	}
	return &s, nil
}

// badTimeField finds a duration or time field that does not parse, so its
// error can name the field (encoding/json reports an Unmarshaler's error
// without the field's name).
func badTimeField(data []byte) *FieldError {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	for _, f := range append([]string{"delay", "timeout", "retry_base", "retry_cap", "idempotency_ttl", "max_wait", "max_pause", "result_ttl"}, groupingDurations...) {
		if raw, ok := m[f]; ok {
			var d Duration
			if err := json.Unmarshal(raw, &d); err != nil {
				return &FieldError{Field: f, Msg: "must be a duration such as \"90s\" or a number of milliseconds"}
			}
		}
	}
	if raw, ok := m["slots"]; ok {
		var v Slots
		if err := json.Unmarshal(raw, &v); err != nil {
			return &FieldError{Field: "slots", Msg: "must be a number from 0.001 to 1"}
		}
	}
	if raw, ok := m["run_at"]; ok {
		var t time.Time
		if err := json.Unmarshal(raw, &t); err != nil {
			return &FieldError{Field: "run_at", Msg: "must be an RFC 3339 time such as \"2026-12-01T08:00:00Z\""}
		}
	}
	return nil
}

// jsonFieldError turns encoding/json errors into FieldErrors by their
// types (never by their text).
func jsonFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field == "" {
		// The whole value ([1,2], "x"): not Go's type name.
		return fieldErr("", "a task spec must be a JSON object")
	}
	if errors.As(err, &te) {
		return fieldErr(te.Field, "must be %s", te.Type.String())
	}
	if errors.Is(err, io.EOF) {
		return fieldErr("", "empty body; a JSON task spec is required")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fieldErr("", "invalid JSON at byte %d: %v", se.Offset, se)
	}
	return fieldErr("", "invalid JSON: %v", err)
}

// CheckType reports whether typ is a task type name: 1 to MaxTypeLen
// letters, digits and _ . : / - (so a list of types can be comma-joined),
// starting with a letter or digit. The error is a *FieldError on "type".
func CheckType(typ string) error {
	switch {
	case typ == "":
		return fieldErr("type", "is required")
	case len(typ) > MaxTypeLen:
		return fieldErr("type", "longer than %d characters", MaxTypeLen)
	case !typeRe.MatchString(typ):
		return fieldErr("type", "may hold letters, digits and _ . : / - only")
	}
	return nil
}

// Normalize validates the spec and fills defaults in place. now resolves
// delay into run_at. Errors are *FieldError; the fields are checked in the
// order below and the first error is returned.
func (s *Spec) Normalize(d Defaults, now time.Time) error {
	if err := CheckType(s.Type); err != nil {
		return err
	}
	if err := s.normalizePayload(d.MaxPayload); err != nil {
		return err
	}
	if err := s.normalizePriority(); err != nil {
		return err
	}
	if err := s.checkTags(); err != nil {
		return err
	}
	if err := s.checkRegions(); err != nil {
		return err
	}
	if err := s.normalizeRunAt(now); err != nil {
		return err
	}
	if err := s.normalizeRetries(d); err != nil {
		return err
	}
	if err := s.normalizeIdempotency(d); err != nil {
		return err
	}
	if err := s.normalizeGrouping(); err != nil {
		return err
	}
	if err := s.normalizeSlots(); err != nil {
		return err
	}
	if err := s.normalizeTenant(); err != nil {
		return err
	}
	return s.checkCaps()
}

// normalizePayload checks the payload's size (limit 0: none) and JSON,
// compacts it, and drops a JSON null.
func (s *Spec) normalizePayload(limit int) error {
	if limit > 0 && len(s.Payload) > limit {
		return &FieldError{Field: "payload", Msg: fmt.Sprintf("larger than %d bytes", limit), TooLarge: true}
	}
	if len(s.Payload) == 0 {
		return nil
	}
	if !json.Valid(s.Payload) {
		return fieldErr("payload", "is not valid JSON")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, s.Payload); err == nil {
		s.Payload = buf.Bytes()
	}
	if string(s.Payload) == "null" {
		s.Payload = nil
	}
	return nil
}

// normalizePriority checks the priority, DefaultPriority when left out.
func (s *Spec) normalizePriority() error {
	if s.Priority == nil {
		p := DefaultPriority
		s.Priority = &p
		return nil
	}
	if *s.Priority < 0 || *s.Priority > MaxPriority {
		return fieldErr("priority", "must be between 0 and %d", MaxPriority)
	}
	return nil
}

// checkTags checks the number of tags and each key and value.
func (s *Spec) checkTags() error {
	if len(s.Tags) > MaxTags {
		return fieldErr("tags", "more than %d tags", MaxTags)
	}
	for k, v := range s.Tags {
		if !tagKeyRe.MatchString(k) {
			return fieldErr("tags."+k, "tag keys are lowercase letters, digits, _ . - (at most 63)")
		}
		if v == "" || len(v) > 63 || strings.ContainsAny(v, ",=\t\n\"\\") {
			return fieldErr("tags."+k, "tag values are 1–63 characters without , = quotes or control characters")
		}
	}
	return nil
}

// checkRegions checks that every region is a region name, listed once.
func (s *Spec) checkRegions() error {
	seen := map[string]bool{}
	for i, r := range s.Regions {
		if !regionRe.MatchString(r) {
			return fieldErr(fmt.Sprintf("regions[%d]", i), "is not a region name")
		}
		if seen[r] {
			return fieldErr(fmt.Sprintf("regions[%d]", i), "listed twice")
		}
		seen[r] = true
	}
	return nil
}

// normalizeRunAt resolves a delay into run_at (UTC) and clears a run_at
// that is not after now (due now). At most one of the two may be given.
func (s *Spec) normalizeRunAt(now time.Time) error {
	if s.RunAt != nil && s.Delay != 0 {
		return fieldErr("delay", "give run_at or delay, not both")
	}
	if s.Delay < 0 {
		return fieldErr("delay", "must not be negative")
	}
	if s.Delay > 0 {
		t := now.Add(time.Duration(s.Delay)).UTC()
		s.RunAt, s.Delay = &t, 0
	}
	if s.RunAt == nil {
		return nil
	}
	if s.RunAt.Year() > 9999 || s.RunAt.Year() < 1970 {
		return fieldErr("run_at", "out of range")
	}
	if !s.RunAt.After(now) {
		s.RunAt = nil // due now
	}
	return nil
}

// normalizeRetries checks the timeout, max_retries, retry_base and
// retry_cap, each the region's default when left out (0 or absent).
func (s *Spec) normalizeRetries(d Defaults) error {
	if s.Timeout < 0 {
		return fieldErr("timeout", "must not be negative")
	}
	if s.Timeout == 0 {
		s.Timeout = Duration(d.Timeout)
	}
	if time.Duration(s.Timeout) < time.Millisecond {
		return fieldErr("timeout", "must be at least 1ms")
	}
	if s.MaxRetries == nil {
		r := d.MaxRetries
		s.MaxRetries = &r
	} else if *s.MaxRetries < 0 || *s.MaxRetries > 100 {
		return fieldErr("max_retries", "must be between 0 and 100")
	}
	if s.RetryBase < 0 {
		return fieldErr("retry_base", "must not be negative")
	}
	if s.RetryBase == 0 {
		s.RetryBase = Duration(d.RetryBase)
	}
	if s.RetryCap < 0 {
		return fieldErr("retry_cap", "must not be negative")
	}
	if s.RetryCap == 0 {
		s.RetryCap = Duration(d.RetryCap)
	}
	if s.RetryCap < s.RetryBase {
		return fieldErr("retry_cap", "must not be below retry_base")
	}
	return nil
}

// normalizeIdempotency checks the idempotency key and TTL; a key without
// a TTL gets the region's default, a TTL without a key is an error.
func (s *Spec) normalizeIdempotency(d Defaults) error {
	if len(s.IdempotencyKey) > MaxIdemKeyLen {
		return fieldErr("idempotency_key", "longer than %d characters", MaxIdemKeyLen)
	}
	if s.IdempotencyTTL < 0 {
		return fieldErr("idempotency_ttl", "must not be negative")
	}
	if s.IdempotencyKey != "" && s.IdempotencyTTL == 0 {
		s.IdempotencyTTL = Duration(d.IdempotencyTTL)
	}
	if s.IdempotencyKey == "" && s.IdempotencyTTL != 0 {
		return fieldErr("idempotency_ttl", "only with idempotency_key")
	}
	return nil
}

// normalizeTenant checks the tenant name, "default" when left out.
func (s *Spec) normalizeTenant() error {
	if s.Tenant == "" {
		s.Tenant = "default"
		return nil
	}
	if !tenantRe.MatchString(s.Tenant) {
		return fieldErr("tenant", "letters, digits, _ . - only (at most 64)")
	}
	return nil
}

// checkCaps checks the price cap, the wait target, the pause budget, the result TTL, the
// limit key, the trace id and the parents' results.
func (s *Spec) checkCaps() error {
	if p := s.MaxPricePerSlotHour; p < 0 || math.IsNaN(p) || math.IsInf(p, 0) || p > MaxPricePerSlotHour {
		return fieldErr("max_price_per_slot_hour", "must be a price per slot-hour in USD, 0 (no cap) to %g", float64(MaxPricePerSlotHour))
	}
	if s.MaxWait < 0 || time.Duration(s.MaxWait) > MaxMaxWait {
		return fieldErr("max_wait", "must be a duration from 0 (no target) to %v", MaxMaxWait)
	}
	if s.MaxPause < 0 || time.Duration(s.MaxPause) > MaxMaxPause {
		return fieldErr("max_pause", "must be a duration from 0 (the region's retry.max_pause) to %v", MaxMaxPause)
	}
	if s.ResultTTL < 0 || time.Duration(s.ResultTTL) > MaxResultTTL || (s.ResultTTL > 0 && time.Duration(s.ResultTTL) < time.Second) {
		return fieldErr("result_ttl", "must be a duration from 1s to %v (0: the region's retention)", MaxResultTTL)
	}
	if err := ValidLimitKey(s.LimitKey); err != "" && s.LimitKey != "" {
		return fieldErr("limit_key", "%s", err)
	}
	if s.TraceID != "" && !traceRe.MatchString(s.TraceID) {
		return fieldErr("trace_id", "must be 32 lowercase hex digits (W3C trace-id)")
	}
	return s.checkParents()
}

// Hash is a digest of everything that makes two specs "the same task" for
// idempotency: the spec without its scheduling time and trace id.
func (s *Spec) Hash() string {
	c := *s
	c.RunAt, c.Delay, c.TraceID = nil, 0, ""
	b, _ := json.Marshal(canonical(c))
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:12])
}

// canonical returns a value whose JSON is stable: maps are sorted by
// encoding/json already; regions are sorted here.
func canonical(s Spec) Spec {
	if len(s.Regions) > 1 {
		r := append([]string(nil), s.Regions...)
		sort.Strings(r)
		s.Regions = r
	}
	return s
}

// ValidLimitKey says what is wrong with a limit key ("" when nothing): at
// most MaxLimitKeyLen bytes of letters, digits and _ . : / - (the record
// keeps a task's keys in one comma-separated field).
func ValidLimitKey(k string) string {
	switch {
	case k == "":
		return "must not be empty"
	case len(k) > MaxLimitKeyLen:
		return fmt.Sprintf("longer than %d bytes", MaxLimitKeyLen)
	case !limitRe.MatchString(k):
		return "letters, digits, _ . : / - only, starting with a letter or digit"
	}
	return ""
}
