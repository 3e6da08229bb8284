package dags

import (
	"slices"
	"testing"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/fanout"
	"github.com/ax-sched/ax/task"
)

// regionPage is a region's page as dag.Runs.List gives it: its runs older
// than the cursor, newest first, at most limit, and the last one's cursor
// when it holds more.
func regionPage(runs []apiv1.DAGSummary, cursor string, limit int) fanout.Page[apiv1.DAGSummary] {
	p := fanout.Page[apiv1.DAGSummary]{Items: []apiv1.DAGSummary{}}
	for _, s := range runs {
		if cursor != "" && !newerMark(cursor, s.Cursor()) {
			continue
		}
		if len(p.Items) == limit {
			p.Next = p.Items[len(p.Items)-1].Cursor()
			break
		}
		p.Items = append(p.Items, s)
	}
	return p
}

// TestListingPagesListEveryRunOnce: walking GET /v1/dags's pages by their
// next_cursor lists every run of every region once, newest first,
// whatever the limit — the run a region's cursor names included.
func TestListingPagesListEveryRunOnce(t *testing.T) {
	run := func(region string, ms int64) apiv1.DAGSummary {
		return apiv1.DAGSummary{ID: task.FormatID(region, 0, 1_767_000_000_000+ms, 1)}
	}
	regions := []string{"eu-west-1", "us-east-1"}
	held := map[string][]apiv1.DAGSummary{
		"eu-west-1": {run("eu-west-1", 90), run("eu-west-1", 70), run("eu-west-1", 50), run("eu-west-1", 10)},
		"us-east-1": {run("us-east-1", 80), run("us-east-1", 40)},
	}
	var want []string
	for _, ms := range []int64{90, 80, 70, 50, 40, 10} {
		r := "eu-west-1"
		if ms == 80 || ms == 40 {
			r = "us-east-1"
		}
		want = append(want, run(r, ms).ID)
	}
	for _, limit := range []int{1, 2, 3, 100} {
		var seen []string
		cursor := ""
		for n := 0; n < 20; n++ {
			pages := []fanout.Page[apiv1.DAGSummary]{regionPage(held[regions[0]], cursor, limit), regionPage(held[regions[1]], cursor, limit)}
			m, err := fanout.MergePages(regions, pages, limit, byMark)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range m.Items {
				seen = append(seen, s.ID)
			}
			if cursor = m.Next; cursor == "" {
				break
			}
		}
		if !slices.Equal(seen, want) {
			t.Errorf("limit %d: the pages list %v, want %v", limit, seen, want)
		}
	}
}
