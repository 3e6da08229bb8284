package fanout

import (
	"context"
	"sort"
	"sync"
)

// Page is one region's page of a listing: its items newest first and its
// cursor (Next: where its next page starts; "" when it has no more), or
// why it did not answer (Err).
type Page[T any] struct {
	Items []T
	Next  string
	Err   error
}

// Pages asks every region for its page at once and returns the pages in
// the order of regions once each has answered or given up: region here
// (or "", a server outside a federation) through local, every other
// through remote, whose context ends after Deadline.
func Pages[T any](ctx context.Context, regions []string, here string,
	local func(ctx context.Context) Page[T], remote func(ctx context.Context, region string) Page[T]) []Page[T] {
	pages := make([]Page[T], len(regions))
	var wg sync.WaitGroup
	for i, region := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if region == "" || region == here {
				pages[i] = local(ctx)
				return
			}
			rctx, cancel := context.WithTimeout(ctx, Deadline)
			defer cancel()
			pages[i] = remote(rctx, region)
		}()
	}
	wg.Wait()
	return pages
}

// Order is how a listing's pages merge: items newest first (Newer), each
// with its cursor (Mark); the regions' cursors compare with NewerMark, and
// Past tells an item that lies past a cursor (it belongs to a later page).
type Order[T any] struct {
	Newer     func(a, b T) bool
	Mark      func(item T) string
	NewerMark func(a, b string) bool
	Past      func(item T, mark string) bool
}

// Merged is the page merged from every region's.
type Merged[T any] struct {
	Items []T    // newest first, at most the limit
	Next  string // the cursor of the next page ("" at the end)
	// Parts are the regions asked (but "") with what each gave or why it
	// did not answer; Unavailable the ones that did not (nil: none).
	Parts       []RegionPart
	Unavailable []string
}

// MergePages merges the regions' pages into one of at most limit items.
// The page ends where the region with the newest cursor stopped: an item
// of another region past that cursor waits for the next page, where that
// region's older items come too, so no item is skipped or listed twice
// between pages. When no region answered it returns the first one's error.
func MergePages[T any](regions []string, pages []Page[T], limit int, o Order[T]) (*Merged[T], error) {
	out := &Merged[T]{Items: []T{}}
	var all []T
	bound, answered := "", 0
	var firstErr error
	for i, p := range pages {
		part := RegionPart{Region: regions[i], Count: len(p.Items), Err: p.Err}
		if p.Err != nil {
			part.Count = 0
			out.Unavailable = append(out.Unavailable, regions[i])
			if firstErr == nil {
				firstErr = p.Err
			}
		} else {
			answered++
			all = append(all, p.Items...)
			if p.Next != "" && (bound == "" || o.NewerMark(p.Next, bound)) {
				bound = p.Next
			}
		}
		if regions[i] != "" {
			out.Parts = append(out.Parts, part)
		}
	}
	if answered == 0 {
		return nil, firstErr
	}
	sort.SliceStable(all, func(i, j int) bool { return o.Newer(all[i], all[j]) })
	for _, it := range all {
		if bound != "" && o.Past(it, bound) || len(out.Items) == limit {
			break
		}
		out.Items = append(out.Items, it)
	}
	switch {
	case len(out.Items) == limit && (len(all) > limit || bound != ""):
		out.Next = o.Mark(out.Items[len(out.Items)-1])
	case bound != "":
		out.Next = bound
	}
	return out, nil
}
