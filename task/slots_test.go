package task

import (
	"errors"
	"testing"
	"time"
)

func TestSlotsValidation(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		body  string
		field string // "" when valid
		milli int
	}{
		{`{"type":"t"}`, "", MilliSlots},
		{`{"type":"t","slots":0.25}`, "", 250},
		{`{"type":"t","slots":0.001}`, "", 1},
		{`{"type":"t","slots":1}`, "", MilliSlots},
		{`{"type":"t","slots":null}`, "", MilliSlots},
		{`{"type":"t","slots":0}`, "slots", 0},
		{`{"type":"t","slots":-0.5}`, "slots", 0},
		{`{"type":"t","slots":1.5}`, "slots", 0},
		{`{"type":"t","slots":2}`, "slots", 0},
		{`{"type":"t","slots":0.0005}`, "slots", 0},
		{`{"type":"t","slots":0.2505}`, "slots", 0},
		{`{"type":"t","slots":"half"}`, "slots", 0},
	} {
		t.Run(tc.body, func(t *testing.T) {
			s, err := DecodeSpec([]byte(tc.body))
			if err == nil {
				err = s.Normalize(DefaultDefaults(), now)
			}
			if tc.field != "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tc.field {
					t.Fatalf("got %v, want an error naming %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.SlotMilli(); got != tc.milli {
				t.Fatalf("SlotMilli = %d, want %d", got, tc.milli)
			}
		})
	}
	// A whole slot given is the same task as one left out.
	a, b := &Spec{Type: "t", Slots: 1}, &Spec{Type: "t"}
	_ = a.Normalize(DefaultDefaults(), now)
	_ = b.Normalize(DefaultDefaults(), now)
	if a.Hash() != b.Hash() {
		t.Fatal("slots 1 and slots left out hash apart")
	}
}
