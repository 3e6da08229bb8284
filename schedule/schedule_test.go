package schedule

import (
	"github.com/ax-sched/ax/schedule/slots"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
	"github.com/google/go-cmp/cmp"
)

// Derived ids are valid ax ids: the slot's time, shard 0, the home region,
// and a sequence part that only the schedule's tenant and name decide.
func TestScheduleTaskIDRoundTrip(t *testing.T) {
	slots := []time.Time{
		time.Date(2026, 3, 29, 1, 59, 59, 0, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 1, 0, time.UTC),
		time.Date(2999, 12, 31, 23, 59, 59, 0, time.FixedZone("x", 5*3600+1800)),
	}
	for _, name := range []string{"nightly", "a", "report-eu-1", strings.Repeat("z", 63)} {
		for _, slot := range slots {
			id := TaskID("acme", name, slot, "gcp-euw4")
			p, err := task.ParseID(id)
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			want := task.ParsedID{Time: time.UnixMilli(slot.UnixMilli()).UTC(), Shard: 0, Region: "gcp-euw4"}
			if diff := cmp.Diff(want, p); diff != "" {
				t.Errorf("%s (-want +got):\n%s", id, diff)
			}
			if again := TaskID("acme", name, slot, "gcp-euw4"); again != id {
				t.Errorf("not deterministic: %s then %s", id, again)
			}
			if other := TaskID("acme", name+"x", slot, "gcp-euw4"); other[10:16] == id[10:16] {
				t.Errorf("%s and %sx share a sequence part", name, name)
			}
			if other := TaskID("globex", name, slot, "gcp-euw4"); other[10:16] == id[10:16] {
				t.Errorf("acme's and globex's %s share a sequence part", name)
			}
			if legacy := TaskID("", name, slot, "gcp-euw4"); legacy[10:16] == id[10:16] || legacy[10:16] != TaskID("", name, slot.Add(time.Hour), "x")[10:16] {
				t.Errorf("a legacy definition's %s: sequence part %s, acme's %s", name, legacy[10:16], id[10:16])
			}
			if next := TaskID("acme", name, slot.Add(time.Second), "gcp-euw4"); next <= id || next[10:] != id[10:] {
				t.Errorf("ids of later slots must sort after, with the same name part: %s, %s", id, next)
			}
		}
	}
}

// A definition stored before tenants had namespaces keeps the ids its
// slots had: this one is what the scheduler of that time derived.
func TestScheduleLegacyTaskID(t *testing.T) {
	slot := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	if got, want := TaskID("", "nightly", slot, "aws-use1"), "01k8q7lq80s1iqin.0.aws-use1"; got != want {
		t.Errorf("legacy id %s, want %s (the id before tenant namespaces)", got, want)
	}
	if TaskID("default", "nightly", slot, "aws-use1") == TaskID("", "nightly", slot, "aws-use1") {
		t.Errorf("a new definition of tenant default shares the legacy id")
	}
}

