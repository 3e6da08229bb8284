package view

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A placement counts into its pool's Ready from the first figures newer
// than those it was decided on (until then the placer's damping counts it)
// until figures newer than its landing arrive.
func TestFlightsCountWhatTheFiguresMiss(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	fl := NewFlights(time.Minute)
	fl.Add("decided-on-100", "r1", "p", at(100), at(150))
	fl.Add("landed-at-300", "r1", "p", at(100), at(150))
	fl.Landed("landed-at-300", at(300))
	fl.Add("other-pool", "r1", "q", at(100), at(150))
	fl.Add("gone-region", "r9", "p", at(100), at(150))
	ticket := fl.Reserve("r2", "p", at(100), at(150))
	dropped := fl.Reserve("r2", "p", at(100), at(150))
	fl.Bind(ticket, "bound")
	fl.Drop(dropped)

	cases := []struct {
		name    string
		updated map[string]time.Time
		now     time.Time
		want    map[string]int
	}{
		{"figures of the decision: the placer counts them", map[string]time.Time{"r1": at(100), "r2": at(100)}, at(200), nil},
		{"newer figures, nothing landed in them", map[string]time.Time{"r1": at(250), "r2": at(250)}, at(260),
			map[string]int{"r1/p": 2, "r1/q": 1, "r2/p": 1}},
		{"figures newer than the landing hold it", map[string]time.Time{"r1": at(400), "r2": at(400)}, at(410),
			map[string]int{"r1/p": 1, "r1/q": 1, "r2/p": 1}},
		{"older figures again: the landed one is forgotten for good", map[string]time.Time{"r1": at(250)}, at(420),
			map[string]int{"r1/p": 1, "r1/q": 1}},
		{"past the horizon nothing counts", map[string]time.Time{"r1": at(400), "r2": at(400), "r9": at(400)}, at(150).Add(time.Minute + time.Millisecond), nil},
	}
	for _, tc := range cases {
		got := fl.missing(tc.updated, tc.now)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Fatalf("%s: (-want +got)\n%s", tc.name, diff)
		}
	}
	if len(fl.byID) != 0 {
		t.Fatalf("flights left: %v", fl.byID)
	}
}

// A hand-off another server of the region sends counts in flight through
// every newer figures of its target until its watcher lands it (it left
// the outbox), and then until figures newer than that arrive: a slow
// sender never lets a burst past the target's watermark.
func TestAwaitedFlightCountsUntilItLeavesTheOutbox(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	fl := NewFlights(time.Minute)
	ticket := fl.Reserve("r2", "p", at(100), at(150))
	fl.Bind(ticket, "sent-by-the-leader")
	fl.Await("sent-by-the-leader")
	fl.Add("local", "r1", "p", at(100), at(150))
	fl.Landed("local", at(160))
	if diff := cmp.Diff([]string{"sent-by-the-leader"}, fl.Awaited()); diff != "" {
		t.Fatalf("awaited (-want +got)\n%s", diff)
	}
	for _, u := range []int{300, 1000, 5000} {
		got := fl.missing(map[string]time.Time{"r2": at(u)}, at(u+10))
		if diff := cmp.Diff(map[string]int{"r2/p": 1}, got); diff != "" {
			t.Fatalf("figures of %d ms, still in the outbox: (-want +got)\n%s", u, diff)
		}
	}
	fl.Landed("sent-by-the-leader", at(6000))
	if got := fl.Awaited(); len(got) != 0 {
		t.Fatalf("awaited after landing: %v", got)
	}
	if diff := cmp.Diff(map[string]int{"r2/p": 1}, fl.missing(map[string]time.Time{"r2": at(5500)}, at(6010))); diff != "" {
		t.Fatalf("figures older than the landing: (-want +got)\n%s", diff)
	}
	if got := fl.missing(map[string]time.Time{"r2": at(6100)}, at(6110)); got != nil {
		t.Fatalf("figures newer than the landing: %v", got)
	}
}
