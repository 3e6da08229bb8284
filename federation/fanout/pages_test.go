package fanout_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ax-sched/ax/federation/fanout"
)

// item is a listed thing: the order is its time (ms), newest first; a
// cursor is a time, and the next page holds what is older.
type item struct {
	id string
	ms int
}

var byTime = fanout.Order[item]{
	Newer:     func(a, b item) bool { return a.ms > b.ms },
	Mark:      func(it item) string { return strconv.Itoa(it.ms) },
	NewerMark: func(a, b string) bool { return atoi(a) > atoi(b) },
	Past:      func(it item, mark string) bool { return it.ms < atoi(mark) },
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func ids(items []item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.id)
	}
	return out
}

// listing is a region's store: it pages its items newest first, a page
// of limit after the cursor, with its own cursor when it has more.
func listing(items []item, cursor string, limit int) fanout.Page[item] {
	var p fanout.Page[item]
	for _, it := range items {
		if cursor != "" && it.ms >= atoi(cursor) {
			continue
		}
		if len(p.Items) == limit {
			p.Next = strconv.Itoa(p.Items[len(p.Items)-1].ms)
			break
		}
		p.Items = append(p.Items, it)
	}
	return p
}

// TestMergePages: the regions' items come newest first across regions; a
// page ends at the cursor of the region with more to give, so walking the
// pages by their cursors lists every item of the regions that answer
// once; a region that does not answer is named with its error, and when
// none answers the first error is the answer.
func TestMergePages(t *testing.T) {
	stores := map[string][]item{
		"a": {{"a1", 90}, {"a2", 70}, {"a3", 50}, {"a4", 30}, {"a5", 5}},
		"b": {{"b1", 80}, {"b2", 40}, {"b3", 10}},
		"c": {{"c1", 85}},
	}
	regions := []string{"a", "b", "c"}
	down := errors.New("c: no answer")
	page := func(cursor string, limit int, cDown bool) (*fanout.Merged[item], error) {
		pages := make([]fanout.Page[item], len(regions))
		for i, r := range regions {
			pages[i] = listing(stores[r], cursor, limit)
			if r == "c" && cDown {
				pages[i] = fanout.Page[item]{Err: down}
			}
		}
		return fanout.MergePages(regions, pages, limit, byTime)
	}

	m, err := page("", 2, true)
	if err != nil {
		t.Fatal(err)
	}
	// a and b each gave 2 with more to give (a's cursor 70, b's 40): the
	// page ends at a's, so b2 (40) waits.
	if got := ids(m.Items); !slices.Equal(got, []string{"a1", "b1"}) || m.Next != "80" {
		t.Fatalf("first page %v next %q, want [a1 b1] next 80", got, m.Next)
	}
	if !slices.Equal(m.Unavailable, []string{"c"}) || len(m.Parts) != 3 || !errors.Is(m.Parts[2].Err, down) ||
		m.Parts[0].Count != 2 || m.Parts[1].Count != 2 || m.Parts[2].Count != 0 {
		t.Fatalf("parts %+v unavailable %v", m.Parts, m.Unavailable)
	}

	// Walk every page: each item of every region once, newest first.
	for _, limit := range []int{1, 2, 3, 10} {
		var seen []string
		cursor := ""
		for n := 0; ; n++ {
			if n > 20 {
				t.Fatalf("limit %d: no end after %v", limit, seen)
			}
			m, err := page(cursor, limit, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Items) > limit {
				t.Fatalf("limit %d: a page of %d", limit, len(m.Items))
			}
			seen = append(seen, ids(m.Items)...)
			if m.Next == "" {
				break
			}
			cursor = m.Next
		}
		if want := []string{"a1", "c1", "b1", "a2", "a3", "b2", "a4", "b3", "a5"}; !slices.Equal(seen, want) {
			t.Errorf("limit %d: pages list %v, want %v", limit, seen, want)
		}
	}

	pages := []fanout.Page[item]{{Err: errors.New("first")}, {Err: errors.New("second")}}
	if _, err := fanout.MergePages([]string{"a", "b"}, pages, 10, byTime); err == nil || err.Error() != "first" {
		t.Fatalf("no region answered: %v, want the first error", err)
	}
	if m, err := fanout.MergePages([]string{""}, []fanout.Page[item]{listing(stores["a"], "", 10)}, 10, byTime); err != nil || m.Parts != nil || len(m.Items) != 5 {
		t.Fatalf("outside a federation: %+v %v, want every item and no region named", m, err)
	}
}

// TestPages: this region's page comes from local, the others' from remote
// with a context that ends after Deadline, each in the order of regions,
// all asked at once.
func TestPages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started := make(chan string, 3)
	release := make(chan struct{})
	go func() { // every region is asked before any answers
		for range 3 {
			<-started
		}
		close(release)
	}()
	pages := fanout.Pages(ctx, []string{"a", "b", "c"}, "b",
		func(ctx context.Context) fanout.Page[item] {
			started <- "b"
			<-release
			return fanout.Page[item]{Items: []item{{"local", 1}}}
		},
		func(ctx context.Context, region string) fanout.Page[item] {
			started <- region
			<-release
			if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > fanout.Deadline {
				return fanout.Page[item]{Err: errors.New("no deadline")}
			}
			if region == "c" {
				return fanout.Page[item]{Err: errors.New("c is down")}
			}
			return fanout.Page[item]{Items: []item{{region, 2}}, Next: "2"}
		})
	if len(pages) != 3 || ids(pages[0].Items)[0] != "a" || pages[0].Next != "2" || ids(pages[1].Items)[0] != "local" ||
		pages[2].Err == nil || pages[2].Err.Error() != "c is down" {
		t.Fatalf("pages %+v", pages)
	}
}
