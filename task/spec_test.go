package task_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// FuzzDecodeSpec: decoding and validation never panic, reject with a
// FieldError, and an accepted spec survives a JSON round trip unchanged.
func FuzzDecodeSpec(f *testing.F) {
	for _, s := range []string{
		`{"type":"report.generate","payload":{"a":1},"priority":1,"tags":{"gpu":"a100"}}`,
		`{"type":"x","delay":"90s","max_retries":0,"idempotency_key":"k","tenant":"acme"}`,
		`{"type":"x","run_at":"2030-01-01T00:00:00Z","regions":["us-east-1","eastus"]}`,
		`{"type":"x","priority":9}`,
		`{"type":"","payload":null}`,
		`{"type":"x","unknown":1}`,
		`{"type":"x","timeout":1500,"retry_base":"1s","retry_cap":"2s"}`,
		`{"type":"x","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","critical":true}`,
		`[1,2]`, `{"type":"x"} {}`, `nul`,
	} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		sp, err := task.DecodeSpec(data)
		if err != nil {
			var fe *task.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("decode error is not a FieldError: %v", err)
			}
			return
		}
		if err := sp.Normalize(task.DefaultDefaults(), now); err != nil {
			var fe *task.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("validation error is not a FieldError: %v", err)
			}
			return
		}
		b, err := json.Marshal(sp)
		if err != nil {
			t.Fatal(err)
		}
		back, err := task.DecodeSpec(b)
		if err != nil {
			t.Fatalf("round trip of %s: %v", b, err)
		}
		if err := back.Normalize(task.DefaultDefaults(), now); err != nil {
			t.Fatalf("re-validate %s: %v", b, err)
		}
		if back.Hash() != sp.Hash() {
			t.Fatalf("round trip changed the spec: %s", b)
		}
	})
}

func TestIDRoundTrip(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 123e6, time.UTC)
	g := task.NewIDGen()
	a := g.New("us-east-1", 3, now)
	b := g.New("us-east-1", 3, now)
	if a >= b {
		t.Fatalf("ids not increasing: %s %s", a, b)
	}
	p, err := task.ParseID(a)
	if err != nil || p.Region != "us-east-1" || p.Shard != 3 || !p.Time.Equal(now.Truncate(time.Millisecond)) {
		t.Fatalf("parse %s: %+v %v", a, p, err)
	}
	for _, bad := range []string{"", "x", "0123456789abcdef.0.", "0123456789abcdeZ.0.r", "0123456789abcdef.01.r", "0123456789abcdef.-1.r"} {
		if _, err := task.ParseID(bad); !errors.Is(err, task.ErrBadID) {
			t.Errorf("ParseID(%q) = %v", bad, err)
		}
	}
}

func TestSpecValidationNamesField(t *testing.T) {
	cases := map[string]string{
		`{"payload":1}`:                                             "type",
		`{"type":"x","priority":5}`:                                 "priority",
		`{"type":"x","tags":{"GPU":"a"}}`:                           "tags.GPU",
		`{"type":"x","regions":["a","a"]}`:                          "regions[1]",
		`{"type":"x","delay":"1s","run_at":"2030-01-01T00:00:00Z"}`: "delay",
		`{"type":"x","retry_base":"2s","retry_cap":"1s"}`:           "retry_cap",
		`{"type":"x","bogus":true}`:                                 "bogus",
		`{"type":"x","priority":"high"}`:                            "priority",
		`{"type":"x","idempotency_ttl":"1h"}`:                       "idempotency_ttl",
		`{"type":"x","trace_id":"xyz"}`:                             "trace_id",
	}
	for in, field := range cases {
		sp, err := task.DecodeSpec([]byte(in))
		if err == nil {
			err = sp.Normalize(task.DefaultDefaults(), time.Now())
		}
		var fe *task.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s: got %v, want field %q", in, err, field)
		}
	}
}

func TestBadTimesNameTheirField(t *testing.T) {
	for in, field := range map[string]string{
		`{"type":"x","delay":"soon"}`:       "delay",
		`{"type":"x","timeout":true}`:       "timeout",
		`{"type":"x","run_at":"tomorrow"}`:  "run_at",
		`{"type":"x","retry_cap":"1 hour"}`: "retry_cap",
	} {
		_, err := task.DecodeSpec([]byte(in))
		var fe *task.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s: %v, want field %s", in, err, field)
		}
	}
}

// A body that is no object, or none at all, says so in the API's words (it
// said "must be task.Spec", Go's type name, and "invalid JSON: EOF").
func TestSpecNotAnObject(t *testing.T) {
	for in, want := range map[string]string{
		`[1,2]`: "a task spec must be a JSON object",
		`"x"`:   "a task spec must be a JSON object",
		``:      "empty body; a JSON task spec is required",
	} {
		_, err := task.DecodeSpec([]byte(in))
		var fe *task.FieldError
		if !errors.As(err, &fe) || fe.Msg != want {
			t.Errorf("DecodeSpec(%q) = %v, want %q", in, err, want)
		}
	}
}

// The federation's regions are named once each, however the caller built
// the list (a schedule's check adds its own region: "east, west, west").
func TestCheckRegionsNamesEachRegionOnce(t *testing.T) {
	err := task.CheckRegions([]string{"west", "nowhere"}, []string{"east", "west", "west"})
	var fe *task.FieldError
	if !errors.As(err, &fe) || fe.Field != "regions[1]" || fe.Msg != `no region "nowhere" in the federation (east, west)` {
		t.Fatalf("CheckRegions: %v", err)
	}
}
