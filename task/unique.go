package task

import (
	"fmt"
	"time"
)

// Limits and defaults of the grouping fields of a spec.
const (
	// DefaultUniqueFor is how long a unique key holds at most when the spec
	// does not say.
	DefaultUniqueFor = 24 * time.Hour
	// MaxUniqueFor bounds Spec.UniqueFor, Spec.Debounce and
	// Spec.DebounceMaxWait.
	MaxUniqueFor = 30 * 24 * time.Hour
)

// When a unique key is released (Spec.UniqueUntil).
const (
	// UniqueUntilFinished: the key holds while its task waits or runs.
	UniqueUntilFinished = "finished"
	// UniqueUntilStarted: the key holds while its task waits to start.
	UniqueUntilStarted = "started"
	// UniqueUntilWindow: the key holds for unique_for, whatever the task does.
	UniqueUntilWindow = "window"
)

// What a submit meeting a held unique key gets (Spec.UniqueConflict).
const (
	// UniqueConflictExisting answers with the task holding the key (200).
	UniqueConflictExisting = "existing"
	// UniqueConflictReject answers 409 naming unique_key.
	UniqueConflictReject = "reject"
)

// Grouping holds the fields of a spec that tie tasks of one tenant
// together by a key: uniqueness and debounce. Its JSON fields sit in the
// spec's object. A spec names at most one key (idempotency_key, unique_key
// or debounce_key): the key decides the home region and shard the task is
// stored in, and the store decides atomically there.
type Grouping struct {
	// UniqueKey, when set, keeps at most one task of this tenant and key
	// waiting (or running, per UniqueUntil) at a time: a submit meeting a
	// holder creates nothing and answers with it (or 409, UniqueConflict).
	UniqueKey string `json:"unique_key,omitempty"`
	// UniqueFor is the longest the key holds (DefaultUniqueFor when 0).
	UniqueFor Duration `json:"unique_for,omitempty"`
	// UniqueUntil is when the key is released before UniqueFor ends:
	// "finished" (the default), "started" or "window" (never before).
	UniqueUntil string `json:"unique_until,omitempty"`
	// UniqueConflict is "existing" (the default: 200 with the holder's id)
	// or "reject" (409 naming unique_key).
	UniqueConflict string `json:"unique_conflict,omitempty"`

	// DebounceKey, with Debounce, makes the task wait Debounce after its
	// submit; a later submit of the same key while it still waits replaces
	// it (the replaced task ends CANCELED, reason DEBOUNCED) and waits
	// Debounce again, until DebounceMaxWait after the first of the run.
	DebounceKey     string   `json:"debounce_key,omitempty"`
	Debounce        Duration `json:"debounce,omitempty"`
	DebounceMaxWait Duration `json:"debounce_max_wait,omitempty"`
}

// groupingDurations are the duration fields of Grouping (badTimeField
// names them).
var groupingDurations = []string{"unique_for", "debounce", "debounce_max_wait"}

// Key is the spec's one key and the field that names it: its
// idempotency, unique or debounce key ("", "" when none).
func (s *Spec) Key() (key, field string) {
	switch {
	case s.IdempotencyKey != "":
		return s.IdempotencyKey, "idempotency_key"
	case s.UniqueKey != "":
		return s.UniqueKey, "unique_key"
	case s.DebounceKey != "":
		return s.DebounceKey, "debounce_key"
	}
	return "", ""
}

// normalizeGrouping checks the unique and debounce fields and fills their
// defaults. It runs after normalizeRunAt (debounce decides the start).
func (s *Spec) normalizeGrouping() error {
	switch {
	case s.UniqueKey != "" && s.IdempotencyKey != "":
		return fieldErr("unique_key", "give one of idempotency_key, unique_key and debounce_key")
	case s.DebounceKey != "" && (s.IdempotencyKey != "" || s.UniqueKey != ""):
		return fieldErr("debounce_key", "give one of idempotency_key, unique_key and debounce_key")
	}
	if err := s.normalizeUnique(); err != nil {
		return err
	}
	return s.normalizeDebounce()
}

func (s *Spec) normalizeUnique() error {
	if len(s.UniqueKey) > MaxIdemKeyLen {
		return fieldErr("unique_key", "longer than %d characters", MaxIdemKeyLen)
	}
	if s.UniqueFor < 0 || time.Duration(s.UniqueFor) > MaxUniqueFor {
		return fieldErr("unique_for", "must be a duration from 0 (the default, %v) to %v", DefaultUniqueFor, MaxUniqueFor)
	}
	switch s.UniqueUntil {
	case "", UniqueUntilFinished, UniqueUntilStarted, UniqueUntilWindow:
	default:
		return fieldErr("unique_until", "must be %q, %q or %q", UniqueUntilStarted, UniqueUntilFinished, UniqueUntilWindow)
	}
	switch s.UniqueConflict {
	case "", UniqueConflictExisting, UniqueConflictReject:
	default:
		return fieldErr("unique_conflict", "must be %q or %q", UniqueConflictExisting, UniqueConflictReject)
	}
	if s.UniqueKey == "" {
		for _, f := range []struct {
			name string
			set  bool
		}{{"unique_for", s.UniqueFor != 0}, {"unique_until", s.UniqueUntil != ""}, {"unique_conflict", s.UniqueConflict != ""}} {
			if f.set {
				return fieldErr(f.name, "only with unique_key")
			}
		}
		return nil
	}
	if s.UniqueFor == 0 {
		s.UniqueFor = Duration(DefaultUniqueFor)
	}
	if s.UniqueUntil == "" {
		s.UniqueUntil = UniqueUntilFinished
	}
	if s.UniqueConflict == "" {
		s.UniqueConflict = UniqueConflictExisting
	}
	return nil
}

func (s *Spec) normalizeDebounce() error {
	if len(s.DebounceKey) > MaxIdemKeyLen {
		return fieldErr("debounce_key", "longer than %d characters", MaxIdemKeyLen)
	}
	for _, f := range []struct {
		name string
		d    Duration
	}{{"debounce", s.Debounce}, {"debounce_max_wait", s.DebounceMaxWait}} {
		if f.d < 0 || time.Duration(f.d) > MaxUniqueFor {
			return fieldErr(f.name, "must be a duration from 0 to %v", MaxUniqueFor)
		}
	}
	switch {
	case s.DebounceKey == "" && s.Debounce != 0:
		return fieldErr("debounce", "only with debounce_key")
	case s.DebounceKey == "" && s.DebounceMaxWait != 0:
		return fieldErr("debounce_max_wait", "only with debounce_key")
	case s.DebounceKey == "":
		return nil
	case s.Debounce == 0:
		return fieldErr("debounce", "is required with debounce_key: how long the task waits for a newer submit")
	case s.RunAt != nil:
		return fieldErr("debounce", "debounce sets the task's start: give no run_at or delay")
	case s.DebounceMaxWait != 0 && s.DebounceMaxWait < s.Debounce:
		return fieldErr("debounce_max_wait", "must not be below debounce (%v)", time.Duration(s.Debounce))
	}
	return nil
}

// UniqueConflictError is a submit refused because its unique key is held
// (unique_conflict "reject"): ID is the task holding it.
type UniqueConflictError struct{ ID string }

func (e *UniqueConflictError) Error() string {
	return fmt.Sprintf("unique key held by task %s", e.ID)
}
