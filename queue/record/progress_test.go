package record

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

func TestProgressOfANewAttemptStartsAtZero(t *testing.T) {
	d := task.DefaultDefaults()
	cases := []struct {
		name     string
		h        map[string]string
		want     float64
		attempt  int
		startMsg bool
	}{
		{"same attempt", map[string]string{"st": "U", "at": "2", "pg": "2\t55.5\t1700000000000\tresized"}, 55.5, 2, false},
		{"a new attempt", map[string]string{"st": "U", "at": "3", "sa": "1700000001000", "pg": "2\t80\t1700000000000\told"}, 0, 3, true},
		{"older JSON", map[string]string{"st": "U", "at": "1", "pg": `{"percent":40,"message":"m","updated_at":"2026-01-01T00:00:00Z"}`}, 40, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := DecodeTask("06f1c2d9k3m8q2zx.0.eu-west", c.h, d).Progress
			if p == nil || p.Percent != c.want || p.Attempt != c.attempt || (p.Message == "attempt 3 started") != c.startMsg {
				t.Fatalf("progress %+v", p)
			}
			if c.startMsg && !p.UpdatedAt.Equal(time.UnixMilli(1700000001000)) {
				t.Fatalf("a new attempt's progress dates from its start, got %v", p.UpdatedAt)
			}
		})
	}
}
