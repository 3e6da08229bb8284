package task

import (
	"testing"
	"time"
)

func TestScheduleEndParsesBack(t *testing.T) {
	period := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	s := ScheduleEndOf("team-a", "nightly", period)
	tenant, name, got, ok := ParseScheduleEnd(s)
	if !ok || tenant != "team-a" || name != "nightly" || !got.Equal(period) {
		t.Fatalf("ParseScheduleEnd(%q) = %q %q %v %v", s, tenant, name, got, ok)
	}
	for _, bad := range []string{"", "0123456789abcdef", "s/team-a/nightly", "s//n/1", "s/t/n/x", "b/t/n/1"} {
		if _, _, _, ok := ParseScheduleEnd(bad); ok {
			t.Errorf("ParseScheduleEnd(%q) ok, want not a schedule end", bad)
		}
	}
	sp := Spec{ScheduleEnd: s}
	if err := sp.RefuseInternal(); err == nil {
		t.Error("a client's spec naming schedule_end accepted")
	}
}
