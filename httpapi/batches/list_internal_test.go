package batches

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/fanout"
)

// merge orders every region's batches newest first, ends a page where the
// region with more to give stopped (nothing it holds back is skipped), and
// names a region that did not answer.
func TestMergeEndsWhereARegionStopped(t *testing.T) {
	t0 := time.UnixMilli(1_000_000)
	b := func(id string, ms int) apiv1.BatchStatus {
		return apiv1.BatchStatus{ID: id, CreatedAt: t0.Add(time.Duration(ms) * time.Millisecond)}
	}
	ms := func(n int) string { return strconv.FormatInt(t0.UnixMilli()+int64(n), 10) }
	// a gave 3 and has more (next at its last, 50); b gave all it has.
	parts := []fanout.Page[apiv1.BatchStatus]{
		{Items: []apiv1.BatchStatus{b("a1", 90), b("a2", 70), b("a3", 50)}, Next: ms(50)},
		{Items: []apiv1.BatchStatus{b("b1", 80), b("b2", 40), b("b3", 10)}},
		{Err: errors.New("down")},
	}
	out, err := merge([]string{"a", "b", "c"}, parts, 3)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range out.Batches {
		ids = append(ids, x.ID)
	}
	if got := ids; len(got) != 3 || got[0] != "a1" || got[1] != "b1" || got[2] != "a2" || out.Next != ms(70) {
		t.Fatalf("page %v next %s, want [a1 b1 a2] next %s", ids, out.Next, ms(70))
	}
	if len(out.Unavailable) != 1 || out.Unavailable[0] != "c" || out.Regions[2].Error == nil || out.Regions[0].Count != 3 {
		t.Fatalf("regions %+v unavailable %v", out.Regions, out.Unavailable)
	}
	// A larger page stops at a's cursor: b2 (older than a's 50) waits for
	// the next page, where a's older batches come too.
	out, _ = merge([]string{"a", "b"}, parts[:2], 10)
	if len(out.Batches) != 4 || out.Batches[3].ID != "a3" || out.Next != ms(50) {
		t.Fatalf("page %+v next %s, want 4 ending at a3, next %s", out.Batches, out.Next, ms(50))
	}
	if _, err := merge([]string{"c"}, parts[2:], 10); err == nil || err.Error() != "down" {
		t.Fatalf("no region answered: %v, want its error", err)
	}
}