func TestScheduleCron(t *testing.T) {
	at := time.Date(2026, 3, 28, 23, 59, 58, 500e6, time.UTC) // the night before Paris springs forward
	cases := []struct {
		cron, tz string
		want     []string // the next slots after at, RFC 3339
		err      string   // field of the error
	}{
		{cron: "*/1 * * * * *", want: []string{"2026-03-28T23:59:59Z", "2026-03-29T00:00:00Z"}},
		{cron: "0 30 2 * * *", tz: "Europe/Paris", // 02:30 does not exist on 29 March in Paris
			want: []string{"2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"}},
		{cron: "0 0 * * *", want: []string{"2026-03-29T00:00:00Z", "2026-03-30T00:00:00Z"}}, // five fields: no seconds
		{cron: "@hourly", tz: "Asia/Kolkata", want: []string{"2026-03-29T06:00:00+05:30", "2026-03-29T07:00:00+05:30"}},
		{cron: "@every 10s", want: []string{"2026-03-29T00:00:00Z", "2026-03-29T00:00:10Z"}},
		{cron: "@every 90m", want: []string{"2026-03-29T00:00:00Z", "2026-03-29T01:30:00Z"}},
		{cron: "@every 1500ms", err: "cron"},
		{cron: "TZ=Europe/Paris 0 0 * * * *", err: "cron"},
		{cron: "* * * *", err: "cron"},
		{cron: "61 * * * * *", err: "cron"},
		{cron: "@fortnightly", err: "cron"},
		{cron: "0 0 0 * * *", tz: "Mars/Olympus", err: "timezone"},
		{cron: "0 0 0 * * *", tz: "Local", err: "timezone"},
	}
	for _, tc := range cases {
		t.Run(tc.cron+" "+tc.tz, func(t *testing.T) {
			tz := tc.tz
			if tz == "" {
				tz = "UTC"
			}
			c, err := slots.Compile(tc.cron, tz)
			if tc.err != "" {
				fe, ok := err.(*task.FieldError)
				if !ok || fe.Field != tc.err {
					t.Fatalf("error %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for s := c.Next(at); len(got) < len(tc.want); s = c.Next(s) {
				got = append(got, s.Format(time.RFC3339))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("slots (-want +got):\n%s", diff)
			}
		})
	}
}

// planSlots at a fixed now, 20 s after the last slot handled, for a
// schedule firing every second: slots older than the 2 s tolerance are
// missed, the rest are on time.
func TestSchedulePlan(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	c, err := slots.Compile("*/1 * * * * *", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	sec := func(off int) time.Time { return now.Add(time.Duration(off) * time.Second) }
	secs := func(from, to int) []time.Time {
		var out []time.Time
		for i := from; i <= to; i++ {
			out = append(out, sec(i))
		}
		return out
	}
	cases := []struct {
		name    string
		misfire string
		limit   int
		after   time.Time
		want    firePlan
	}{
		{name: "skip", misfire: MisfireSkip, after: sec(-20),
			want: firePlan{skipTo: sec(-3), fire: secs(-2, 0), skipped: 17}},
		{name: "fire once", misfire: MisfireFireOnce, after: sec(-20),
			want: firePlan{fire: secs(-3, 0), skipped: 16}},
		{name: "catch up 5", misfire: MisfireCatchUp, limit: 5, after: sec(-20),
			want: firePlan{fire: secs(-7, 0), skipped: 12}},
		{name: "catch up all", misfire: MisfireCatchUp, limit: 100, after: sec(-20),
			want: firePlan{fire: secs(-19, 0)}},
		{name: "on time", misfire: MisfireFireOnce, after: sec(-1), want: firePlan{fire: secs(0, 0)}},
		{name: "nothing due", misfire: MisfireSkip, after: sec(0), want: firePlan{}},
		{name: "just past the tolerance", misfire: MisfireSkip, after: sec(-3),
			want: firePlan{fire: secs(-2, 0)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &apiv1.Schedule{Name: "s", Misfire: tc.misfire, CatchUpLimit: tc.limit}
			got := planSlots(c, d, tc.after, now, 2*time.Second)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(firePlan{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// A long gap of a sparse schedule is planned without walking it second by
// second: the latest missed slot comes from a binary search.
func TestSchedulePlanLongGap(t *testing.T) {
	c, err := slots.Compile("* * * 1 1 *", "Europe/Paris") // every second of 1 January
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2027, 12, 31, 12, 0, 0, 0, time.UTC)
	after := time.Date(2020, 6, 1, 0, 0, 0, 0, time.UTC)
	start := time.Now()
	p := planSlots(c, &apiv1.Schedule{Misfire: MisfireCatchUp, CatchUpLimit: 3}, after, now, 2*time.Second)
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("planning took %v", el)
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	last := time.Date(2027, 1, 1, 23, 59, 59, 0, paris)
	want := []time.Time{last.Add(-2 * time.Second), last.Add(-time.Second), last}
	if !cmp.Equal(want, p.fire, cmp.Comparer(time.Time.Equal)) {
		t.Errorf("fire %v, want %v", p.fire, want)
	}
	if p.skipped != slots.CountCap {
		t.Errorf("skipped %d, want the cap %d", p.skipped, slots.CountCap)
	}
}

func TestScheduleJitter(t *testing.T) {
	slot := time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC)
	seen := map[time.Duration]bool{}
	for i := range 50 {
		s := slot.Add(time.Duration(i) * time.Hour)
		off := jitterOffset("nightly", s, 30*time.Second)
		if off < 0 || off >= 30*time.Second {
			t.Fatalf("offset %v outside [0, 30s)", off)
		}
		if off != jitterOffset("nightly", s, 30*time.Second) {
			t.Fatal("offset not deterministic")
		}
		seen[off] = true
	}
	if len(seen) < 40 {
		t.Errorf("only %d distinct offsets in 50 slots", len(seen))
	}
	if off := jitterOffset("nightly", slot, 0); off != 0 {
		t.Errorf("no window: offset %v", off)
	}
}
