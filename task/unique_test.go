package task

import (
	"errors"
	"testing"
	"time"
)

func TestGroupingValidation(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name, field string
		mod         func(*Spec)
	}{
		{"negative unique_for", "unique_for", func(s *Spec) { s.UniqueKey, s.UniqueFor = "k", Duration(-time.Second) }},
		{"unique_for too long", "unique_for", func(s *Spec) { s.UniqueKey, s.UniqueFor = "k", Duration(MaxUniqueFor+time.Second) }},
		{"unknown unique_until", "unique_until", func(s *Spec) { s.UniqueKey, s.UniqueUntil = "k", "done" }},
		{"unknown unique_conflict", "unique_conflict", func(s *Spec) { s.UniqueKey, s.UniqueConflict = "k", "fail" }},
		{"unique_for without key", "unique_for", func(s *Spec) { s.UniqueFor = Duration(time.Minute) }},
		{"unique with idempotency", "unique_key", func(s *Spec) { s.UniqueKey, s.IdempotencyKey = "k", "i" }},
		{"debounce with unique", "debounce_key", func(s *Spec) { s.UniqueKey, s.DebounceKey, s.Debounce = "k", "d", Duration(time.Second) }},
		{"debounce without key", "debounce", func(s *Spec) { s.Debounce = Duration(time.Second) }},
		{"debounce key without debounce", "debounce", func(s *Spec) { s.DebounceKey = "d" }},
		{"negative debounce", "debounce", func(s *Spec) { s.DebounceKey, s.Debounce = "d", Duration(-time.Second) }},
		{"debounce with delay", "debounce", func(s *Spec) { s.DebounceKey, s.Debounce, s.Delay = "d", Duration(time.Second), Duration(time.Minute) }},
		{"max_wait below debounce", "debounce_max_wait", func(s *Spec) {
			s.DebounceKey, s.Debounce, s.DebounceMaxWait = "d", Duration(time.Minute), Duration(time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Spec{Type: "t"}
			tc.mod(s)
			var fe *FieldError
			if err := s.Normalize(DefaultDefaults(), now); !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("got %v, want an error naming %s", err, tc.field)
			}
		})
	}
	s := &Spec{Type: "t", Grouping: Grouping{UniqueKey: "k"}}
	if err := s.Normalize(DefaultDefaults(), now); err != nil {
		t.Fatal(err)
	}
	if s.UniqueFor != Duration(DefaultUniqueFor) || s.UniqueUntil != UniqueUntilFinished || s.UniqueConflict != UniqueConflictExisting {
		t.Fatalf("defaults: %+v", s.Grouping)
	}
	if _, err := DecodeSpec([]byte(`{"type":"t","unique_key":"k","unique_for":"soon"}`)); err == nil || !errors.As(err, new(*FieldError)) || err.(*FieldError).Field != "unique_for" {
		t.Fatalf("bad duration: %v", err)
	}
}
