package period

import (
	"encoding/json"
	"testing"
	"time"
)

func TestRender(t *testing.T) {
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no zone data:", err)
	}
	slot := time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC)
	p := Of(slot, slot.Add(24*time.Hour), loc)
	for _, c := range []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{`{"from":"{{period_start}}","to":"{{period_end}}"}`, `{"from":"2026-03-01T02:00:00+01:00","to":"2026-03-02T02:00:00+01:00"}`},
		{`{"ds":"{{period_date}}","by":"{{schedule}}","x":"{{other}}"}`, `{"ds":"2026-03-01","by":"nightly","x":"{{other}}"}`},
	} {
		got := Render(json.RawMessage(c.in), p, "nightly")
		if string(got) != c.want {
			t.Errorf("Render(%s) = %s, want %s", c.in, got, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("Render(%s) is not JSON: %s", c.in, got)
		}
	}
	if Key(p) != "2026-03-01T01:00:00Z" {
		t.Errorf("Key = %s", Key(p))
	}
}
